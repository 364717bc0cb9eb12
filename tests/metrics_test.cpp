// The metrics that say where tasks wait and why they yield, as Tokio's:
// budget_forced_yields, local_queue_depth and the blocking pool's threads,
// idle threads and queue. (The other counters are checked by the tests of
// what they count: stealing, overflows, parks, the poll-time histogram.)
#include "runtime_kinds.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::any_runtime;
using aspen_test::within;

constexpr std::uint32_t budget = 8;
constexpr int operations = 80;
// A loop of `operations` operations that complete at once, with a budget of
// 8 a poll: the 9th, 17th, ..., 73rd find it spent and yield (the one that
// yielded spends a unit of the next poll), so (80 - 1) / 8 = 9 yields.
constexpr std::uint64_t yields_per_loop = (operations - 1) / budget;

aspen::worker_metrics totals() { return aspen::runtime_handle::current().metrics().total(); }

aspen::task<void> consume_loop() {
    for (int i = 0; i < operations; ++i) co_await aspen::consume_budget();
}

// Records the forced-yield count after each phase: a consume_budget loop, a
// loop of semaphore acquires (a sync leaf), yield_now calls, and a loop
// inside unconstrained. A loop ends with the poll's budget spent, so a
// yield_now (not counted) gives the next loop a poll of its own.
aspen::task<std::vector<std::uint64_t>> yield_phases() {
    std::vector<std::uint64_t> seen;
    seen.push_back(totals().budget_forced_yields);
    co_await consume_loop();
    seen.push_back(totals().budget_forced_yields);
    co_await aspen::yield_now();
    aspen::semaphore sem(operations);
    for (int i = 0; i < operations; ++i) {
        aspen::semaphore_permit p = co_await sem.acquire(1);
    }
    seen.push_back(totals().budget_forced_yields);
    for (int i = 0; i < 5; ++i) co_await aspen::yield_now();
    seen.push_back(totals().budget_forced_yields);
    co_await aspen::unconstrained(consume_loop());
    seen.push_back(totals().budget_forced_yields);
    co_return seen;
}

class Metrics : public ::testing::TestWithParam<int> {};

TEST_P(Metrics, BudgetForcedYieldsCountOnlyYieldsForASpentBudget) {
    aspen::config cfg;
    cfg.coop_budget = budget;
    any_runtime rt(GetParam(), cfg);
    std::vector<std::uint64_t> seen;
    within(60s, "yield phases", [&] { seen = rt->block_on(yield_phases()); });
    ASSERT_EQ(seen.size(), 5u);
    EXPECT_EQ(seen[0], 0u);
    EXPECT_EQ(seen[1], yields_per_loop) << "consume_budget";
    EXPECT_EQ(seen[2], 2 * yields_per_loop) << "semaphore acquire";
    EXPECT_EQ(seen[3], seen[2]) << "yield_now is not forced";
    EXPECT_EQ(seen[4], seen[3]) << "nothing is forced inside unconstrained";
    EXPECT_EQ(rt->metrics().total().budget_forced_yields, seen[4]);
}

aspen::task<void> bump(std::atomic<int>* ran) {
    ran->fetch_add(1, std::memory_order_relaxed);
    co_return;
}

struct depths {
    std::uint64_t after_spawns, after_joins;
};

// Spawns `n` tasks without waiting, reads this worker's run queue depth,
// then joins them all and reads the total depth again.
aspen::task<depths> spawn_then_join(int n, std::atomic<int>* ran) {
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(aspen::spawn(bump(ran)));
    depths d{};
    d.after_spawns = totals().local_queue_depth;
    for (auto& h : hs) co_await h;
    d.after_joins = totals().local_queue_depth;
    co_return d;
}

TEST_P(Metrics, LocalQueueDepthCountsTasksWaitingInTheRunQueues) {
    constexpr int n = 200;
    any_runtime rt(GetParam());
    std::atomic<int> ran{0};
    depths d{};
    within(60s, "spawn then join", [&] { d = rt->block_on(spawn_then_join(n, &ran)); });
    EXPECT_EQ(ran.load(), n);
    EXPECT_EQ(d.after_joins, 0u);
    if (GetParam() == 0) {
        EXPECT_EQ(d.after_spawns, std::uint64_t{n});  // all in the one run queue
    } else if (GetParam() == 1) {
        // Nobody else runs: all but the next slot's task and the (at most
        // 64) spawned ones not yet published are in the ring.
        EXPECT_GE(d.after_spawns, std::uint64_t{n - 1 - 64});
        EXPECT_LE(d.after_spawns, std::uint64_t{n});
    }
    // With more workers, thieves move tasks between rings while the rings
    // are read one after the other, so the sum may count a task twice (or
    // not at all): seen up to 298 for 200 on 8 workers. Only the quiet end
    // is exact.
    EXPECT_EQ(rt->metrics().total().local_queue_depth, 0u);
}

// Keeps its worker for `d` of the steady clock without parking it.
aspen::task<void> spin_for(std::chrono::nanoseconds d) {
    auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
    }
    co_return;
}

std::uint64_t ns_since(std::chrono::steady_clock::time_point t0) {
    return static_cast<std::uint64_t>(std::chrono::nanoseconds(std::chrono::steady_clock::now() - t0).count());
}

// The busy time the runtime reports while a task keeps its worker for
// `spin` (read from inside: the worker's spell is still open then).
aspen::task<std::uint64_t> busy_growth_while_spinning(std::chrono::nanoseconds spin) {
    std::uint64_t before = totals().busy_ns;
    co_await spin_for(spin);
    co_return totals().busy_ns - before;
}

