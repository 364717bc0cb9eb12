// fib: recursive Fibonacci. Every call with n >= 2 spawns fib(n-1), computes
// fib(n-2) inline and joins the spawned half: ~1.3 million spawns for n = 30.
#include "bench.hpp"

#include <oneapi/tbb/task_group.h>

namespace bench {
namespace {

constexpr int fib_n = 30;
constexpr std::int64_t fib_30 = 832040;

aspen::task<std::int64_t> fib(int n) {
    if (n < 2) co_return n;
    aspen::join_handle<std::int64_t> h = aspen::spawn(fib(n - 1));
    std::int64_t b = co_await fib(n - 2);
    std::int64_t a = co_await h;
    co_return a + b;
}

// The same recursion with the spawn replaced by an inline co_await: the
// coroutine frames without the scheduler (see "inline" in bench.hpp).
aspen::task<std::int64_t> fib_inline(int n) {
    if (n < 2) co_return n;
    std::int64_t a = co_await fib_inline(n - 1);
    std::int64_t b = co_await fib_inline(n - 2);
    co_return a + b;
}

std::int64_t tbb_fib(int n) {
    if (n < 2) return n;
    std::int64_t a = 0;
    tbb::task_group tg;
    tg.run([&a, n] { a = tbb_fib(n - 1); });
    std::int64_t b = tbb_fib(n - 2);
    tg.wait();
    return a + b;
}

std::int64_t serial_fib(int n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

std::int64_t run_aspen(aspen::runtime& rt) { return aspen_fib(rt, fib_n); }

std::int64_t run_aspen_inline(aspen::runtime& rt) { return rt.block_on(fib_inline(fib_n)); }

std::int64_t run_tbb(tbb_arenas& arenas) {
    return arenas.local.execute([] { return tbb_fib(opaque(fib_n)); });
}

std::int64_t run_serial() { return serial_fib(opaque(fib_n)); }

}  // namespace

std::int64_t aspen_fib(aspen::runtime& rt, int n) { return rt.block_on(fib(n)); }

workload fib_workload() {
    workload w{"fib", std::to_string(fib_n), fib_30, &run_aspen, &run_tbb, &run_serial};
    w.aspen_inline = &run_aspen_inline;
    return w;
}

}  // namespace bench
