// udp_socket (the operation loop is drive(), io_source.hpp).
#include <aspen/net/udp_socket.hpp>

#include "io/io_source.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace aspen {

using detail::attempt_result;

bool datagram_awaitable::poll(context& cx) {
    int fd = claim_.src->fd;
    return detail::drive(claim_, cx, what(), [&] {
        if (claim_.write) {
            ssize_t n = ::sendto(fd, data_, size_, MSG_NOSIGNAL, to_.native(), to_.native_size());
            if (n < 0) return detail::classify_errno(what());
            result_.size = static_cast<std::size_t>(n);
            result_.peer = to_;
            return attempt_result::done;
        }
        sockaddr_storage from{};
        socklen_t len = sizeof from;
        // MSG_TRUNC: returns the datagram's real length, so truncation shows.
        int flags = MSG_TRUNC | (peek_ ? MSG_PEEK : 0);
        ssize_t n = ::recvfrom(fd, data_, size_, flags, reinterpret_cast<sockaddr*>(&from), &len);
        if (n < 0) return detail::classify_errno(what());
        result_.size = std::min(static_cast<std::size_t>(n), size_);
        result_.truncated = static_cast<std::size_t>(n) > size_;
        result_.peer = socket_address::from_native(reinterpret_cast<sockaddr*>(&from), len);
        return attempt_result::done;
    });
}

udp_socket udp_socket::bind(const socket_address& addr) {
    const char* what = "aspen::udp_socket::bind";
    detail::io_handle io = detail::make_io(detail::open_socket(addr.family(), SOCK_DGRAM, what));
    detail::bind_socket(io.fd(), addr, what);
    return udp_socket(std::move(io));
}

void udp_socket::connect(const socket_address& peer) {
    const char* what = "aspen::udp_socket::connect to";
    if (::connect(io_.require(what)->fd, peer.native(), peer.native_size()) != 0)
        detail::throw_errno(errno, detail::describe(what, peer));
}

void udp_socket::set_broadcast(bool on) {
    const char* what = "aspen::udp_socket::set_broadcast";
    detail::set_flag_option(io_.require(what)->fd, SOL_SOCKET, SO_BROADCAST, on, what);
}

bool udp_socket::broadcast() const {
    const char* what = "aspen::udp_socket::broadcast";
    return detail::flag_option(io_.require(what)->fd, SOL_SOCKET, SO_BROADCAST, what);
}

void udp_socket::set_ttl(std::uint32_t ttl) {
    const char* what = "aspen::udp_socket::set_ttl";
    detail::set_ttl_of(io_.require(what)->fd, ttl, what);
}

std::uint32_t udp_socket::ttl() const {
    const char* what = "aspen::udp_socket::ttl";
    return detail::ttl_of(io_.require(what)->fd, what);
}

socket_address udp_socket::local_addr() const {
    const char* what = "aspen::udp_socket::local_addr";
    return detail::local_address(io_.require(what)->fd, what);
}

socket_address udp_socket::peer_addr() const {
    const char* what = "aspen::udp_socket::peer_addr";
    return detail::peer_address(io_.require(what)->fd, what);
}

}  // namespace aspen