// A worker running a task is busy for at least as long as the task runs,
// and no worker is busy for longer than the runtime has existed.
TEST_P(Metrics, BusyTimeCoversTheTimeSpentRunningTasks) {
    constexpr std::chrono::nanoseconds spin = 30ms;
    auto t0 = std::chrono::steady_clock::now();
    any_runtime rt(GetParam());
    std::uint64_t growth = 0;
    within(60s, "spin", [&] { growth = rt->block_on(busy_growth_while_spinning(spin)); });
    aspen::runtime_metrics after = rt->metrics();
    std::uint64_t lifetime = ns_since(t0);
    EXPECT_GE(growth, static_cast<std::uint64_t>(spin.count()));
    for (const aspen::worker_metrics& w : after.workers) EXPECT_LE(w.busy_ns, lifetime);
}

// While every worker sleeps (or, on a current_thread runtime, nothing
// drives it), nobody's busy time grows.
TEST_P(Metrics, IdleWorkersAreNotBusy) {
    any_runtime rt(GetParam());
    within(60s, "warm-up", [&] { rt->block_on(spin_for(1ms)); });
    // Every worker has parked and not woken since (parks are counted just
    // before the busy spell closes, unparks after the next one opened).
    auto all_parked = [&] {
        aspen::runtime_metrics m = rt->metrics();
        for (const aspen::worker_metrics& w : m.workers)
            if (w.parks != w.unparks + 1) return false;
        return true;
    };
    if (GetParam() > 0) {
        within(60s, "workers parked", [&] {
            while (!all_parked()) std::this_thread::sleep_for(1ms);
        });
    }
    std::this_thread::sleep_for(10ms);  // the last spell closed right after its park was counted
    aspen::runtime_metrics a = rt->metrics();
    std::this_thread::sleep_for(50ms);
    aspen::runtime_metrics b = rt->metrics();
    for (std::size_t i = 0; i < a.workers.size(); ++i) {
        EXPECT_EQ(b.workers[i].unparks, a.workers[i].unparks) << "an idle runtime's workers stay asleep";
        EXPECT_EQ(b.workers[i].busy_ns, a.workers[i].busy_ns) << "worker " << i;
        EXPECT_GT(a.workers[i].busy_ns, 0u) << "awake from its start until its first park";
    }
    EXPECT_GE(a.total().busy_ns, 1'000'000u) << "one of them ran the 1 ms task";
}

INSTANTIATE_TEST_SUITE_P(Kinds, Metrics, aspen_test::runtime_kinds, aspen_test::kind_name);

// Waits (yielding, under the caller's watchdog) until the blocking pool
// shows the given numbers.
aspen::task<void> wait_for_pool(std::uint64_t threads, std::uint64_t idle, std::uint64_t queued) {
    for (;;) {
        aspen::runtime_metrics m = aspen::runtime_handle::current().metrics();
        if (m.blocking_threads == threads && m.idle_blocking_threads == idle && m.blocking_queue_depth == queued)
            co_return;
        co_await aspen::sleep(1ms);
    }
}

aspen::task<void> fill_the_pool(std::latch* gate, std::atomic<int>* ran) {
    std::vector<aspen::join_handle<void>> jobs;
    for (int i = 0; i < 3; ++i) {
        jobs.push_back(aspen::spawn_blocking([gate, ran] {
            gate->wait();
            ran->fetch_add(1, std::memory_order_relaxed);
        }));
    }
    co_await wait_for_pool(2, 0, 1);  // two threads busy, the third job queued
    gate->count_down();
    for (auto& j : jobs) co_await j;
    co_await wait_for_pool(2, 2, 0);  // both threads wait for work until their keep-alive ends
}

class BlockingPoolMetrics : public ::testing::TestWithParam<int> {};

TEST_P(BlockingPoolMetrics, ThreadsIdleThreadsAndQueuedJobs) {
    aspen::config cfg;
    cfg.max_blocking_threads = 2;
    cfg.blocking_keep_alive = 60s;  // no thread ends during the test
    any_runtime rt(GetParam(), cfg);
    aspen::runtime_metrics before = rt->metrics();
    EXPECT_EQ(before.blocking_threads, 0u);
    EXPECT_EQ(before.idle_blocking_threads, 0u);
    EXPECT_EQ(before.blocking_queue_depth, 0u);
    std::latch gate(1);
    std::atomic<int> ran{0};
    within(60s, "blocking pool metrics", [&] { rt->block_on(fill_the_pool(&gate, &ran)); });
    EXPECT_EQ(ran.load(), 3);
}

TEST_P(BlockingPoolMetrics, ThreadsThatEndAfterTheirKeepAliveLeaveTheCount) {
    aspen::config cfg;
    cfg.blocking_keep_alive = 20ms;
    any_runtime rt(GetParam(), cfg);
    std::atomic<int> ran{0};
    within(60s, "keep-alive ends", [&] {
        rt->block_on([](std::atomic<int>* r) -> aspen::task<void> {
            co_await aspen::spawn_blocking([r] { r->fetch_add(1, std::memory_order_relaxed); });
            co_await wait_for_pool(0, 0, 0);
        }(&ran));
    });
    EXPECT_EQ(ran.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(Kinds, BlockingPoolMetrics, ::testing::Values(0, 2), aspen_test::kind_name);

}  // namespace
