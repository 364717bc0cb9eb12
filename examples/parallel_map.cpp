// parallel_map: map a function over 0..999 with one spawned task per
// element, collect the results in order and check them against a plain loop.
#include <aspen/aspen.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

// Some CPU work per element: the number of Collatz steps from i + 1 down to 1.
std::int64_t collatz_steps(std::int64_t i) {
    std::uint64_t x = static_cast<std::uint64_t>(i) + 1;
    std::int64_t steps = 0;
    while (x != 1) {
        x = (x % 2 == 0) ? x / 2 : 3 * x + 1;
        ++steps;
    }
    return steps;
}

aspen::task<std::int64_t> compute(std::int64_t i) { co_return collatz_steps(i); }

// Spawns every element first (they run in parallel), then joins them in
// order, so results[i] always belongs to element i whatever order they ran in.
aspen::task<std::vector<std::int64_t>> parallel_map(std::int64_t n) {
    std::vector<aspen::join_handle<std::int64_t>> handles;
    handles.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) handles.push_back(aspen::spawn(compute(i)));

    std::vector<std::int64_t> results;
    results.reserve(handles.size());
    for (auto& h : handles) results.push_back(co_await h);
    co_return results;
}

}  // namespace

int main() {
    constexpr std::int64_t n = 1000;
    aspen::runtime rt;

    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::int64_t> results = rt.block_on(parallel_map(n));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

    std::int64_t wrong = 0, total = 0, longest = 0, longest_at = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t got = i < static_cast<std::int64_t>(results.size()) ? results[i] : -1;
        if (got != collatz_steps(i)) {
            if (wrong++ < 5) std::printf("wrong result for %lld: %lld\n", static_cast<long long>(i), static_cast<long long>(got));
            continue;
        }
        total += got;
        if (got > longest) {
            longest = got;
            longest_at = i + 1;
        }
    }
    std::printf("mapped %lld elements on %zu worker%s in %.2f ms\n", static_cast<long long>(n), rt.num_workers(),
                rt.num_workers() == 1 ? "" : "s", ms);
    std::printf("total Collatz steps %lld; longest: %lld steps from %lld\n", static_cast<long long>(total),
                static_cast<long long>(longest), static_cast<long long>(longest_at));
    if (wrong != 0 || static_cast<std::int64_t>(results.size()) != n) {
        std::printf("FAILED: %lld wrong results\n", static_cast<long long>(wrong));
        return 1;
    }
    std::printf("all %lld results correct and in order\n", static_cast<long long>(n));
    return 0;
}
