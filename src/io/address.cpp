// socket_address: parsing and formatting of numeric IPv4/IPv6 addresses.
#include <aspen/net/address.hpp>

#include <arpa/inet.h>
#include <net/if.h>

#include <charconv>
#include <cstring>
#include <stdexcept>

namespace aspen {

namespace {

[[noreturn]] void bad(std::string_view text, const char* why) {
    std::string msg = "aspen::socket_address::parse(\"";
    msg.append(text);
    msg += "\"): ";
    msg += why;
    throw std::invalid_argument(msg);
}

std::uint16_t parse_port(std::string_view text, std::string_view port) {
    if (port.empty()) bad(text, "missing port after ':'");
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || port.size() > 5 || value > 65535)
        bad(text, "the port must be a number from 0 to 65535");
    return static_cast<std::uint16_t>(value);
}

// Numeric zone ("2") or interface name ("eth0").
std::uint32_t parse_zone(std::string_view text, std::string_view zone) {
    if (zone.empty()) bad(text, "empty IPv6 zone after '%'");
    unsigned value = 0;
    auto [end, ec] = std::from_chars(zone.data(), zone.data() + zone.size(), value);
    if (ec == std::errc() && end == zone.data() + zone.size()) return value;
    std::string name(zone);
    unsigned index = ::if_nametoindex(name.c_str());
    if (index == 0) bad(text, "unknown network interface in the IPv6 zone");
    return index;
}

}  // namespace

socket_address::socket_address() noexcept {
    std::memset(&storage_, 0, sizeof storage_);
    storage_.v4.sin_family = AF_INET;  // INADDR_ANY and port 0 are all zero bits
}

socket_address socket_address::parse(std::string_view ip, std::uint16_t port) {
    socket_address a;
    std::memset(&a.storage_, 0, sizeof a.storage_);
    if (ip.empty()) bad(ip, "empty address");
    std::string_view zone;
    bool has_zone = false;
    if (auto pct = ip.find('%'); pct != std::string_view::npos) {
        zone = ip.substr(pct + 1);
        ip = ip.substr(0, pct);
        has_zone = true;
    }
    std::string host(ip);  // inet_pton needs a terminated string
    if (!has_zone && ::inet_pton(AF_INET, host.c_str(), &a.storage_.v4.sin_addr) == 1) {
        a.storage_.v4.sin_family = AF_INET;
        a.set_port(port);
        return a;
    }
    if (::inet_pton(AF_INET6, host.c_str(), &a.storage_.v6.sin6_addr) == 1) {
        a.storage_.v6.sin6_family = AF_INET6;
        if (has_zone) a.storage_.v6.sin6_scope_id = parse_zone(ip, zone);
        a.set_port(port);
        return a;
    }
    bad(ip, has_zone ? "not a numeric IPv6 address (a zone needs one)" : "not a numeric IPv4 or IPv6 address");
}

socket_address socket_address::parse(std::string_view text) {
    std::string_view ip, port;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos) bad(text, "missing ']' after the IPv6 address");
        ip = text.substr(1, close - 1);
        std::string_view rest = text.substr(close + 1);
        if (rest.empty() || rest.front() != ':') bad(text, "expected ':port' after ']'");
        port = rest.substr(1);
        if (ip.find(':') == std::string_view::npos) bad(text, "brackets are for IPv6 addresses only");
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos) bad(text, "missing ':port'");
        ip = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (ip.find(':') != std::string_view::npos) bad(text, "an IPv6 address needs brackets: \"[addr]:port\"");
    }
    std::uint16_t p = parse_port(text, port);
    try {
        return parse(ip, p);
    } catch (const std::invalid_argument&) {
        // Re-throw quoting the whole text the caller gave.
        bad(text, "not a numeric IPv4 address or bracketed IPv6 address");
    }
}

socket_address socket_address::loopback_v4(std::uint16_t port) noexcept {
    socket_address a = any_v4(port);
    a.storage_.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

socket_address socket_address::loopback_v6(std::uint16_t port) noexcept {
    socket_address a = any_v6(port);
    a.storage_.v6.sin6_addr = in6addr_loopback;
    return a;
}

bool socket_address::is_loopback() const noexcept {
    if (is_v4()) return (ntohl(storage_.v4.sin_addr.s_addr) >> 24) == 127;
    if (!is_v6()) return false;
    const in6_addr& a = storage_.v6.sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
}

socket_address socket_address::any_v4(std::uint16_t port) noexcept {
    socket_address a;
    a.set_port(port);
    return a;
}

socket_address socket_address::any_v6(std::uint16_t port) noexcept {
    socket_address a;
    std::memset(&a.storage_, 0, sizeof a.storage_);
    a.storage_.v6.sin6_family = AF_INET6;
    a.storage_.v6.sin6_addr = in6addr_any;
    a.set_port(port);
    return a;
}

socket_address socket_address::from_native(const sockaddr* addr, socklen_t size) {
    socket_address a;
    std::memset(&a.storage_, 0, sizeof a.storage_);
    if (addr->sa_family == AF_INET && size >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
        std::memcpy(&a.storage_.v4, addr, sizeof(sockaddr_in));
        return a;
    }
    if (addr->sa_family == AF_INET6 && size >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
        std::memcpy(&a.storage_.v6, addr, sizeof(sockaddr_in6));
        return a;
    }
    throw std::invalid_argument("aspen::socket_address::from_native: not an IPv4 or IPv6 address (family " +
                                std::to_string(addr->sa_family) + ")");
}

std::uint16_t socket_address::port() const noexcept {
    return ntohs(is_v4() ? storage_.v4.sin_port : storage_.v6.sin6_port);
}

void socket_address::set_port(std::uint16_t port) noexcept {
    if (is_v4()) storage_.v4.sin_port = htons(port);
    else storage_.v6.sin6_port = htons(port);
}

socklen_t socket_address::native_size() const noexcept {
    return is_v4() ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

std::string socket_address::ip_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (is_v4()) {
        ::inet_ntop(AF_INET, &storage_.v4.sin_addr, buf, sizeof buf);
        return buf;
    }
    ::inet_ntop(AF_INET6, &storage_.v6.sin6_addr, buf, sizeof buf);
    std::string s = buf;
    if (storage_.v6.sin6_scope_id != 0) {
        s += '%';
        s += std::to_string(storage_.v6.sin6_scope_id);
    }
    return s;
}

// Appends, never `literal + temporary`: g++ 12 warns (-Wrestrict) on that.
std::string socket_address::to_string() const {
    std::string s;
    if (is_v6()) s += '[';
    s += ip_string();
    if (is_v6()) s += ']';
    s += ':';
    s += std::to_string(port());
    return s;
}

bool operator==(const socket_address& a, const socket_address& b) noexcept {
    if (a.family() != b.family()) return false;
    if (a.is_v4())
        return a.storage_.v4.sin_port == b.storage_.v4.sin_port &&
               a.storage_.v4.sin_addr.s_addr == b.storage_.v4.sin_addr.s_addr;
    return a.storage_.v6.sin6_port == b.storage_.v6.sin6_port &&
           std::memcmp(&a.storage_.v6.sin6_addr, &b.storage_.v6.sin6_addr, sizeof(in6_addr)) == 0 &&
           a.storage_.v6.sin6_scope_id == b.storage_.v6.sin6_scope_id;
}

}  // namespace aspen
