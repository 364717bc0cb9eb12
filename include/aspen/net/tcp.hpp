// TCP: aspen::tcp_listener and aspen::tcp_stream.
//
//   auto listener = aspen::tcp_listener::bind(aspen::socket_address::parse("127.0.0.1:0"));
//   aspen::tcp_stream conn = co_await listener.accept();
//   char buf[4096];
//   std::size_t n = co_await conn.read(buf, sizeof buf);     // 0: the peer closed (EOF)
//   co_await conn.write_all(buf, n);
//
//   aspen::tcp_stream c = co_await aspen::tcp_stream::connect(listener.local_addr(), 2s);
//
// Errors are std::system_error carrying the errno (ECONNREFUSED,
// ECONNRESET, EPIPE, ETIMEDOUT, EMFILE, ...) and a message naming the
// operation; end of stream is not an error: read returns 0, and keeps
// returning 0 if called again. Writes never raise SIGPIPE (a write to a
// closed connection throws EPIPE or ECONNRESET).
//
// Every operation is an awaitable that spends one unit of the task's coop
// budget (so a task reading a socket that always has data still yields to
// other tasks) and waits on the runtime's epoll reactor without blocking a
// worker. The socket registers with the runtime of the first task that uses
// it; it can be created (bind) outside a runtime and moved into a task.
//
// At most one read-side operation (read, read_exact, accept) and one
// write-side operation (write, write_all, connect) may be in progress on a
// socket at a time: a task may read while another writes, but a second
// concurrent read throws std::logic_error. Destroying a socket while
// another task waits on it (also: a runtime shutdown destroying the owner's
// task first) makes that operation throw std::system_error(ECANCELED); the
// fd is deregistered and closed when the last such operation lets go.
// Sockets are move-only; the destructor deregisters the fd and closes it.
//
// Split: `auto [rd, wr] = std::move(conn).into_split();` gives a read half
// and a write half that own the connection together, for a reader task and
// a writer task that each hold their half (as Tokio's into_split). The fd
// is closed when both halves are gone. Destroying the write half shuts the
// write direction down first (the peer reads end of stream), as
// shutdown(write) does; destroying a half while another task waits in an
// operation of its direction makes that operation throw
// std::system_error(ECANCELED), and leaves the other half working.
//
// Cancel safety (the awaiting task is aborted, loses a timeout race, or
// the awaitable is destroyed while pending; in every case the operation's
// stored waker is dropped and the socket stays usable):
//   accept      cancel-safe: a connection is taken from the kernel only in
//               the poll that completes the accept, so none is lost.
//   read        cancel-safe: no bytes are consumed unless the read completes.
//   peek        cancel-safe: consumes nothing in any case.
//   write       cancel-safe: nothing was sent unless it completed.
//   read_exact  NOT cancel-safe: bytes already received into the buffer are
//               consumed from the stream; the caller does not learn how many.
//   write_all   NOT cancel-safe: a prefix of the data may have been sent.
//   read_to_end NOT cancel-safe: what it appended stays in the string and
//               is gone from the stream.
//   readable, writable  cancel-safe: they take and send nothing.
//   (try_read and try_write never wait, so there is nothing to cancel.)
//   connect     cancel-safe: the half-open socket is closed (no fd leak).
// Each operation can be given to aspen::timeout as it is (it moves into the
// task timeout runs; after its first await it no longer moves):
//   std::size_t n = co_await aspen::timeout(1s, stream.read(buf, sizeof buf));
#pragma once

#include <aspen/detail/stream_ops.hpp>
#include <aspen/detail/io_handle.hpp>
#include <aspen/net/address.hpp>
#include <aspen/time.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

