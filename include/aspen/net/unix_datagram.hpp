// Unix domain datagram sockets: aspen::unix_datagram, as Tokio's
// UnixDatagram (local messages that keep their boundaries, never reordered
// or lost between two sockets of one machine).
//
//   auto server = aspen::unix_datagram::bind("/run/app/app.dgram");
//   auto client = aspen::unix_datagram::bind("@app-client");   // abstract name
//   co_await client.send_to("ping", "/run/app/app.dgram");
//   char buf[4096];
//   aspen::unix_datagram::received r = co_await server.recv_from(buf, sizeof buf);
//   // r.size bytes from r.path ("" for an unnamed sender); r.truncated
//   co_await server.send_to(buf, r.size, r.path);
//
//   auto [a, b] = aspen::unix_datagram::pair();   // connected to each other
//   co_await a.send("hello");
//   std::size_t n = co_await b.recv(buf, sizeof buf);
//
// Paths follow aspen/net/unix.hpp (at most 107 bytes, no NUL, "@name" for
// the abstract namespace, bind fails with EADDRINUSE while the file
// exists and the file stays after the socket is closed). A datagram longer
// than the buffer is truncated (recv_from says so). Sending to a path with
// no socket gives std::system_error(ENOENT) or ECONNREFUSED.
//
// When the receiver's queue is full the sender waits: a connected send
// until the reactor reports room, a send_to (whose socket the kernel
// reports writable while the receiver's queue is full) by trying again
// every millisecond, so about ten datagrams a millisecond go to a receiver
// that keeps its queue full (connect for more). A slow receiver slows its
// senders down and no datagram is dropped.
//
// The rules of the other sockets apply: one receive and one connected send
// in progress at a time (send_to may run in any number of tasks at once),
// closing the socket under a waiting operation makes it throw ECANCELED,
// coop budget, move-only. Every operation is cancel-safe: a datagram is
// sent, or taken from the socket, only in the poll that completes it
// (readable() and writable() take and send nothing).
//
// The readiness API, as udp_socket's (the why and the loop are at the top
// of aspen/net/udp_socket.hpp): co_await readable() / writable(), then
// try_recv_from (size, sender's path, truncation, as recv_from),
// try_send_to(data, path), try_recv, try_send (connected): one
// non-blocking syscall, the one the waiting operation runs, that never
// waits and spends no coop budget; nullopt when nothing could be done now
// (which also clears the reported readiness, so the next readable() /
// writable() waits for a new one); errors throw std::system_error.
// One exception: try_send_to's nullopt (the receiver's queue or this
// socket's send buffer is full) neither consults nor clears the reported
// write readiness. The kernel wakes an unconnected sender only when its
// own datagrams leave a queue, not when a receiver filled by other
// senders makes room, so a writable() that waited for a new report after
// it could wait forever; it completes at once instead, and a caller that
// gets nullopt again should back off (co_await aspen::sleep) or use
// send_to, which retries every millisecond.
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/detail/stream_ops.hpp>
#include <aspen/net/tcp.hpp>
#include <aspen/time.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace aspen {

// co_await sock.recv_from(...) / peek_from(...) -> unix_datagram::received;
// co_await sock.send_to(...) -> bytes sent.
class [[nodiscard]] unix_datagram_awaitable : public detail::io_awaitable<unix_datagram_awaitable> {
public:
    struct received {
        std::size_t size = 0;     // bytes stored in the buffer
        std::string path;         // the sender's path; "" if it is unnamed
        bool truncated = false;   // the datagram was longer than the buffer
    };
    enum class kind : unsigned char { recv_from, peek_from, send_to };

    // send_to checks `to` here (std::invalid_argument for a bad path).
    unix_datagram_awaitable(detail::io_source* s, kind k, void* data, std::size_t size, std::string to = {});
    received await_resume() {
        rethrow_if_error();
        return std::move(result_);
    }
    bool poll(context& cx);
    const char* what() const noexcept;

private:
    bool poll_send(context& cx);
    detail::io_claim claim_;
    void* data_;
    std::size_t size_;
    std::string to_;
    std::optional<timer> retry_;  // send_to: armed while the receiver's queue is full
    received result_;
    kind kind_;
};

// send_to's awaitable reports only the byte count.
class [[nodiscard]] unix_send_to_awaitable {
public:
    unix_send_to_awaitable(detail::io_source* s, const void* data, std::size_t size, std::string to)
        : inner_(s, unix_datagram_awaitable::kind::send_to, const_cast<void*>(data), size, std::move(to)) {}
    bool await_ready() { return inner_.await_ready(); }
    void await_suspend(std::coroutine_handle<> h) noexcept { inner_.await_suspend(h); }
    std::size_t await_resume() { return inner_.await_resume().size; }

private:
    unix_datagram_awaitable inner_;
};

class unix_datagram : public detail::fd_ops<unix_datagram> {
public:
    using received = unix_datagram_awaitable::received;

