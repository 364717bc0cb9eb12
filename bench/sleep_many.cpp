// sleep_many: 1,000,000 tasks each sleep until one shared deadline, 200 ms
// after the first spawn, then count down a latch. Measures what a sleeping
// task costs in memory (malloc'd bytes in use while all sleep, per task) and
// how long the runtime takes to fire a million timers and run their tasks
// (from the deadline to the last task done). Both go into the notes under
// the table; the timed value is the whole job. No TBB equivalent.
#include "bench.hpp"

#include <malloc.h>

#include <chrono>
#include <cstdio>

namespace bench {
namespace {

constexpr std::int64_t tasks = 1'000'000;
constexpr auto sleep_for = std::chrono::milliseconds(200);

aspen::task<void> sleeper(aspen::clock::time_point deadline, std::atomic<std::int64_t>& fired, countdown& left) {
    co_await aspen::sleep_until(deadline);
    fired.fetch_add(1, std::memory_order_relaxed);
    left.arrive();
}

aspen::task<std::int64_t> sleep_many(aspen::runtime& rt) {
    std::atomic<std::int64_t> fired{0};
    countdown left(tasks);
    auto deadline = aspen::now() + sleep_for;
    std::size_t before = mallinfo2().uordblks;
    for (std::int64_t i = 0; i < tasks; ++i) aspen::spawn(sleeper(deadline, fired, left)).detach();
    // Wait (without spinning the worker) until every sleeper armed its timer.
    while (rt.metrics().timers_armed < static_cast<std::uint64_t>(tasks) && aspen::now() < deadline)
        co_await aspen::sleep(std::chrono::milliseconds(1));
    std::size_t during = mallinfo2().uordblks;
    co_await left.wait();
    auto late = std::chrono::duration<double, std::milli>(aspen::now() - deadline).count();
    note("sleep_many", "aspen sleep_many: " + std::to_string((during - before) / tasks) +
                           " bytes per sleeping task; a million timers fired and their tasks run " +
                           std::to_string(static_cast<int>(late)) + " ms after the deadline (workers: " +
                           std::to_string(rt.metrics().workers.size()) + ")");
    co_return fired.load(std::memory_order_relaxed);
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(sleep_many(rt)); }

}  // namespace

workload sleep_many_workload() { return {"sleep_many", std::to_string(tasks), tasks, &run_aspen, nullptr, nullptr}; }

}  // namespace bench
