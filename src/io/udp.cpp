// udp_socket (the operation loop is drive(), io_source.hpp).
#include <aspen/net/udp_socket.hpp>

#include "io/io_source.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <stdexcept>
#include <string>

namespace aspen {

using detail::attempt_result;

namespace {
// One sendto of a datagram / one recvfrom: the attempt datagram_awaitable
// runs in the operation loop and the try_ calls run once (try_once), so
// both report alike.
attempt_result send_to_once(int fd, const void* data, std::size_t size, const socket_address& to,
                            std::size_t& sent, const char* what) {
    ssize_t n = ::sendto(fd, data, size, MSG_NOSIGNAL, to.native(), to.native_size());
    if (n < 0) return detail::classify_errno(what);
    sent = static_cast<std::size_t>(n);
    return attempt_result::done;
}

attempt_result recv_from_once(int fd, void* data, std::size_t size, bool peek, udp_socket::received& out,
                              const char* what) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    attempt_result r = detail::recvfrom_once(fd, data, size, peek, reinterpret_cast<sockaddr*>(&from), len,
                                             out.size, out.truncated, what);
    if (r == attempt_result::done) out.peer = socket_address::from_native(reinterpret_cast<sockaddr*>(&from), len);
    return r;
}
}  // namespace

bool datagram_awaitable::poll(context& cx) {
    int fd = claim_.src->fd;
    return detail::drive(claim_, cx, what(), [&] {
        if (claim_.write) {
            result_.peer = to_;
            return send_to_once(fd, data_, size_, to_, result_.size, what());
        }
        return recv_from_once(fd, data_, size_, peek_, result_, what());
    });
}

std::optional<udp_socket::received> udp_socket::try_recv_from(void* data, std::size_t size) {
    const char* what = "aspen::udp_socket::try_recv_from";
    detail::io_source& s = *io_.require(what);
    received r;
    if (!detail::try_once(s, false, [&] { return recv_from_once(s.fd, data, size, false, r, what); }))
        return std::nullopt;
    return r;
}

std::optional<std::size_t> udp_socket::try_send_to(const void* data, std::size_t size, const socket_address& to) {
    const char* what = "aspen::udp_socket::try_send_to";
    detail::io_source& s = *io_.require(what);
    std::size_t sent = 0;
    if (!detail::try_once(s, true, [&] { return send_to_once(s.fd, data, size, to, sent, what); }))
        return std::nullopt;
    return sent;
}

std::optional<std::size_t> udp_socket::try_recv(void* data, std::size_t size) {
    const char* what = "aspen::udp_socket::try_recv";
    return detail::try_transfer_of(*io_.require(what), false, data, size, false, what);
}

