// Misuse that must not compile: aspen::timeout given an awaitable that
// cannot move into the task timeout runs (a channel receive). Built twice
// by tests/CMakeLists.txt: as is (must fail, with timeout's own message
// rather than a page of template errors) and with -DASPEN_CONTROL (the
// receive in a task of its own, as the message says, and a socket read,
// which may be given directly: must compile).
// expect: aspen::timeout: this awaitable cannot move into the task
#include <aspen/aspen.hpp>

#include <chrono>

aspen::task<void> body(aspen::mpsc_receiver<int>& rx, aspen::tcp_stream& s) {
    using namespace std::chrono_literals;
#ifdef ASPEN_CONTROL
    auto v = co_await aspen::timeout(1s, [&]() -> aspen::task<std::optional<int>> { co_return co_await rx.recv(); }());
    char buf[16];
    std::size_t n = co_await aspen::timeout(1s, s.read(buf, sizeof buf));
    (void)n;
#else
    auto v = co_await aspen::timeout(1s, rx.recv());
    (void)s;
#endif
    (void)v;
}
