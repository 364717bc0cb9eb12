// tcp_socket: options, bind and listen are plain syscalls; connect hands
// the socket to tcp.cpp's connect_awaitable, which runs the connect that
// tcp_stream::connect runs.
#include <aspen/net/tcp_socket.hpp>

#include "io/io_source.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <stdexcept>
#include <string>

namespace aspen {

namespace {
const char* family_name(int family) noexcept { return family == AF_INET6 ? "IPv6" : "IPv4"; }

void set_buffer_size(int fd, int name, std::uint32_t size, const char* what) {
    // setsockopt takes an int; a larger value would arrive negative.
    if (size > static_cast<std::uint32_t>(INT_MAX))
        throw std::invalid_argument(std::string(what) + ": the size must be at most INT_MAX bytes, not " +
                                    std::to_string(size));
    int v = static_cast<int>(size);
    if (::setsockopt(fd, SOL_SOCKET, name, &v, sizeof v) != 0) detail::throw_errno(errno, what);
}

std::uint32_t buffer_size(int fd, int name, const char* what) {
    int v = 0;
    socklen_t len = sizeof v;
    if (::getsockopt(fd, SOL_SOCKET, name, &v, &len) != 0) detail::throw_errno(errno, what);
    return static_cast<std::uint32_t>(v);
}
}  // namespace

tcp_socket tcp_socket::new_v4() {
    return tcp_socket(detail::make_io(detail::open_socket(AF_INET, SOCK_STREAM, "aspen::tcp_socket::new_v4")), AF_INET);
}

tcp_socket tcp_socket::new_v6() {
    return tcp_socket(detail::make_io(detail::open_socket(AF_INET6, SOCK_STREAM, "aspen::tcp_socket::new_v6")),
                      AF_INET6);
}

int tcp_socket::fd(const char* what) const { return io_.require(what)->fd; }

void tcp_socket::check_family(const socket_address& addr, const char* what) const {
    if (addr.family() == family_) return;
    throw std::invalid_argument(std::string(what) + ": " + addr.to_string() + " is not an " + family_name(family_) +
                                " address, and this socket is " + family_name(family_) + " (made by new_" +
                                (family_ == AF_INET6 ? "v6" : "v4") + ")");
}

void tcp_socket::set_reuseaddr(bool on) {
    const char* what = "aspen::tcp_socket::set_reuseaddr";
    detail::set_flag_option(fd(what), SOL_SOCKET, SO_REUSEADDR, on, what);
}

bool tcp_socket::reuseaddr() const {
    const char* what = "aspen::tcp_socket::reuseaddr";
    return detail::flag_option(fd(what), SOL_SOCKET, SO_REUSEADDR, what);
}

void tcp_socket::set_reuseport(bool on) {
    const char* what = "aspen::tcp_socket::set_reuseport";
    detail::set_flag_option(fd(what), SOL_SOCKET, SO_REUSEPORT, on, what);
}

bool tcp_socket::reuseport() const {
    const char* what = "aspen::tcp_socket::reuseport";
    return detail::flag_option(fd(what), SOL_SOCKET, SO_REUSEPORT, what);
}

void tcp_socket::set_send_buffer_size(std::uint32_t size) {
    const char* what = "aspen::tcp_socket::set_send_buffer_size";
    set_buffer_size(fd(what), SO_SNDBUF, size, what);
}

std::uint32_t tcp_socket::send_buffer_size() const {
    const char* what = "aspen::tcp_socket::send_buffer_size";
    return buffer_size(fd(what), SO_SNDBUF, what);
}

void tcp_socket::set_recv_buffer_size(std::uint32_t size) {
    const char* what = "aspen::tcp_socket::set_recv_buffer_size";
    set_buffer_size(fd(what), SO_RCVBUF, size, what);
}

std::uint32_t tcp_socket::recv_buffer_size() const {
    const char* what = "aspen::tcp_socket::recv_buffer_size";
    return buffer_size(fd(what), SO_RCVBUF, what);
}

void tcp_socket::set_nodelay(bool on) {
    const char* what = "aspen::tcp_socket::set_nodelay";
    detail::set_flag_option(fd(what), IPPROTO_TCP, TCP_NODELAY, on, what);
}

bool tcp_socket::nodelay() const {
    const char* what = "aspen::tcp_socket::nodelay";
    return detail::flag_option(fd(what), IPPROTO_TCP, TCP_NODELAY, what);
}

void tcp_socket::set_keepalive(bool on) {
    const char* what = "aspen::tcp_socket::set_keepalive";
    detail::set_flag_option(fd(what), SOL_SOCKET, SO_KEEPALIVE, on, what);
}

bool tcp_socket::keepalive() const {
    const char* what = "aspen::tcp_socket::keepalive";
    return detail::flag_option(fd(what), SOL_SOCKET, SO_KEEPALIVE, what);
}

void tcp_socket::bind(const socket_address& addr) {
    const char* what = "aspen::tcp_socket::bind";
    int f = fd(what);
    check_family(addr, what);
    detail::bind_socket(f, addr, what);
}

socket_address tcp_socket::local_addr() const {
    const char* what = "aspen::tcp_socket::local_addr";
    return detail::local_address(fd(what), what);
}

tcp_listener tcp_socket::listen(int backlog) && {
    const char* what = "aspen::tcp_socket::listen";
    int f = fd(what);
    if (backlog < 0) throw std::invalid_argument("aspen::tcp_socket::listen: the backlog must not be negative");
    if (::listen(f, backlog) != 0) detail::throw_errno(errno, what);
    return tcp_listener(std::move(io_));
}

connect_awaitable tcp_socket::connect(const socket_address& addr) && {
    const char* what = "aspen::tcp_socket::connect";
    (void)fd(what);
    check_family(addr, what);
    return connect_awaitable(std::move(io_), addr, std::nullopt, what);
}

connect_awaitable tcp_socket::connect(const socket_address& addr, clock::duration timeout) && {
    const char* what = "aspen::tcp_socket::connect";
    (void)fd(what);
    check_family(addr, what);
    return connect_awaitable(std::move(io_), addr, timeout, what);
}

}  // namespace aspen
