// The parallel algorithms (aspen/parallel.hpp) against oneTBB's, each with
// its default partitioning, and a serial loop:
//   par_for     a 768x768 Mandelbrot image, one index per row (rows differ
//               in cost up to 40x: load balancing), total iterations;
//   par_reduce  a hash folded over 40,000,000 indices (little work per
//               index: the cost of cutting and combining), the sum;
//   par_sort    2,000,000 random 64-bit keys copied then sorted, a checksum
//               that depends on the order.
#include "bench.hpp"

#include <aspen/parallel.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/parallel_sort.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace bench {
namespace {

// ---- par_for -----------------------------------------------------------------

constexpr int side = 768;
constexpr int max_iterations = 256;

std::int64_t mandel_row(int y) {
    std::int64_t total = 0;
    const double ci = -1.25 + 2.5 * y / side;
    for (int x = 0; x < side; ++x) {
        const double cr = -2.0 + 2.5 * x / side;
        double zr = 0, zi = 0;
        int i = 0;
        while (i < max_iterations && zr * zr + zi * zi <= 4.0) {
            const double t = zr * zr - zi * zi + cr;
            zi = 2 * zr * zi + ci;
            zr = t;
            ++i;
        }
        total += i;
    }
    return total;
}

// Each row's count lands in its own slot; summed afterwards.
std::vector<std::int64_t>& row_counts() {
    static std::vector<std::int64_t> rows(side);
    return rows;
}

std::int64_t sum_rows() {
    std::int64_t total = 0;
    for (std::int64_t r : row_counts()) total += r;
    return total;
}

aspen::task<std::int64_t> mandel_aspen() {
    co_await aspen::parallel_for(0, opaque(side),
                                 [](int y) { row_counts()[static_cast<std::size_t>(y)] = mandel_row(y); });
    co_return sum_rows();
}

std::int64_t run_for_aspen(aspen::runtime& rt) { return rt.block_on(mandel_aspen()); }

std::int64_t run_for_tbb(tbb_arenas& arenas) {
    return arenas.local.execute([] {
        tbb::parallel_for(0, opaque(side), [](int y) { row_counts()[static_cast<std::size_t>(y)] = mandel_row(y); });
        return sum_rows();
    });
}

std::int64_t run_for_serial() {
    for (int y = 0; y < opaque(side); ++y) row_counts()[static_cast<std::size_t>(y)] = mandel_row(y);
    return sum_rows();
}

// ---- par_reduce --------------------------------------------------------------

constexpr std::int64_t reduce_n = 40'000'000;

inline std::int64_t mix(std::int64_t i) {
    std::uint64_t x = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::int64_t>((x ^ (x >> 29)) & 1023);
}

std::int64_t mix_range(std::int64_t lo, std::int64_t hi) {
    std::int64_t s = 0;
    for (std::int64_t i = lo; i < hi; ++i) s += mix(i);
    return s;
}

aspen::task<std::int64_t> reduce_aspen() {
    co_return co_await aspen::parallel_reduce(
        std::int64_t{0}, opaque(reduce_n), std::int64_t{0},
        [](std::int64_t lo, std::int64_t hi) { return mix_range(lo, hi); }, std::plus<>());
}

std::int64_t run_reduce_aspen(aspen::runtime& rt) { return rt.block_on(reduce_aspen()); }

std::int64_t run_reduce_tbb(tbb_arenas& arenas) {
    return arenas.local.execute([] {
        return tbb::parallel_reduce(
            tbb::blocked_range<std::int64_t>(0, opaque(reduce_n)), std::int64_t{0},
            [](const tbb::blocked_range<std::int64_t>& r, std::int64_t acc) {
                return acc + mix_range(r.begin(), r.end());
            },
            std::plus<>());
    });
}

std::int64_t run_reduce_serial() { return mix_range(0, opaque(reduce_n)); }

std::int64_t expected_reduce() { return mix_range(0, reduce_n); }

// ---- par_sort ----------------------------------------------------------------

constexpr std::size_t sort_n = 2'000'000;

const std::vector<std::uint64_t>& sort_input() {
    static const std::vector<std::uint64_t> input = [] {
        std::vector<std::uint64_t> v(sort_n);
        std::mt19937_64 rng(12345);
        for (auto& x : v) x = rng();
        return v;
    }();
    return input;
}

std::vector<std::uint64_t>& sort_buffer() {
    static std::vector<std::uint64_t> v;
    return v;
}

// Depends on every key and its position: wrong order, wrong sum.
std::int64_t order_checksum(const std::vector<std::uint64_t>& v) {
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += (v[i] >> 20) * (i % 7 + 1);
    return static_cast<std::int64_t>(s & 0x7FFF'FFFF'FFFF'FFFF);
}

std::int64_t sorted_checksum() {
    auto& v = sort_buffer();
    if (!std::is_sorted(v.begin(), v.end())) return -1;
    return order_checksum(v);
}

aspen::task<std::int64_t> sort_aspen() {
    auto& v = sort_buffer();
    v = sort_input();
    co_await aspen::parallel_sort(v.begin(), v.end());
    co_return sorted_checksum();
}

std::int64_t run_sort_aspen(aspen::runtime& rt) { return rt.block_on(sort_aspen()); }

std::int64_t run_sort_tbb(tbb_arenas& arenas) {
    return arenas.local.execute([] {
        auto& v = sort_buffer();
        v = sort_input();
        tbb::parallel_sort(v.begin(), v.end());
        return sorted_checksum();
    });
}

std::int64_t run_sort_serial() {
    auto& v = sort_buffer();
    v = sort_input();
    std::sort(v.begin(), v.end());
    return sorted_checksum();
}

std::int64_t expected_sort() {
    std::vector<std::uint64_t> v = sort_input();
    std::sort(v.begin(), v.end());
    return order_checksum(v);
}

std::int64_t expected_mandel() {
    std::int64_t total = 0;
    for (int y = 0; y < side; ++y) total += mandel_row(y);
    return total;
}

}  // namespace

workload par_for_workload() {
    workload w{"par_for", std::to_string(side) + "x" + std::to_string(side), 0, &run_for_aspen, &run_for_tbb,
               &run_for_serial};
    w.expected_fn = &expected_mandel;
    return w;
}

workload par_reduce_workload() {
    workload w{"par_reduce", std::to_string(reduce_n), 0, &run_reduce_aspen, &run_reduce_tbb, &run_reduce_serial};
    w.expected_fn = &expected_reduce;
    return w;
}

workload par_sort_workload() {
    workload w{"par_sort", std::to_string(sort_n), 0, &run_sort_aspen, &run_sort_tbb, &run_sort_serial};
    w.expected_fn = &expected_sort;
    return w;
}

}  // namespace bench