namespace aspen {

class tcp_stream;
class tcp_read_half;
class tcp_write_half;

enum class shutdown_mode : std::uint8_t { read, write, both };

// co_await listener.accept() -> tcp_stream.
class [[nodiscard]] accept_awaitable : public detail::io_awaitable<accept_awaitable> {
public:
    explicit accept_awaitable(detail::io_source* s) noexcept : claim_(s, false) {}
    tcp_stream await_resume();
    bool poll(context& cx);
    static const char* what() noexcept { return "aspen::tcp_listener::accept"; }

private:
    detail::io_claim claim_;
    detail::io_handle accepted_;
};

class tcp_socket;

// co_await tcp_stream::connect(addr[, timeout]) -> tcp_stream; also what
// tcp_socket::connect returns (the same non-blocking connect, on the
// socket it was given instead of a fresh one).
class [[nodiscard]] connect_awaitable : public detail::io_awaitable<connect_awaitable> {
public:
    connect_awaitable(const socket_address& addr, std::optional<clock::duration> timeout);
    tcp_stream await_resume();
    bool poll(context& cx);
    const char* what() const noexcept { return what_; }

private:
    friend class tcp_socket;
    // Connects `io` (an unconnected stream socket of addr's family, maybe
    // bound and configured) instead of opening one.
    connect_awaitable(detail::io_handle io, const socket_address& addr, std::optional<clock::duration> timeout,
                      const char* what);
    void start();
    socket_address addr_;
    std::optional<clock::duration> timeout_;
    std::optional<timer> timer_;
    detail::io_handle io_;
    detail::io_claim claim_{nullptr, true};
    const char* what_ = "aspen::tcp_stream::connect";
    bool started_ = false;
    bool connected_ = false;
};


class tcp_stream : public detail::stream_reads<tcp_stream>, public detail::stream_writes<tcp_stream> {
public:
    tcp_stream() noexcept = default;  // empty: every operation throws std::logic_error
    tcp_stream(tcp_stream&&) noexcept = default;
    tcp_stream& operator=(tcp_stream&&) noexcept = default;

    // Connects to addr. With a timeout, gives up after it with
    // std::system_error(ETIMEDOUT) (the half-open socket is closed).
    static connect_awaitable connect(const socket_address& addr) { return connect_awaitable(addr, std::nullopt); }
    static connect_awaitable connect(const socket_address& addr, clock::duration timeout) {
        return connect_awaitable(addr, timeout);
    }
    // Takes ownership of a connected stream socket (made non-blocking here).
    static tcp_stream from_native(int fd);

    // read, read_exact, peek, read_to_end, read_with (stream_reads), write, write_all,
    // write_with (stream_writes).

    // The read half and the write half of this stream, which is left empty
    // (see "Split" above). std::logic_error if the stream is empty.
    std::pair<tcp_read_half, tcp_write_half> into_split() &&;

    // shutdown(2): after shutdown(write) the peer reads end of stream; this
    // side can still read. Synchronous.
    void shutdown(shutdown_mode how = shutdown_mode::write);
    void set_nodelay(bool on);
    bool nodelay() const;
    // SO_LINGER: with a duration, closing the socket waits (blocking the
    // closing thread) up to that long for unsent data to go out, and 0s
    // resets the connection at close instead of the normal FIN; nullopt
    // (the default) closes in the background. Use 0s with care: the peer
    // sees ECONNRESET.
    void set_linger(std::optional<std::chrono::seconds> linger);
    std::optional<std::chrono::seconds> linger() const;
    // IP_TTL (IPV6_UNICAST_HOPS on IPv6): 1 to 255; other values throw
    // std::system_error(EINVAL).
    void set_ttl(std::uint32_t ttl);
    std::uint32_t ttl() const;
    socket_address local_addr() const;
    socket_address peer_addr() const;
    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class accept_awaitable;
    friend class connect_awaitable;
    friend class detail::stream_reads<tcp_stream>;
    friend class detail::stream_writes<tcp_stream>;
    static constexpr const char* read_what = "aspen::tcp_stream::read";
    static constexpr const char* read_exact_what = "aspen::tcp_stream::read_exact";
    static constexpr const char* peek_what = "aspen::tcp_stream::peek";
    static constexpr const char* read_with_what = "aspen::tcp_stream::read_with";
    static constexpr const char* readable_what = "aspen::tcp_stream::readable";
    static constexpr const char* try_read_what = "aspen::tcp_stream::try_read";
    static constexpr const char* write_with_what = "aspen::tcp_stream::write_with";
    static constexpr const char* writable_what = "aspen::tcp_stream::writable";
    static constexpr const char* try_write_what = "aspen::tcp_stream::try_write";
    static constexpr const char* write_what = "aspen::tcp_stream::write";
    static constexpr const char* write_all_what = "aspen::tcp_stream::write_all";
    explicit tcp_stream(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_source* source(const char* what) const { return io_.require(what); }
    detail::io_handle io_;
};

namespace detail {
// What both halves of a split stream (TCP or Unix) have: their share of
// the socket (an io_half). Empty when default-constructed or moved from. A
// write half shuts the write direction down when it is destroyed or
// assigned to, before letting go, so the peer reads end of stream.
class stream_half {
public:
    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

protected:
    stream_half() noexcept = default;
    stream_half(io_source* s, bool write) noexcept : io_(s, write) {}
    stream_half(stream_half&&) noexcept = default;
    stream_half& operator=(stream_half&& other) noexcept;
    ~stream_half();
    io_source* source(const char* what) const { return io_.require(what); }
    // shutdown(write) now; std::system_error naming `what` on failure.
    void shutdown_write(const char* what);
    io_half io_;

private:
    void shut_write_quietly() noexcept;
};

// A TCP half's addresses.
class tcp_half : public stream_half {
public:
    socket_address local_addr() const;
    socket_address peer_addr() const;

protected:
    using stream_half::stream_half;
};
}  // namespace detail

// The read side of a split stream (tcp_stream::into_split): read,
// read_exact, peek, the addresses.
class tcp_read_half : public detail::tcp_half, public detail::stream_reads<tcp_read_half> {
public:
    tcp_read_half() noexcept = default;
    tcp_read_half(tcp_read_half&&) noexcept = default;
    tcp_read_half& operator=(tcp_read_half&&) noexcept = default;

private:
    friend class tcp_stream;
    friend class detail::stream_reads<tcp_read_half>;
    static constexpr const char* read_what = "aspen::tcp_read_half::read";
    static constexpr const char* read_exact_what = "aspen::tcp_read_half::read_exact";
    static constexpr const char* peek_what = "aspen::tcp_read_half::peek";
    static constexpr const char* read_with_what = "aspen::tcp_read_half::read_with";
    static constexpr const char* readable_what = "aspen::tcp_read_half::readable";
    static constexpr const char* try_read_what = "aspen::tcp_read_half::try_read";
    explicit tcp_read_half(detail::io_source* s) noexcept : tcp_half(s, false) {}
};

// The write side of a split stream: write, write_all, shutdown of the
// write direction. Its destructor (and assigning to it) shuts the write
// direction down before letting go, so the peer reads end of stream.
class tcp_write_half : public detail::tcp_half, public detail::stream_writes<tcp_write_half> {
public:
    tcp_write_half() noexcept = default;
    tcp_write_half(tcp_write_half&&) noexcept = default;
    tcp_write_half& operator=(tcp_write_half&&) noexcept = default;