std::optional<std::size_t> udp_socket::try_send(const void* data, std::size_t size) {
    const char* what = "aspen::udp_socket::try_send";
    return detail::try_transfer_of(*io_.require(what), true, const_cast<void*>(data), size, false, what);
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

namespace {
// A numeric address of one family, for the multicast options.
in_addr v4_address(std::string_view text, const char* what) {
    socket_address a = socket_address::parse(text, 0);
    if (!a.is_v4()) throw std::invalid_argument(std::string(what) + ": \"" + std::string(text) + "\" is not IPv4");
    return reinterpret_cast<const sockaddr_in*>(a.native())->sin_addr;
}

in6_addr v6_address(std::string_view text, const char* what) {
    socket_address a = socket_address::parse(text, 0);
    if (!a.is_v6()) throw std::invalid_argument(std::string(what) + ": \"" + std::string(text) + "\" is not IPv6");
    return reinterpret_cast<const sockaddr_in6*>(a.native())->sin6_addr;
}

in_addr v4_group(std::string_view text, const char* what) {
    in_addr g = v4_address(text, what);
    if (!IN_MULTICAST(ntohl(g.s_addr)))
        throw std::invalid_argument(std::string(what) + ": \"" + std::string(text) +
                                    "\" is not a multicast group (224.0.0.0/4)");
    return g;
}

in6_addr v6_group(std::string_view text, const char* what) {
    in6_addr g = v6_address(text, what);
    if (!IN6_IS_ADDR_MULTICAST(&g))
        throw std::invalid_argument(std::string(what) + ": \"" + std::string(text) +
                                    "\" is not a multicast group (ff00::/8)");
    return g;
}

template <class T>
void set_option(int fd, int level, int name, const T& value, const char* what) {
    if (::setsockopt(fd, level, name, &value, sizeof value) != 0) detail::throw_errno(errno, what);
}

void membership_v4(int fd, int name, std::string_view group, std::string_view interface, const char* what) {
    ip_mreq m{};
    m.imr_multiaddr = v4_group(group, what);
    m.imr_interface = v4_address(interface, what);
    set_option(fd, IPPROTO_IP, name, m, what);
}

void membership_v6(int fd, int name, std::string_view group, unsigned index, const char* what) {
    ipv6_mreq m{};
    m.ipv6mr_multiaddr = v6_group(group, what);
    m.ipv6mr_interface = index;
    set_option(fd, IPPROTO_IPV6, name, m, what);
}
}  // namespace

void udp_socket::join_multicast_v4(std::string_view group, std::string_view interface) {
    const char* what = "aspen::udp_socket::join_multicast_v4";
    membership_v4(io_.require(what)->fd, IP_ADD_MEMBERSHIP, group, interface, what);
}

void udp_socket::leave_multicast_v4(std::string_view group, std::string_view interface) {
    const char* what = "aspen::udp_socket::leave_multicast_v4";
    membership_v4(io_.require(what)->fd, IP_DROP_MEMBERSHIP, group, interface, what);
}

void udp_socket::set_multicast_interface_v4(std::string_view interface) {
    const char* what = "aspen::udp_socket::set_multicast_interface_v4";
    set_option(io_.require(what)->fd, IPPROTO_IP, IP_MULTICAST_IF, v4_address(interface, what), what);
}

void udp_socket::set_multicast_loop_v4(bool on) {
    const char* what = "aspen::udp_socket::set_multicast_loop_v4";
    detail::set_flag_option(io_.require(what)->fd, IPPROTO_IP, IP_MULTICAST_LOOP, on, what);
}

bool udp_socket::multicast_loop_v4() const {
    const char* what = "aspen::udp_socket::multicast_loop_v4";
    return detail::flag_option(io_.require(what)->fd, IPPROTO_IP, IP_MULTICAST_LOOP, what);
}

void udp_socket::set_multicast_ttl_v4(std::uint32_t ttl) {
    const char* what = "aspen::udp_socket::set_multicast_ttl_v4";
    int fd = io_.require(what)->fd;
    // The kernel refuses larger values with EINVAL too; this says the range.
    if (ttl > 255)
        detail::throw_errno(EINVAL, std::string(what) + ": the TTL must be 0 to 255, not " + std::to_string(ttl));
    set_option(fd, IPPROTO_IP, IP_MULTICAST_TTL, static_cast<int>(ttl), what);
}

std::uint32_t udp_socket::multicast_ttl_v4() const {
    const char* what = "aspen::udp_socket::multicast_ttl_v4";
    int v = 0;
    socklen_t len = sizeof v;
    if (::getsockopt(io_.require(what)->fd, IPPROTO_IP, IP_MULTICAST_TTL, &v, &len) != 0)
        detail::throw_errno(errno, what);
    return static_cast<std::uint32_t>(v);
}

void udp_socket::join_multicast_v6(std::string_view group, unsigned interface_index) {
    const char* what = "aspen::udp_socket::join_multicast_v6";
    membership_v6(io_.require(what)->fd, IPV6_ADD_MEMBERSHIP, group, interface_index, what);
}

void udp_socket::leave_multicast_v6(std::string_view group, unsigned interface_index) {
    const char* what = "aspen::udp_socket::leave_multicast_v6";
    membership_v6(io_.require(what)->fd, IPV6_DROP_MEMBERSHIP, group, interface_index, what);
}

void udp_socket::set_multicast_loop_v6(bool on) {
    const char* what = "aspen::udp_socket::set_multicast_loop_v6";
    detail::set_flag_option(io_.require(what)->fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, on, what);
}

bool udp_socket::multicast_loop_v6() const {
    const char* what = "aspen::udp_socket::multicast_loop_v6";
    return detail::flag_option(io_.require(what)->fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, what);
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
