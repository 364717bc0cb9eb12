// Misuse that must not compile: aspen::select given a named (lvalue)
// operation, which would stay registered after losing. Built twice by
// tests/CMakeLists.txt: as is (must fail, with select's own message) and
// with -DASPEN_CONTROL (the same call with temporaries: must compile, so the
// failure above is the misuse and nothing else).
// expect: aspen::select: pass the operations as temporaries
#include <aspen/aspen.hpp>

aspen::task<void> body(aspen::mpsc_receiver<int>& a, aspen::mpsc_receiver<int>& b) {
#ifdef ASPEN_CONTROL
    auto r = co_await aspen::select(a.recv(), b.recv());
#else
    auto named = a.recv();
    auto r = co_await aspen::select(named, b.recv());
#endif
    (void)r;
}