    unix_datagram() noexcept = default;  // empty: every operation throws std::logic_error
    unix_datagram(unix_datagram&&) noexcept = default;
    unix_datagram& operator=(unix_datagram&&) noexcept = default;

    // A socket bound to path. Synchronous.
    static unix_datagram bind(std::string_view path);
    // A socket with no name: it can send (to a path, or after connect), and
    // receive the replies of sockets it is connected to.
    static unix_datagram unbound();
    // Two sockets connected to each other, unnamed.
    static std::pair<unix_datagram, unix_datagram> pair();
    // Takes ownership of a Unix datagram socket (made non-blocking).
    static unix_datagram from_native(int fd);

    // One datagram to the socket at `path`; returns the bytes sent (all).
    unix_send_to_awaitable send_to(const void* data, std::size_t size, std::string path) {
        return unix_send_to_awaitable(io_.require("aspen::unix_datagram::send_to"), data, size, std::move(path));
    }
    unix_send_to_awaitable send_to(std::string_view s, std::string path) {
        return send_to(s.data(), s.size(), std::move(path));
    }
    // The next datagram and its sender's path.
    unix_datagram_awaitable recv_from(void* data, std::size_t size) {
        return make(unix_datagram_awaitable::kind::recv_from, "aspen::unix_datagram::recv_from", data, size);
    }
    unix_datagram_awaitable recv_from(std::span<char> buf) { return recv_from(buf.data(), buf.size()); }
    // As recv_from, but the datagram stays queued for the next receive.
    unix_datagram_awaitable peek_from(void* data, std::size_t size) {
        return make(unix_datagram_awaitable::kind::peek_from, "aspen::unix_datagram::peek_from", data, size);
    }

    // Fixes the peer: send and recv then talk to it only. Synchronous;
    // std::system_error (ENOENT, ECONNREFUSED) if no socket is there.
    void connect(std::string_view path);
    transfer_awaitable send(const void* data, std::size_t size) {
        return transfer_awaitable(io_.require("aspen::unix_datagram::send"), transfer_awaitable::kind::write, false,
                                  "aspen::unix_datagram::send", const_cast<void*>(data), size);
    }
    transfer_awaitable send(std::string_view s) { return send(s.data(), s.size()); }
    transfer_awaitable recv(void* data, std::size_t size) {
        return transfer_awaitable(io_.require("aspen::unix_datagram::recv"), transfer_awaitable::kind::read, false,
                                  "aspen::unix_datagram::recv", data, size);
    }
    transfer_awaitable recv(std::span<char> buf) { return recv(buf.data(), buf.size()); }

    // The readiness API (see the top of this header). nullopt: nothing now.
    readiness_awaitable readable() { return readiness_awaitable(io_.require(readable_what), false, readable_what); }
    readiness_awaitable writable() { return readiness_awaitable(io_.require(writable_what), true, writable_what); }
    std::optional<received> try_recv_from(void* data, std::size_t size);
    std::optional<received> try_recv_from(std::span<char> buf) { return try_recv_from(buf.data(), buf.size()); }
    // A bad path throws std::invalid_argument, as send_to's.
    std::optional<std::size_t> try_send_to(const void* data, std::size_t size, std::string_view path);
    std::optional<std::size_t> try_send_to(std::string_view s, std::string_view path) {
        return try_send_to(s.data(), s.size(), path);
    }
    std::optional<std::size_t> try_recv(void* data, std::size_t size);
    std::optional<std::size_t> try_recv(std::span<char> buf) { return try_recv(buf.data(), buf.size()); }
    std::optional<std::size_t> try_send(const void* data, std::size_t size);
    std::optional<std::size_t> try_send(std::string_view s) { return try_send(s.data(), s.size()); }

    // read_with(f) / write_with(f) (detail::fd_ops): f(fd) once the socket
    // is readable / writable (e.g. recvmsg with SCM_RIGHTS or
    // SCM_CREDENTIALS), as tcp_stream's.

    // shutdown(2): after shutdown(write), sends fail with EPIPE.
    void shutdown(shutdown_mode how);
    // The socket's own path and its peer's ("" when unnamed; peer_path
    // throws ENOTCONN unless connected).
    std::string local_path() const;
    std::string peer_path() const;
    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class detail::fd_ops<unix_datagram>;
    static constexpr const char* read_with_what = "aspen::unix_datagram::read_with";
    static constexpr const char* write_with_what = "aspen::unix_datagram::write_with";
    static constexpr const char* readable_what = "aspen::unix_datagram::readable";
    static constexpr const char* writable_what = "aspen::unix_datagram::writable";
    explicit unix_datagram(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_source* source(const char* what) const { return io_.require(what); }
    unix_datagram_awaitable make(unix_datagram_awaitable::kind k, const char* what, void* data, std::size_t size) {
        return unix_datagram_awaitable(io_.require(what), k, data, size);
    }
    detail::io_handle io_;
};

}  // namespace aspen
