// Misuse that must not compile: aspen::timeout given a join_handle, whose
// drop on time-out would leave the task running where the caller expects
// it stopped. Built twice by tests/CMakeLists.txt: as is (must fail, with
// timeout's own message) and with -DASPEN_CONTROL (the task itself, which
// timeout aborts on time-out, and the handle awaited in a task of the
// caller's own: must compile).
// expect: aspen::timeout: pass the task itself
#include <aspen/aspen.hpp>

#include <chrono>

aspen::task<int> work() { co_return 1; }

aspen::task<void> body() {
    using namespace std::chrono_literals;
    aspen::join_handle<int> h = aspen::spawn(work());
#ifdef ASPEN_CONTROL
    int a = co_await aspen::timeout(1s, work());
    int b = co_await aspen::timeout(1s, [&]() -> aspen::task<int> { co_return co_await h; }());
    (void)a;
    (void)b;
#else
    int b = co_await aspen::timeout(1s, std::move(h));
    (void)b;
#endif
}