    // shutdown(write) now (synchronous); the half stays usable for the
    // socket options and addresses. std::system_error on failure.
    void shutdown() { shutdown_write("aspen::tcp_write_half::shutdown"); }
    void set_nodelay(bool on);
    bool nodelay() const;

private:
    friend class tcp_stream;
    friend class detail::stream_writes<tcp_write_half>;
    static constexpr const char* write_what = "aspen::tcp_write_half::write";
    static constexpr const char* write_all_what = "aspen::tcp_write_half::write_all";
    static constexpr const char* write_with_what = "aspen::tcp_write_half::write_with";
    static constexpr const char* writable_what = "aspen::tcp_write_half::writable";
    static constexpr const char* try_write_what = "aspen::tcp_write_half::try_write";
    explicit tcp_write_half(detail::io_source* s) noexcept : tcp_half(s, true) {}
};

class tcp_listener {
public:
    tcp_listener() noexcept = default;  // empty
    tcp_listener(tcp_listener&&) noexcept = default;
    tcp_listener& operator=(tcp_listener&&) noexcept = default;

    // socket + SO_REUSEADDR + bind + listen(backlog). Port 0 picks a free
    // port (see local_addr()). Synchronous; may be called outside a runtime.
    // std::system_error (EADDRINUSE, EACCES, ...) naming the address.
    static tcp_listener bind(const socket_address& addr, int backlog = 1024);

    // The next incoming connection. Out of file descriptors (EMFILE,
    // ENFILE) or memory, it throws std::system_error and the connection
    // stays queued in the kernel: the listener remains usable and a later
    // accept takes it once descriptors are free. accept does not retry by
    // itself, so a caller that loops on the error should back off (e.g.
    // co_await aspen::sleep) rather than spin.
    accept_awaitable accept() { return accept_awaitable(io_.require("aspen::tcp_listener::accept")); }

    socket_address local_addr() const;
    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class tcp_socket;
    explicit tcp_listener(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_handle io_;
};

inline tcp_stream accept_awaitable::await_resume() {
    rethrow_if_error();
    return tcp_stream(std::move(accepted_));
}

inline tcp_stream connect_awaitable::await_resume() {
    rethrow_if_error();
    return tcp_stream(std::move(io_));
}

}  // namespace aspen
