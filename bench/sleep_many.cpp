// sleep_many: 1,000,000 tasks each sleep until one shared deadline, 200 ms
// after the first spawn, then count down a latch. Measures how long the
// runtime takes to fire a million timers and run their tasks (from the
// deadline to the last task done; a note under the table); the timed value
// is the whole job. What a sleeping task costs in memory is measured once,
// in a fresh child process (sleep_many_resident_bytes_per_task, called by
// main.cpp): in this process the earlier workloads' freed memory would be
// reused and hide it. No TBB equivalent.
#include "bench.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

namespace bench {
namespace {

constexpr std::int64_t tasks = 1'000'000;
constexpr auto sleep_for = std::chrono::milliseconds(200);

aspen::task<void> sleeper(aspen::clock::time_point deadline, std::atomic<std::int64_t>& fired, countdown& left) {
    co_await aspen::sleep_until(deadline);
    fired.fetch_add(1, std::memory_order_relaxed);
    left.arrive();
}

// Spawns the sleepers, then waits (without spinning the worker) until every
// one armed its timer or the deadline passed.
aspen::task<void> spawn_sleepers(aspen::runtime& rt, aspen::clock::time_point deadline,
                                 std::atomic<std::int64_t>& fired, countdown& left) {
    for (std::int64_t i = 0; i < tasks; ++i) aspen::spawn(sleeper(deadline, fired, left)).detach();
    while (rt.metrics().timers_armed < static_cast<std::uint64_t>(tasks) && aspen::now() < deadline)
        co_await aspen::sleep(std::chrono::milliseconds(1));
}

aspen::task<std::int64_t> sleep_many(aspen::runtime& rt) {
    std::atomic<std::int64_t> fired{0};
    countdown left(tasks);
    auto deadline = aspen::now() + sleep_for;
    co_await spawn_sleepers(rt, deadline, fired, left);
    co_await left.wait();
    auto late = std::chrono::duration<double, std::milli>(aspen::now() - deadline).count();
    note("sleep_many", "aspen sleep_many: a million timers fired and their tasks run " +
                           std::to_string(static_cast<int>(late)) + " ms after the deadline (workers: " +
                           std::to_string(rt.metrics().workers.size()) + ")");
    co_return fired.load(std::memory_order_relaxed);
}

// Resident bytes of this process (the second field of /proc/self/statm, in
// pages): every page the tasks touched, whichever allocator or arena it
// came from.
std::int64_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

aspen::task<std::int64_t> resident_per_sleeper(aspen::runtime& rt) {
    std::atomic<std::int64_t> fired{0};
    countdown left(tasks);
    // A long deadline: arming a million timers under a slow machine or a
    // sanitizer must finish before the first fires. 2 s was too short on
    // this VM with three CPU-bound processes beside the benchmark (and in
    // one showcase run on a slow host): not every timer was armed by then.
    auto deadline = aspen::now() + std::chrono::seconds(5);
    const std::int64_t before = resident_bytes();
    co_await spawn_sleepers(rt, deadline, fired, left);
    const bool all_armed = rt.metrics().timers_armed >= static_cast<std::uint64_t>(tasks);
    const std::int64_t during = resident_bytes();
    co_await left.wait();
    if (!all_armed || fired.load(std::memory_order_relaxed) != tasks) co_return -1;
    co_return (during - before) / tasks;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(sleep_many(rt)); }

}  // namespace

std::int64_t sleep_many_resident_bytes_per_task(aspen::runtime& rt) { return rt.block_on(resident_per_sleeper(rt)); }

workload sleep_many_workload() { return {"sleep_many", std::to_string(tasks), tasks, &run_aspen, nullptr, nullptr}; }

}  // namespace bench
