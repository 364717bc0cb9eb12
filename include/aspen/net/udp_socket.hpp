// UDP: aspen::udp_socket.
//
//   auto sock = aspen::udp_socket::bind(aspen::socket_address::parse("127.0.0.1:0"));
//   co_await sock.send_to("ping", peer);
//   char buf[1500];
//   aspen::udp_socket::received r = co_await sock.recv_from(buf, sizeof buf);
//   // r.size bytes from r.peer; r.truncated if the datagram did not fit
//
//   sock.connect(peer);                    // fixes the peer (synchronous)
//   co_await sock.send("ping");
//   std::size_t n = co_await sock.recv(buf, sizeof buf);
//
// Each call sends or receives one datagram. A datagram longer than the
// buffer is truncated (the rest is discarded by the kernel); recv_from says
// so. Errors are std::system_error with the errno (on a connected socket an
// ICMP "port unreachable" can show up as ECONNREFUSED on a later call).
// Operations spend coop budget like the TCP ones; the same rules apply: one
// receive and one send in progress at a time per socket (std::logic_error
// otherwise), closing it under a waiting operation makes that throw
// ECANCELED, move-only.
//
// Cancel safety: send_to, send, recv_from, peek_from and recv are all
// cancel-safe: a datagram is sent, or taken from the socket, only in the
// poll that completes the operation (peek_from takes nothing in any case),
// so an aborted operation neither loses a received datagram nor leaves half
// of one sent. readable() and writable() are cancel-safe too: they take
// and send nothing. (The try_ calls never wait: nothing to cancel.)
//
// The readiness API (as Tokio's UdpSocket::readable / try_recv_from):
//
//   for (;;) {
//       co_await sock.readable();
//       std::optional<aspen::udp_socket::received> r = sock.try_recv_from(buf, sizeof buf);
//       if (!r) continue;              // not ready after all: wait again
//       handle(buf, r->size, r->peer);
//   }
//
// Why: the buffer can be chosen (or shared between sockets) once
// readiness is known instead of being held through the wait; a caller can
// drain a burst with try_recv_from until nullopt, one wait per burst; and
// the try_ calls work where no task can wait (a synchronous callback,
// another thread, outside a runtime). (A drain loop spends no coop budget,
// so bound it on a socket that may never run dry.) They behave as the byte streams'
// try_read / try_write (aspen/detail/stream_ops.hpp): one non-blocking
// syscall, the same one recv_from / send_to / recv / send run, unless the
// readiness the reactor last reported already says "not ready"; nullopt
// when nothing could be done now, which also clears that readiness, so the
// next readable() / writable() waits for a new one; errors throw
// std::system_error; no coop budget is spent. readable() / writable()
// occupy the direction's slot while they wait, as a receive or a send
// would.
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/net/address.hpp>
#include <aspen/net/tcp.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace aspen {

class udp_socket;

// co_await sock.send_to(...) -> bytes sent; co_await sock.recv_from(...) ->
// udp_socket::received.
class [[nodiscard]] datagram_awaitable : public detail::io_awaitable<datagram_awaitable> {
public:
    struct received {
        std::size_t size = 0;  // bytes stored in the buffer
        socket_address peer;   // who sent the datagram
        bool truncated = false;  // the datagram was longer than the buffer
    };

    // Receive (recv_from; peek_from with `peek`) when `to` is null, else
    // send to *to.
    datagram_awaitable(detail::io_source* s, void* data, std::size_t size, const socket_address* to,
                       bool peek = false) noexcept
        : claim_(s, to != nullptr), data_(data), size_(size), peek_(peek) {
        if (to) to_ = *to;
    }
    received await_resume() {
        rethrow_if_error();
        return result_;
    }
    bool poll(context& cx);
    const char* what() const noexcept {
        return claim_.write ? "aspen::udp_socket::send_to"
               : peek_      ? "aspen::udp_socket::peek_from"
                            : "aspen::udp_socket::recv_from";
    }

private:
    detail::io_claim claim_;
    void* data_;
    std::size_t size_;
    socket_address to_;
    received result_;
    bool peek_ = false;
};

// send_to's awaitable reports only the byte count.
class [[nodiscard]] send_to_awaitable {
public:
    send_to_awaitable(detail::io_source* s, const void* data, std::size_t size, const socket_address& to) noexcept
        : inner_(s, const_cast<void*>(data), size, &to) {}
    bool await_ready() { return inner_.await_ready(); }
    void await_suspend(std::coroutine_handle<> h) noexcept { inner_.await_suspend(h); }
    std::size_t await_resume() { return inner_.await_resume().size; }

private:
    datagram_awaitable inner_;
};

class udp_socket : public detail::fd_ops<udp_socket> {
public:
    using received = datagram_awaitable::received;

    udp_socket() noexcept = default;  // empty
    udp_socket(udp_socket&&) noexcept = default;
    udp_socket& operator=(udp_socket&&) noexcept = default;

    // A socket bound to addr (port 0: the kernel picks one). Synchronous.
    static udp_socket bind(const socket_address& addr);

