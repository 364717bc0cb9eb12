// skynet: a tree of tasks with 10-way fan-out down to 1,000,000 leaves; leaf
// i returns i and every node returns the sum of its children. Every node,
// inner or leaf, is its own spawned task joined by its parent (1,111,111
// tasks in all).
#include "bench.hpp"

#include <oneapi/tbb/task_group.h>

#include <array>

namespace bench {
namespace {

constexpr std::int64_t leaves = 1'000'000;
constexpr std::int64_t fan_out = 10;
constexpr std::int64_t expected_sum = leaves * (leaves - 1) / 2;  // 499999500000

aspen::task<std::int64_t> skynet(std::int64_t offset, std::int64_t size) {
    if (size == 1) co_return offset;
    const std::int64_t step = size / fan_out;
    std::array<aspen::join_handle<std::int64_t>, fan_out> children;
    for (std::int64_t i = 0; i < fan_out; ++i) children[i] = aspen::spawn(skynet(offset + i * step, step));
    std::int64_t sum = 0;
    for (auto& child : children) sum += co_await child;
    co_return sum;
}

// The same tree with every spawn replaced by an inline co_await (see
// "inline" in bench.hpp).
aspen::task<std::int64_t> skynet_inline(std::int64_t offset, std::int64_t size) {
    if (size == 1) co_return offset;
    const std::int64_t step = size / fan_out;
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < fan_out; ++i) sum += co_await skynet_inline(offset + i * step, step);
    co_return sum;
}

std::int64_t tbb_skynet(std::int64_t offset, std::int64_t size) {
    if (size == 1) return offset;
    const std::int64_t step = size / fan_out;
    std::array<std::int64_t, fan_out> results{};
    tbb::task_group tg;
    for (std::int64_t i = 0; i < fan_out; ++i)
        tg.run([&results, i, offset, step] { results[i] = tbb_skynet(offset + i * step, step); });
    tg.wait();
    std::int64_t sum = 0;
    for (std::int64_t r : results) sum += r;
    return sum;
}

std::int64_t serial_skynet(std::int64_t offset, std::int64_t size) {
    if (size == 1) return offset;
    const std::int64_t step = size / fan_out;
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < fan_out; ++i) sum += serial_skynet(offset + i * step, step);
    return sum;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(skynet(0, leaves)); }

std::int64_t run_aspen_inline(aspen::runtime& rt) { return rt.block_on(skynet_inline(0, leaves)); }

std::int64_t run_tbb(tbb_arenas& arenas) {
    // The root is a task too, as in the aspen version (block_on spawns it).
    return arenas.local.execute([] {
        std::int64_t sum = 0;
        tbb::task_group tg;
        tg.run([&sum] { sum = tbb_skynet(0, opaque(leaves)); });
        tg.wait();
        return sum;
    });
}

std::int64_t run_serial() { return serial_skynet(0, opaque(leaves)); }

}  // namespace

workload skynet_workload() {
    workload w{"skynet", std::to_string(leaves), expected_sum, &run_aspen, &run_tbb, &run_serial};
    w.aspen_inline = &run_aspen_inline;
    return w;
}

}  // namespace bench
