// fork_join: recursive Fibonacci with one spawned task per call, the classic
// fork-join pattern on a work-stealing scheduler.
//
//   fork_join [n] [workers]     (defaults: n = 30, one worker per hardware thread)
#include <aspen/aspen.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

aspen::task<std::int64_t> fib(int n) {
    if (n < 2) co_return n;
    aspen::join_handle<std::int64_t> left = aspen::spawn(fib(n - 1));  // fork: may be stolen by another worker
    std::int64_t right = co_await fib(n - 2);                          // meanwhile, do the other half here
    std::int64_t l = co_await left;                                    // join
    co_return l + right;
}

std::int64_t fib_loop(int n) {
    std::int64_t a = 0, b = 1;
    for (int i = 0; i < n; ++i) {
        const std::int64_t next = a + b;
        a = b;
        b = next;
    }
    return a;
}

bool parse_int(const char* s, int lo, int hi, int& out) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) return false;
    out = static_cast<int>(v);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    int n = 30;
    aspen::config cfg;
    int workers = 0;
    if (argc > 3 || (argc > 1 && !parse_int(argv[1], 0, 45, n)) ||
        (argc > 2 && !parse_int(argv[2], 1, 256, workers))) {
        std::fprintf(stderr, "usage: %s [n (0..45, default 30)] [workers (1..256)]\n", argv[0]);
        return 2;
    }
    if (workers > 0) cfg.workers = static_cast<std::size_t>(workers);
    aspen::runtime rt(cfg);

    const auto start = std::chrono::steady_clock::now();
    const std::int64_t v = rt.block_on(fib(n));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

    const aspen::worker_metrics total = rt.metrics().total();
    std::printf("fib(%d) = %lld in %.2f ms on %zu worker%s\n", n, static_cast<long long>(v), ms, rt.num_workers(),
                rt.num_workers() == 1 ? "" : "s");
    std::printf("tasks spawned: %llu, stolen by another worker: %llu\n",
                static_cast<unsigned long long>(total.tasks_spawned), static_cast<unsigned long long>(total.tasks_stolen));
    if (v != fib_loop(n)) {
        std::printf("FAILED: expected %lld\n", static_cast<long long>(fib_loop(n)));
        return 1;
    }
    return 0;
}
