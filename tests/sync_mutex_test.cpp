// aspen::mutex: mutual exclusion, FIFO hand-off, try_lock, cancel safety
// (aborted while queued, aborted after being handed the lock), under 1, 2
// and 8 workers and on the current-thread runtime.
#include <aspen/aspen.hpp>
#include <aspen/sync/mutex.hpp>

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <random>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;

using aspen_test::workers;

#ifdef ASPEN_SANITIZED
constexpr int kIterations = 200;
#else
constexpr int kIterations = 2000;
#endif

struct shared_counter {
    aspen::mutex m;
    std::atomic<int> inside{0};
    std::atomic<int> violations{0};
    long long value = 0;  // plain: only touched under m
};

aspen::task<void> hammer(shared_counter* s, int iterations, int yield_every) {
    for (int i = 0; i < iterations; ++i) {
        aspen::mutex_guard g = co_await s->m.lock();
        // Leaves the section before g unlocks, also when the task is aborted
        // at the yield below (locals are destroyed in reverse order).
        struct section {
            shared_counter* s;
            explicit section(shared_counter* sc) : s(sc) {
                if (s->inside.fetch_add(1) != 0) s->violations.fetch_add(1);
            }
            ~section() { s->inside.fetch_sub(1); }
        } in(s);
        long long v = s->value;
        if (yield_every && i % yield_every == 0) co_await aspen::yield_now();  // hold it across a suspension
        s->value = v + 1;
    }
}

aspen::task<long long> run_hammer(shared_counter* s, int tasks) {
    std::vector<aspen::join_handle<void>> hs;
    for (int t = 0; t < tasks; ++t) hs.push_back(aspen::spawn(hammer(s, kIterations, 1 + t % 7)));
    for (auto& h : hs) co_await h;
    co_return s->value;
}

TEST(SyncMutex, TryLockOutsideRuntime) {
    aspen::mutex m;
    EXPECT_FALSE(m.is_locked());
    {
        auto g = m.try_lock();
        ASSERT_TRUE(g.has_value());
        EXPECT_TRUE(g->owns_lock());
        EXPECT_TRUE(m.is_locked());
        EXPECT_FALSE(m.try_lock().has_value());
        aspen::mutex_guard moved = std::move(*g);
        EXPECT_FALSE(g->owns_lock());
        EXPECT_TRUE(m.is_locked());
    }
    EXPECT_FALSE(m.is_locked());
    auto g = m.try_lock();
    ASSERT_TRUE(g.has_value());
    g->unlock();
    EXPECT_FALSE(m.is_locked());
}

TEST(SyncMutex, AwaitOutsideTaskThrows) {
    aspen::mutex m;
    auto a = m.lock();
    EXPECT_THROW((void)a.await_ready(), std::logic_error);
}

class SyncMutexWorkers : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SyncMutexWorkers, MutualExclusionAndCounting) {
    aspen::runtime rt(workers(GetParam()));
    shared_counter s;
    constexpr int tasks = 32;
    long long total = 0;
    within(300s, "mutex counting", [&] { total = rt.block_on(run_hammer(&s, tasks)); });
    EXPECT_EQ(total, static_cast<long long>(tasks) * kIterations);
    EXPECT_EQ(s.violations.load(), 0);
    EXPECT_FALSE(s.m.is_locked());
    EXPECT_EQ(s.m.waiter_count(), 0u);
}

aspen::task<void> record_lock(aspen::mutex* m, std::vector<int>* order, int id, aspen_test::signal* hold) {
    auto g = co_await m->lock();
    order->push_back(id);  // under the lock
    if (hold) co_await hold->wait();  // keep the lock until the holder has looked
}

aspen::task<bool> fifo_body(aspen::mutex* m, std::vector<int>* order, int n) {
    aspen_test::signal hold;
    auto g = co_await m->lock();
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) {
        hs.push_back(aspen::spawn(record_lock(m, order, i, i == 0 ? &hold : nullptr)));
        // Wait until waiter i is queued before starting i + 1.
        while (m->waiter_count() != static_cast<std::size_t>(i + 1)) co_await aspen::yield_now();
    }
    g.unlock();
    // Handed to waiter 0 (which keeps it until `hold`): a newcomer cannot take it.
    bool handed_off = m->is_locked() && !m->try_lock().has_value() && m->waiter_count() <= static_cast<std::size_t>(n - 1);
    hold.set();
    for (auto& h : hs) co_await h;
    co_return handed_off;
}

TEST_P(SyncMutexWorkers, FifoOrder) {
    aspen::runtime rt(workers(GetParam()));
    aspen::mutex m;
    std::vector<int> order;
    constexpr int n = 50;
    bool handed_off = false;
    within(120s, "mutex fifo", [&] { handed_off = rt.block_on(fifo_body(&m, &order, n)); });
    EXPECT_TRUE(handed_off);
    ASSERT_EQ(order.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) EXPECT_EQ(order[i], i);
    EXPECT_FALSE(m.is_locked());
}

aspen::task<void> lock_and_flag(aspen::mutex* m, std::atomic<int>* ran) {
    auto g = co_await m->lock();
    ran->fetch_add(1);
}

