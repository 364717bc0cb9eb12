// The parallel algorithms: a loop, a reduction and a sort over the
// runtime's workers, awaited from a task like any other operation.
#include <aspen/aspen.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

aspen::task<int> demo() {
    const std::size_t n = 4'000'000;

    // parallel_for: fill a vector, one index per call.
    std::vector<double> x(n);
    co_await aspen::parallel_for(std::size_t{0}, n,
                                 [&](std::size_t i) { x[i] = std::sin(0.001 * static_cast<double>(i)); });

    // parallel_reduce: chunks of indices, their sums combined in index order
    // (with this fixed grain, the same double on any number of workers).
    const double sum = co_await aspen::parallel_reduce(
        std::size_t{0}, n, 0.0,
        [&](std::size_t lo, std::size_t hi) {
            double s = 0;
            for (std::size_t i = lo; i < hi; ++i) s += x[i] * x[i];
            return s;
        },
        std::plus<>(), 65536);
    std::printf("sum of sin^2 over %zu points: %.6f (about n/2 = %zu)\n", n, sum, n / 2);

    // parallel_sort: 2,000,000 random keys.
    std::vector<std::uint32_t> keys(2'000'000);
    std::mt19937 rng(42);
    for (auto& k : keys) k = rng();
    co_await aspen::parallel_sort(keys.begin(), keys.end());
    const bool sorted = std::is_sorted(keys.begin(), keys.end());
    std::printf("sorted %zu keys: %s, median %u\n", keys.size(), sorted ? "in order" : "NOT IN ORDER",
                keys[keys.size() / 2]);

    // parallel_invoke: two independent computations at once.
    double left = 0, right = 0;
    co_await aspen::parallel_invoke([&] { for (std::size_t i = 0; i < n / 2; ++i) left += x[i]; },
                                    [&] { for (std::size_t i = n / 2; i < n; ++i) right += x[i]; });
    std::printf("halves: %.3f + %.3f on %zu workers\n", left, right, aspen::current_worker_count());
    co_return sorted && std::fabs(sum - static_cast<double>(n) / 2) < static_cast<double>(n) / 100 ? 0 : 1;
}

int main() {
    aspen::runtime rt;
    return rt.block_on(demo());
}
