// aspen::resolve: getaddrinfo on a thread of its own, completed through a
// waker.
#include <aspen/net/resolve.hpp>
#include <aspen/sync/waiter_list.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

namespace aspen {

namespace {

class resolve_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "getaddrinfo"; }
    std::string message(int code) const override { return ::gai_strerror(code); }
};

// Shared by the awaiting task and the lookup thread; whichever lets go last
// frees it.
struct lookup {
    std::mutex mutex;  // guards everything below
    bool done = false;
    waker waiter;
    std::vector<socket_address> addresses;
    std::error_code error;
};

void run_getaddrinfo(lookup& l, const std::string& host, std::uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;  // one entry per address, not per socket type
    addrinfo* list = nullptr;
    std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
    std::vector<socket_address> found;
    std::error_code ec;
    if (rc == EAI_SYSTEM) ec = std::error_code(errno, std::generic_category());
    else if (rc != 0) ec = std::error_code(rc, resolve_category());
    for (addrinfo* ai = list; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        socket_address a = socket_address::from_native(ai->ai_addr, ai->ai_addrlen);
        if (std::find(found.begin(), found.end(), a) == found.end()) found.push_back(a);
    }
    if (list) ::freeaddrinfo(list);
    waker w;
    {
        std::lock_guard lock(l.mutex);
        l.addresses = std::move(found);
        l.error = ec;
        l.done = true;
        w = std::move(l.waiter);
    }
    w.wake();  // outside the lock
}

// BLOCKING HELPER: runs the lookup on a std::thread of its own. When
// aspen::spawn_blocking exists this function is the one place to switch
// over to it (same contract: run `l`'s lookup off the workers, then wake).
void start_blocking_lookup(std::shared_ptr<lookup> l, std::string host, std::uint16_t port) {
    std::thread([l = std::move(l), host = std::move(host), port] { run_getaddrinfo(*l, host, port); }).detach();
}

// Waits for the lookup; its destructor drops the stored waker (abort).
class lookup_awaitable : public detail::sync::leaf_awaitable<lookup_awaitable> {
public:
    static constexpr const char* awaited_what = "aspen::resolve";
    explicit lookup_awaitable(lookup& l) noexcept : l_(l) {}
    ~lookup_awaitable() {
        waker old;
        std::lock_guard lock(l_.mutex);
        old = std::move(l_.waiter);
        // `old` is dropped after the lock (declared first, destroyed last).
    }
    bool poll(context& cx) {
        std::lock_guard lock(l_.mutex);
        if (l_.done) return true;
        l_.waiter = cx.waker();
        return false;
    }
    void await_resume() { rethrow_if_error(); }

private:
    lookup& l_;
};

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
    auto l = std::make_shared<lookup>();
    start_blocking_lookup(l, host, port);
    co_await lookup_awaitable(*l);
    std::lock_guard lock(l->mutex);
    if (l->error) throw std::system_error(l->error, "aspen::resolve(\"" + host + "\")");
    co_return std::move(l->addresses);
}

}  // namespace aspen
