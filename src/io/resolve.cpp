// aspen::resolve: getaddrinfo on the blocking pool (spawn_blocking).
#include <aspen/net/resolve.hpp>
#include <aspen/spawn_blocking.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <stdexcept>
#include <utility>

namespace aspen {

namespace {

class resolve_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "getaddrinfo"; }
    std::string message(int code) const override { return ::gai_strerror(code); }
};

// The lookup itself, on a blocking-pool thread: the addresses (IPv4 and
// IPv6, without duplicates) or a system_error naming the host.
std::vector<socket_address> run_getaddrinfo(const std::string& host, std::uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;  // one entry per address, not per socket type
    addrinfo* list = nullptr;
    std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
    if (rc == EAI_SYSTEM) throw std::system_error(errno, std::generic_category(), "aspen::resolve(\"" + host + "\")");
    if (rc != 0) throw std::system_error(rc, resolve_category(), "aspen::resolve(\"" + host + "\")");
    std::vector<socket_address> found;
    for (addrinfo* ai = list; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        socket_address a = socket_address::from_native(ai->ai_addr, ai->ai_addrlen);
        if (std::find(found.begin(), found.end(), a) == found.end()) found.push_back(a);
    }
    if (list) ::freeaddrinfo(list);
    return found;
}

std::optional<socket_address> numeric(const std::string& host, std::uint16_t port) {
    try {
        return socket_address::parse(host, port);
    } catch (const std::invalid_argument&) {
        return std::nullopt;  // a name, not a numeric address
    }
}

}  // namespace

const std::error_category& resolve_category() noexcept {
    static const resolve_category_impl instance;
    return instance;
}

task<std::vector<socket_address>> resolve(std::string host, std::uint16_t port) {
    if (auto a = numeric(host, port)) co_return std::vector<socket_address>{*a};
    if (host.empty()) throw std::invalid_argument("aspen::resolve: empty host name");
    // On the blocking pool: getaddrinfo may take seconds and must not hold a
    // worker. An aborted resolve leaves the lookup to finish there unobserved.
    auto lookup = spawn_blocking([host, port] { return run_getaddrinfo(host, port); });
    co_return co_await lookup;
}

}  // namespace aspen