// A, B, C queue up; B is aborted while queued and must leave the queue;
// A and C then get the lock in order.
aspen::task<int> abort_queued_body(aspen::mutex* m, std::atomic<int>* ran) {
    auto g = co_await m->lock();
    auto a = aspen::spawn(lock_and_flag(m, &ran[0]));
    while (m->waiter_count() != 1) co_await aspen::yield_now();
    auto b = aspen::spawn(lock_and_flag(m, &ran[1]));
    while (m->waiter_count() != 2) co_await aspen::yield_now();
    auto c = aspen::spawn(lock_and_flag(m, &ran[2]));
    while (m->waiter_count() != 3) co_await aspen::yield_now();
    b.abort();
    while (m->waiter_count() != 2) co_await aspen::yield_now();
    g.unlock();
    co_await a;
    co_await c;
    int cancelled = 0;
    try {
        co_await b;
    } catch (const aspen::task_cancelled&) {
        ++cancelled;
    }
    co_return cancelled;
}

TEST_P(SyncMutexWorkers, AbortWhileQueuedLeavesQueue) {
    aspen::runtime rt(workers(GetParam()));
    aspen::mutex m;
    std::atomic<int> ran[3] = {0, 0, 0};
    int cancelled = 0;
    within(120s, "mutex abort queued", [&] { cancelled = rt.block_on(abort_queued_body(&m, ran)); });
    EXPECT_EQ(cancelled, 1);
    EXPECT_EQ(ran[0].load(), 1);
    EXPECT_EQ(ran[1].load(), 0);
    EXPECT_EQ(ran[2].load(), 1);
    EXPECT_FALSE(m.is_locked());
    EXPECT_EQ(m.waiter_count(), 0u);
}

// Random aborts among many lockers: the mutex must end free with an empty
// queue, and mutual exclusion must hold throughout.
aspen::task<void> abort_storm(shared_counter* s, int tasks, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<aspen::join_handle<void>> hs;
    for (int t = 0; t < tasks; ++t) hs.push_back(aspen::spawn(hammer(s, 50, 1 + t % 3)));
    for (int round = 0; round < tasks / 2; ++round) {
        hs[rng() % hs.size()].abort();
        co_await aspen::yield_now();
    }
    for (auto& h : hs) {
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
        }
    }
}

TEST_P(SyncMutexWorkers, RandomAbortsNeverLeakTheLock) {
    aspen::runtime rt(workers(GetParam()));
    for (unsigned seed = 1; seed <= 5; ++seed) {
        shared_counter s;
        within(120s, "mutex abort storm", [&] { rt.block_on(abort_storm(&s, 64, seed)); });
        EXPECT_EQ(s.violations.load(), 0);
        EXPECT_FALSE(s.m.is_locked());
        EXPECT_EQ(s.m.waiter_count(), 0u);
        EXPECT_TRUE(s.m.try_lock().has_value());
    }
}

INSTANTIATE_TEST_SUITE_P(Workers, SyncMutexWorkers, ::testing::Values(1, 2, 8));

// Deterministic on one thread: the holder hands the lock to A, then aborts
// A before A has run. A's awaitable is destroyed holding the lock and must
// pass it to C.
aspen::task<int> abort_after_handoff_body(aspen::mutex* m, std::atomic<int>* ran) {
    auto g = co_await m->lock();
    auto a = aspen::spawn(lock_and_flag(m, &ran[0]));
    while (m->waiter_count() != 1) co_await aspen::yield_now();
    auto c = aspen::spawn(lock_and_flag(m, &ran[1]));
    while (m->waiter_count() != 2) co_await aspen::yield_now();
    g.unlock();  // A now owns the lock but has not resumed
    a.abort();
    int cancelled = 0;
    try {
        co_await a;
    } catch (const aspen::task_cancelled&) {
        ++cancelled;
    }
    co_await c;
    co_return cancelled;
}

template <class Runtime>
void check_abort_after_handoff(Runtime& rt) {
    aspen::mutex m;
    std::atomic<int> ran[2] = {0, 0};
    int cancelled = 0;
    within(60s, "mutex abort after hand-off", [&] { cancelled = rt.block_on(abort_after_handoff_body(&m, ran)); });
    EXPECT_EQ(cancelled, 1);
    EXPECT_EQ(ran[0].load(), 0);
    EXPECT_EQ(ran[1].load(), 1);
    EXPECT_FALSE(m.is_locked());
    EXPECT_EQ(m.waiter_count(), 0u);
}

TEST(SyncMutex, AbortAfterHandoffPassesLockOnOneWorker) {
    aspen::runtime rt(workers(1));
    check_abort_after_handoff(rt);
}

TEST(SyncMutex, AbortAfterHandoffPassesLockOnCurrentThread) {
    aspen::current_thread_runtime rt;
    check_abort_after_handoff(rt);
}

TEST(SyncMutex, CountingOnCurrentThread) {
    aspen::current_thread_runtime rt;
    shared_counter s;
    long long total = 0;
    within(120s, "mutex counting current-thread", [&] { total = rt.block_on(run_hammer(&s, 8)); });
    EXPECT_EQ(total, 8LL * kIterations);
    EXPECT_EQ(s.violations.load(), 0);
}

// A guard moved to another task and dropped there unlocks.
aspen::task<void> drop_guard(aspen::mutex_guard g) {
    g.unlock();
    co_return;
}

aspen::task<bool> guard_moves_body(aspen::mutex* m) {
    auto g = co_await m->lock();
    co_await aspen::spawn(drop_guard(std::move(g)));
    auto g2 = co_await m->lock();
    co_return g2.owns_lock() && !g.owns_lock();
}

TEST(SyncMutex, GuardMovesAcrossTasks) {
    aspen::runtime rt(workers(2));
    aspen::mutex m;
    bool ok = false;
    within(60s, "guard moves", [&] { ok = rt.block_on(guard_moves_body(&m)); });
    EXPECT_TRUE(ok);
    EXPECT_FALSE(m.is_locked());
}

}  // namespace