    // One datagram to `to`; returns the bytes sent (all of them).
    send_to_awaitable send_to(const void* data, std::size_t size, const socket_address& to) {
        return send_to_awaitable(io_.require("aspen::udp_socket::send_to"), data, size, to);
    }
    send_to_awaitable send_to(std::string_view s, const socket_address& to) { return send_to(s.data(), s.size(), to); }
    // The next datagram and its sender.
    datagram_awaitable recv_from(void* data, std::size_t size) {
        return datagram_awaitable(io_.require("aspen::udp_socket::recv_from"), data, size, nullptr);
    }
    datagram_awaitable recv_from(std::span<char> buf) { return recv_from(buf.data(), buf.size()); }
    // As recv_from, but the datagram stays queued for the next receive.
    datagram_awaitable peek_from(void* data, std::size_t size) {
        return datagram_awaitable(io_.require("aspen::udp_socket::peek_from"), data, size, nullptr, true);
    }
    datagram_awaitable peek_from(std::span<char> buf) { return peek_from(buf.data(), buf.size()); }

    // Fixes the peer: send/recv then talk to it only (datagrams from other
    // addresses are dropped by the kernel). Synchronous.
    void connect(const socket_address& peer);
    transfer_awaitable send(const void* data, std::size_t size) {
        return transfer_awaitable(io_.require("aspen::udp_socket::send"), transfer_awaitable::kind::write, false,
                                  "aspen::udp_socket::send", const_cast<void*>(data), size);
    }
    transfer_awaitable send(std::string_view s) { return send(s.data(), s.size()); }
    transfer_awaitable recv(void* data, std::size_t size) {
        return transfer_awaitable(io_.require("aspen::udp_socket::recv"), transfer_awaitable::kind::read, false,
                                  "aspen::udp_socket::recv", data, size);
    }
    transfer_awaitable recv(std::span<char> buf) { return recv(buf.data(), buf.size()); }

    // The readiness API (see the top of this header): wait until the
    // reactor reports the socket readable / writable, then try without
    // waiting. try_recv_from gives what recv_from gives; try_send_to and
    // try_send the bytes sent (all of them); try_recv the bytes stored.
    // nullopt: nothing now.
    readiness_awaitable readable() { return readiness_awaitable(io_.require(readable_what), false, readable_what); }
    readiness_awaitable writable() { return readiness_awaitable(io_.require(writable_what), true, writable_what); }
    std::optional<received> try_recv_from(void* data, std::size_t size);
    std::optional<received> try_recv_from(std::span<char> buf) { return try_recv_from(buf.data(), buf.size()); }
    std::optional<std::size_t> try_send_to(const void* data, std::size_t size, const socket_address& to);
    std::optional<std::size_t> try_send_to(std::string_view s, const socket_address& to) {
        return try_send_to(s.data(), s.size(), to);
    }
    // Connected (after connect):
    std::optional<std::size_t> try_recv(void* data, std::size_t size);
    std::optional<std::size_t> try_recv(std::span<char> buf) { return try_recv(buf.data(), buf.size()); }
    std::optional<std::size_t> try_send(const void* data, std::size_t size);
    std::optional<std::size_t> try_send(std::string_view s) { return try_send(s.data(), s.size()); }

    // read_with(f) / write_with(f) (detail::fd_ops): f(fd) once the socket
    // is readable / writable, for a syscall aspen has no operation for
    // (recvmmsg, sendmmsg, ancillary data); as tcp_stream's.

    // SO_BROADCAST: allows sending to a broadcast address (else EACCES).
    void set_broadcast(bool on);
    bool broadcast() const;
    // IP_TTL (IPV6_UNICAST_HOPS on IPv6): 1 to 255; other values throw
    // std::system_error(EINVAL).
    void set_ttl(std::uint32_t ttl);
    std::uint32_t ttl() const;

    // Multicast. Groups and interfaces are numeric addresses ("239.1.2.3",
    // "ff02::1"); text that is not one, a group outside the multicast
    // ranges, or an address of the other family throws
    // std::invalid_argument. The kernel's errors are std::system_error
    // (ENODEV: no multicast route or interface; EADDRINUSE: joined twice).
    // Receiving a group's datagrams also needs the socket bound to the
    // group's port (on 0.0.0.0 / ::, or on the group address).
    //
    // IPv4: join / leave on the interface with that address ("0.0.0.0": the
    // kernel picks one by its routes).
    void join_multicast_v4(std::string_view group, std::string_view interface = "0.0.0.0");
    void leave_multicast_v4(std::string_view group, std::string_view interface = "0.0.0.0");
    // The interface this socket sends multicast datagrams from (IP_MULTICAST_IF).
    void set_multicast_interface_v4(std::string_view interface);
    // Whether this host's own members of a group get what it sends there
    // (default: yes).
    void set_multicast_loop_v4(bool on);
    bool multicast_loop_v4() const;
    // How many routers a multicast datagram may cross: 0 to 255 (default
    // 1); others throw std::system_error(EINVAL).
    void set_multicast_ttl_v4(std::uint32_t ttl);
    std::uint32_t multicast_ttl_v4() const;
    // IPv6: join / leave on the interface with that index (0: the kernel
    // picks one).
    void join_multicast_v6(std::string_view group, unsigned interface_index = 0);
    void leave_multicast_v6(std::string_view group, unsigned interface_index = 0);
    void set_multicast_loop_v6(bool on);
    bool multicast_loop_v6() const;

    socket_address local_addr() const;
    socket_address peer_addr() const;  // ENOTCONN unless connected
    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class detail::fd_ops<udp_socket>;
    static constexpr const char* read_with_what = "aspen::udp_socket::read_with";
    static constexpr const char* write_with_what = "aspen::udp_socket::write_with";
    static constexpr const char* readable_what = "aspen::udp_socket::readable";
    static constexpr const char* writable_what = "aspen::udp_socket::writable";
    explicit udp_socket(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_source* source(const char* what) const { return io_.require(what); }
    detail::io_handle io_;
};

}  // namespace aspen
