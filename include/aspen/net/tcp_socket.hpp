// aspen::tcp_socket: a TCP socket configured before it connects or
// listens, as Tokio's TcpSocket.
//
// tcp_listener::bind and tcp_stream::connect make their socket and use it
// at once, so an option that only counts before bind, listen or connect
// has no place there: SO_REUSEPORT (several listeners sharing one port,
// the kernel spreading connections among them), a client's own local
// address or port, buffer sizes that must be set before the handshake
// (the window scale is agreed on then), or a listener without
// SO_REUSEADDR. tcp_socket is that moment:
//
//   aspen::tcp_socket s = aspen::tcp_socket::new_v4();
//   s.set_reuseport(true);
//   s.bind(aspen::socket_address::parse("127.0.0.1:8080"));
//   aspen::tcp_listener l = std::move(s).listen(1024);
//
//   aspen::tcp_socket c = aspen::tcp_socket::new_v4();
//   c.set_recv_buffer_size(1 << 20);
//   c.bind(aspen::socket_address::parse("127.0.0.1:0"));   // pick the source address
//   aspen::tcp_stream stream = co_await std::move(c).connect(server);
//
// Everything but connect is synchronous and may run outside a runtime.
// listen and connect consume the socket (call them on an rvalue: the
// object is left empty); the connect is the one tcp_stream::connect runs
// (non-blocking, through the reactor; a timeout if given), on this socket.
// The socket is move-only, and its destructor closes the fd (also a
// socket whose connect awaitable is destroyed before it completed).
//
// Errors: the kernel's are std::system_error with the errno and a message
// naming the operation and address (EADDRINUSE from bind, ECONNREFUSED
// from connect, ...). Misuse is an exception too: any call on an empty
// (moved-from, consumed or default-constructed) socket throws
// std::logic_error; an address of the other family than the socket's
// (bind or connect of a v4 socket to an IPv6 address) throws
// std::invalid_argument, as does a buffer size above INT_MAX or a
// negative backlog.
//
// Cancel safety: connect is cancel-safe as tcp_stream::connect is: an
// aborted or timed-out connect closes the half-open socket (no fd leak);
// the socket was consumed by the call, so a retry needs a new one.
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/net/address.hpp>
#include <aspen/net/tcp.hpp>
#include <aspen/time.hpp>

#include <cstdint>
#include <utility>

namespace aspen {

class tcp_socket {
public:
    tcp_socket() noexcept = default;  // empty: every call throws std::logic_error
    tcp_socket(tcp_socket&&) noexcept = default;
    tcp_socket& operator=(tcp_socket&&) noexcept = default;

    // A new, unbound, unconnected stream socket of IPv4 / IPv6
    // (std::system_error: EMFILE, EAFNOSUPPORT, ...).
    static tcp_socket new_v4();
    static tcp_socket new_v6();

    // SO_REUSEADDR: bind while connections of an earlier socket on that
    // port sit in TIME_WAIT. (tcp_listener::bind sets it; here it is off
    // until asked for.)
    void set_reuseaddr(bool on);
    bool reuseaddr() const;
    // SO_REUSEPORT: several sockets, each with it set before bind, bind
    // the same address and port; listeners then share the incoming
    // connections (the kernel picks one by a hash of the connection).
    void set_reuseport(bool on);
    bool reuseport() const;
    // SO_SNDBUF / SO_RCVBUF. Linux doubles the value asked for (the other
    // half is for its bookkeeping) and caps it at net.core.wmem_max /
    // rmem_max, so the getter reads back the kernel's figure, not the one
    // set. Above INT_MAX: std::invalid_argument.
    void set_send_buffer_size(std::uint32_t size);
    std::uint32_t send_buffer_size() const;
    void set_recv_buffer_size(std::uint32_t size);
    std::uint32_t recv_buffer_size() const;
    // TCP_NODELAY and SO_KEEPALIVE; the stream connected from this socket
    // keeps them.
    void set_nodelay(bool on);
    bool nodelay() const;
    void set_keepalive(bool on);
    bool keepalive() const;

    // bind(2): port 0 lets the kernel pick one (local_addr() tells which).
    void bind(const socket_address& addr);
    // getsockname: the bound address (0.0.0.0:0 / [::]:0 before bind).
    socket_address local_addr() const;

    // listen(2) on this socket, which becomes the listener (this object is
    // left empty). An unbound socket listens on a port the kernel picks.
    tcp_listener listen(int backlog = 1024) &&;
    // Connects this socket to addr, as tcp_stream::connect does (with a
    // timeout: std::system_error(ETIMEDOUT) after it). The socket moves
    // into the awaitable at the call, so this object is empty at once, and
    // the fd is closed with the awaitable if it is never awaited.
    connect_awaitable connect(const socket_address& addr) &&;
    connect_awaitable connect(const socket_address& addr, clock::duration timeout) &&;

    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    tcp_socket(detail::io_handle io, int family) noexcept : io_(std::move(io)), family_(family) {}
    // The fd, or std::logic_error naming `what` if the socket is empty.
    int fd(const char* what) const;
    // std::invalid_argument naming `what` unless addr has this socket's family.
    void check_family(const socket_address& addr, const char* what) const;
    detail::io_handle io_;
    int family_ = 0;
};

}  // namespace aspen
