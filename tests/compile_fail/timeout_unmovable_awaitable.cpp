// Misuse that must not compile: aspen::timeout given an awaitable that
// cannot move into the task timeout runs (one of the user's own, pinned in
// place). Built twice by tests/CMakeLists.txt: as is (must fail, with
// timeout's own message rather than a page of template errors) and with
// -DASPEN_CONTROL (the same awaitable in a task of its own, as the message
// says, and aspen's own operations, which move until first awaited: must
// compile).
// expect: aspen::timeout: this awaitable cannot move into the task
#include <aspen/aspen.hpp>

#include <chrono>
#include <coroutine>

struct pinned {
    pinned() = default;
    pinned(pinned&&) = delete;
    bool await_ready() const noexcept { return true; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    int await_resume() const noexcept { return 1; }
};

aspen::task<void> body(aspen::mpsc_receiver<int>& rx, aspen::tcp_stream& s, aspen::mutex& m) {
    using namespace std::chrono_literals;
#ifdef ASPEN_CONTROL
    int v = co_await aspen::timeout(1s, []() -> aspen::task<int> { co_return co_await pinned{}; }());
    std::optional<int> got = co_await aspen::timeout(1s, rx.recv());
    char buf[16];
    std::size_t n = co_await aspen::timeout(1s, s.read(buf, sizeof buf));
    auto guard = co_await aspen::timeout(1s, m.lock());
    (void)got;
    (void)n;
#else
    int v = co_await aspen::timeout(1s, pinned{});
    (void)rx;
    (void)s;
    (void)m;
#endif
    (void)v;
}
