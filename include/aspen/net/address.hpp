// aspen::socket_address: an IPv4 or IPv6 address and a port.
//
//   auto a = aspen::socket_address::parse("127.0.0.1:8080");
//   auto b = aspen::socket_address::parse("[::1]:80");
//   auto c = aspen::socket_address::loopback_v4(0);   // port 0: the kernel picks one
//   std::string s = a.to_string();                     // "127.0.0.1:8080"
//
// parse() accepts only numeric addresses ("a.b.c.d:port", "[v6]:port", an
// IPv6 zone as "[fe80::1%eth0]:port"); host names go through aspen::resolve
// (aspen/net/resolve.hpp). Bad text throws std::invalid_argument quoting it
// and saying what is wrong. A default-constructed address is 0.0.0.0:0.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace aspen {

class socket_address {
public:
    socket_address() noexcept;

    // "host:port" with a numeric host; std::invalid_argument otherwise.
    static socket_address parse(std::string_view text);
    // A numeric IP ("10.0.0.1", "::1", "fe80::1%eth0") and a port.
    static socket_address parse(std::string_view ip, std::uint16_t port);

    static socket_address loopback_v4(std::uint16_t port) noexcept;  // 127.0.0.1
    static socket_address loopback_v6(std::uint16_t port) noexcept;  // ::1
    static socket_address any_v4(std::uint16_t port) noexcept;       // 0.0.0.0
    static socket_address any_v6(std::uint16_t port) noexcept;       // ::

    // From what the kernel returned (accept, getsockname, recvfrom).
    // std::invalid_argument for a family other than AF_INET / AF_INET6.
    static socket_address from_native(const sockaddr* addr, socklen_t size);

    bool is_v4() const noexcept { return storage_.v4.sin_family == AF_INET; }
    bool is_v6() const noexcept { return storage_.v6.sin6_family == AF_INET6; }
    int family() const noexcept { return storage_.v4.sin_family; }
    // 127.0.0.0/8, ::1, or 127.x mapped into IPv6 (::ffff:127.x.y.z).
    bool is_loopback() const noexcept;
    std::uint16_t port() const noexcept;
    void set_port(std::uint16_t port) noexcept;
    // The address without the port: "127.0.0.1", "::1", "fe80::1%2".
    std::string ip_string() const;
    // "127.0.0.1:8080" or "[::1]:8080" (parse() reads it back).
    std::string to_string() const;

    const sockaddr* native() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
    socklen_t native_size() const noexcept;

    friend bool operator==(const socket_address& a, const socket_address& b) noexcept;

private:
    union {
        sockaddr_in v4;
        sockaddr_in6 v6;
    } storage_;
};

}  // namespace aspen
