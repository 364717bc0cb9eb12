// A prototype, not part of aspen and not built by CMake: the least
// bookkeeping a stealable child spawn needs, on one thread, to calibrate the
// floor of what a spawn costs on this machine and compiler (docs/performance.md,
// "History", 2026-11-24). spawn = a pool-allocated coroutine frame and a
// Chase-Lev owner push (release store); join = the owner pop (a seq_cst
// fence) and the child run inline by symmetric transfer, as aspen's adopted
// join does. No cancellation, wakers, metrics, exceptions, detach, registry
// or second thread: what aspen pays for those is the difference.
//
//   g++ -std=c++20 -O3 -DNDEBUG docs/prototypes/lean_spawn.cpp -o lean_spawn
//   ./lean_spawn fib | fibi | sky | skyi      (best of 10 runs; N=25 sets fib's n,
//                                              R=1 makes it one run)
//
// fib and sky spawn as bench/fib.cpp and bench/skynet.cpp do (sky joins its
// children newest first, the one order this single-thread deque serves);
// fibi and skyi await every child inline (the frames alone).
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
using i64 = std::int64_t;

namespace pool {
struct blk { blk* next; };
thread_local blk* heads[64];
inline void* alloc(std::size_t n) {
    std::size_t c = (n + 15) / 16;
    if (blk* b = heads[c]) { heads[c] = b->next; return b; }
    return ::operator new(c * 16);
}
inline void dealloc(void* p, std::size_t n) {
    std::size_t c = (n + 15) / 16;
    heads[c] = new (p) blk{heads[c]};
}
}

struct deque {
    std::atomic<i64> top{0}, bottom{0};
    void* buf[1 << 16];
    void push(void* x) {
        i64 b = bottom.load(std::memory_order_relaxed);
        buf[b & 0xFFFF] = x;
        bottom.store(b + 1, std::memory_order_release);
    }
    void* pop() {
        i64 b = bottom.load(std::memory_order_relaxed) - 1;
        bottom.store(b, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        i64 t = top.load(std::memory_order_relaxed);
        if (t > b) { bottom.store(b + 1, std::memory_order_relaxed); return nullptr; }
        void* x = buf[b & 0xFFFF];
        if (t == b) {
            if (!top.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) x = nullptr;
            bottom.store(b + 1, std::memory_order_relaxed);
        }
        return x;
    }
};
deque dq;

template <class T>
struct task {
    struct promise_type {
        std::coroutine_handle<> cont;
        T value;
        std::atomic<bool> done{false};
        static void* operator new(std::size_t n) { return pool::alloc(n); }
        static void operator delete(void* p, std::size_t n) { pool::dealloc(p, n); }
        task get_return_object() { return task{std::coroutine_handle<promise_type>::from_promise(*this)}; }
        std::suspend_always initial_suspend() noexcept { return {}; }
        struct fin {
            bool await_ready() noexcept { return false; }
            std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
                h.promise().done.store(true, std::memory_order_release);
                if (auto c = h.promise().cont) return c;
                return std::noop_coroutine();
            }
            void await_resume() noexcept {}
        };
        fin final_suspend() noexcept { return {}; }
        void return_value(T v) { value = v; }
        void unhandled_exception() { std::abort(); }
    };
    std::coroutine_handle<promise_type> h;
    explicit task(std::coroutine_handle<promise_type> x) : h(x) {}
    task(task&& o) noexcept : h(std::exchange(o.h, {})) {}
    ~task() { if (h) h.destroy(); }
    struct aw {
        std::coroutine_handle<promise_type> h;
        bool await_ready() { return false; }
        std::coroutine_handle<> await_suspend(std::coroutine_handle<> p) { h.promise().cont = p; return h; }
        T await_resume() { return h.promise().value; }
    };
    aw operator co_await() && { return aw{h}; }
};

// A spawned child: pushed on the deque; joined by popping it back.
template <class T>
struct handle {
    std::coroutine_handle<typename task<T>::promise_type> h;
    ~handle() { if (h) h.destroy(); }
    struct aw {
        handle* self;
        bool await_ready() { return self->h.promise().done.load(std::memory_order_acquire); }
        std::coroutine_handle<> await_suspend(std::coroutine_handle<> p) {
            void* x = dq.pop();
            if (x != self->h.address()) std::abort();  // one thread: always ours
            self->h.promise().cont = p;
            return self->h;
        }
        T await_resume() { return self->h.promise().value; }
    };
    aw operator co_await() { return aw{this}; }
};
template <class T>
handle<T> spawn(task<T>&& t) {
    auto h = std::exchange(t.h, {});
    dq.push(h.address());
    return handle<T>{h};
}

task<i64> fib(int n) {
    if (n < 2) co_return n;
    auto h = spawn(fib(n - 1));
    i64 b = co_await fib(n - 2);
    i64 a = co_await h;
    co_return a + b;
}
task<i64> fibi(int n) {
    if (n < 2) co_return n;
    i64 a = co_await fibi(n - 1);
    i64 b = co_await fibi(n - 2);
    co_return a + b;
}
task<i64> sky(i64 off, i64 size) {
    if (size == 1) co_return off;
    i64 step = size / 10;
    handle<i64> hs[10];
    for (int i = 0; i < 10; ++i) new (&hs[i]) handle<i64>{spawn(sky(off + i * step, step))};
    i64 s = 0;
    for (int i = 9; i >= 0; --i) s += co_await hs[i];  // newest first: always on top
    co_return s;
}
task<i64> skyi(i64 off, i64 size) {
    if (size == 1) co_return off;
    i64 step = size / 10, s = 0;
    for (int i = 0; i < 10; ++i) s += co_await skyi(off + i * step, step);
    co_return s;
}
template <class T>
T run(task<T> t) { auto h = t.h; h.resume(); return h.promise().value; }

int main(int argc, char** argv) {
    const char* w = argc > 1 ? argv[1] : "fib";
    const int N = getenv("N") ? atoi(getenv("N")) : 30;
    const int runs = getenv("R") ? 1 : 10;  // R=1: one run (under callgrind)
    double best = 1e9; i64 v = 0;
    for (int r = 0; r < runs; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        if (!strcmp(w, "fib")) v = run(fib(N));
        else if (!strcmp(w, "fibi")) v = run(fibi(N));
        else if (!strcmp(w, "sky")) v = run(sky(0, 1000000));
        else v = run(skyi(0, 1000000));
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (ms < best) best = ms;
    }
    printf("%s v=%lld best %.2f ms\n", w, (long long)v, best);
}
