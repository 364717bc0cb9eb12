// aspen::semaphore: permits, RAII, FIFO with head-of-line blocking, and
// cancel safety (permits are conserved under random aborts).
#include <aspen/aspen.hpp>
#include <aspen/sync/semaphore.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;

using aspen_test::workers;

TEST(SyncSemaphore, TryAcquireReleaseAndPermitRaii) {
    aspen::semaphore s(3);
    EXPECT_EQ(s.available(), 3u);
    {
        auto p = s.try_acquire(2);
        ASSERT_TRUE(p.has_value());
        EXPECT_EQ(p->count(), 2u);
        EXPECT_EQ(s.available(), 1u);
        EXPECT_FALSE(s.try_acquire(2).has_value());
        auto q = s.try_acquire();
        ASSERT_TRUE(q.has_value());
        EXPECT_EQ(s.available(), 0u);
        aspen::semaphore_permit moved = std::move(*q);
        EXPECT_EQ(q->count(), 0u);
        EXPECT_EQ(moved.count(), 1u);
        moved.release();
        EXPECT_EQ(s.available(), 1u);
    }
    EXPECT_EQ(s.available(), 3u);
    auto zero = s.try_acquire(0);
    ASSERT_TRUE(zero.has_value());
    EXPECT_EQ(zero->count(), 0u);
    {
        auto p = s.try_acquire(3);
        ASSERT_TRUE(p.has_value());
        p->forget();
    }
    EXPECT_EQ(s.available(), 0u);
    s.release(5);
    EXPECT_EQ(s.available(), 5u);
}

aspen::task<void> acquire_and_hold(aspen::semaphore* s, std::size_t k, std::atomic<int>* got, aspen_test::signal* hold) {
    auto p = co_await s->acquire(k);
    got->fetch_add(1);
    if (hold) co_await hold->wait();
}

struct hol_result {
    bool small_blocked_while_permits_free = false;
    bool small_waits_after_big_granted = false;
    std::size_t final_available = 0;
};

// 2 permits free, a request for 3 at the head: a later request for 1 must
// queue behind it; once the big one is served and done, the small one runs.
aspen::task<hol_result> head_of_line_body(aspen::semaphore* s) {
    hol_result r;
    std::atomic<int> got_big{0}, got_small{0};
    aspen_test::signal hold_big;
    auto big = aspen::spawn(acquire_and_hold(s, 3, &got_big, &hold_big));
    while (s->waiter_count() != 1) co_await aspen::yield_now();
    auto small = aspen::spawn(acquire_and_hold(s, 1, &got_small, nullptr));
    while (s->waiter_count() != 2) co_await aspen::yield_now();
    r.small_blocked_while_permits_free = s->available() == 2 && !s->try_acquire(1).has_value() && got_small == 0;
    s->release(1);  // 3 free: the big one is served, the small one still waits
    while (got_big.load() == 0) co_await aspen::yield_now();
    r.small_waits_after_big_granted = got_small.load() == 0 && s->waiter_count() == 1 && s->available() == 0;
    hold_big.set();
    co_await big;
    co_await small;
    r.final_available = s->available();
    co_return r;
}

class SyncSemaphoreWorkers : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SyncSemaphoreWorkers, LargeRequestAtHeadBlocksSmallerOnes) {
    aspen::runtime rt(workers(GetParam()));
    aspen::semaphore s(2);
    hol_result r;
    within(60s, "semaphore head of line", [&] { r = rt.block_on(head_of_line_body(&s)); });
    EXPECT_TRUE(r.small_blocked_while_permits_free);
    EXPECT_TRUE(r.small_waits_after_big_granted);
    EXPECT_EQ(r.final_available, 3u);
}

// The blocking head is aborted: the waiter behind it fits and must be served.
aspen::task<bool> cancel_head_body(aspen::semaphore* s) {
    std::atomic<int> got_big{0}, got_small{0};
    auto big = aspen::spawn(acquire_and_hold(s, 5, &got_big, nullptr));
    while (s->waiter_count() != 1) co_await aspen::yield_now();
    auto small = aspen::spawn(acquire_and_hold(s, 1, &got_small, nullptr));
    while (s->waiter_count() != 2) co_await aspen::yield_now();
    big.abort();
    co_await small;
    bool cancelled = false;
    try {
        co_await big;
    } catch (const aspen::task_cancelled&) {
        cancelled = true;
    }
    co_return cancelled && got_big.load() == 0 && got_small.load() == 1;
}

TEST_P(SyncSemaphoreWorkers, AbortedHeadUnblocksQueue) {
    aspen::runtime rt(workers(GetParam()));
    aspen::semaphore s(1);
    bool ok = false;
    within(60s, "semaphore cancel head", [&] { ok = rt.block_on(cancel_head_body(&s)); });
    EXPECT_TRUE(ok);
    EXPECT_EQ(s.available(), 1u);
    EXPECT_EQ(s.waiter_count(), 0u);
}

struct storm_state {
    explicit storm_state(std::size_t n) : s(n) {}
    aspen::semaphore s;
    std::atomic<long> in_use{0};
    std::atomic<long> max_in_use{0};
    std::atomic<int> acquired{0};
};

aspen::task<void> storm_worker(storm_state* st, std::size_t k, int rounds, int yields) {
    for (int r = 0; r < rounds; ++r) {
        auto p = co_await st->s.acquire(k);
        struct use {
            storm_state* st;
            long k;
            use(storm_state* s, long n) : st(s), k(n) {
                long now = st->in_use.fetch_add(k) + k;
                long m = st->max_in_use.load();
                while (now > m && !st->max_in_use.compare_exchange_weak(m, now)) {
                }
            }
            void leave() { st->in_use.fetch_sub(std::exchange(k, 0)); }
            ~use() { leave(); }
        } u(st, static_cast<long>(k));
        st->acquired.fetch_add(1);
        for (int y = 0; y < yields; ++y) co_await aspen::yield_now();
        if (r % 3 == 2) {
            // Give back by hand instead of by RAII.
            std::size_t n = p.count();
            u.leave();  // before the permits can go to someone else
            p.forget();
            st->s.release(n);
        }
    }
}

struct storm_result {
    int cancelled = 0;
};

aspen::task<storm_result> storm_body(storm_state* st, int tasks, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<aspen::join_handle<void>> hs;
    for (int t = 0; t < tasks; ++t)
        hs.push_back(aspen::spawn(storm_worker(st, 1 + rng() % 4, 1 + static_cast<int>(rng() % 4), static_cast<int>(rng() % 3))));
    for (int i = 0; i < tasks / 2; ++i) {
        hs[rng() % hs.size()].abort();
        if (rng() % 2) co_await aspen::yield_now();
    }
    storm_result r;
    for (auto& h : hs) {
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            ++r.cancelled;
        }
    }
    co_return r;
}

TEST_P(SyncSemaphoreWorkers, PermitsConservedUnderRandomAborts) {
    aspen::runtime rt(workers(GetParam()));
    constexpr std::size_t initial = 6;
    int cancelled_total = 0;
    for (unsigned seed = 1; seed <= 10; ++seed) {
        storm_state st(initial);
        storm_result r;
        within(120s, "semaphore abort storm", [&] { r = rt.block_on(storm_body(&st, 300, seed)); });
        cancelled_total += r.cancelled;
        EXPECT_EQ(st.s.available(), initial) << "seed " << seed;
        EXPECT_EQ(st.s.waiter_count(), 0u);
        EXPECT_EQ(st.in_use.load(), 0);
        EXPECT_LE(st.max_in_use.load(), static_cast<long>(initial));
        EXPECT_GT(st.acquired.load(), 0);
    }
    EXPECT_GT(cancelled_total, 0);  // the aborts did hit running or waiting tasks
}

INSTANTIATE_TEST_SUITE_P(Workers, SyncSemaphoreWorkers, ::testing::Values(1, 2, 8));

// Deterministic on one thread: permits are assigned to A, A is aborted
// before it resumes; they must go to B, then back to the semaphore.
aspen::task<bool> abort_after_grant_body(aspen::semaphore* s) {
    std::atomic<int> got_a{0}, got_b{0};
    auto a = aspen::spawn(acquire_and_hold(s, 2, &got_a, nullptr));
    while (s->waiter_count() != 1) co_await aspen::yield_now();
    auto b = aspen::spawn(acquire_and_hold(s, 2, &got_b, nullptr));
    while (s->waiter_count() != 2) co_await aspen::yield_now();
    s->release(2);  // A is granted, not yet resumed
    bool granted_to_a = s->available() == 0 && s->waiter_count() == 1;
    a.abort();
    bool cancelled = false;
    try {
        co_await a;
    } catch (const aspen::task_cancelled&) {
        cancelled = true;
    }
    co_await b;
    co_return granted_to_a && cancelled && got_a.load() == 0 && got_b.load() == 1;
}

template <class Runtime>
void check_abort_after_grant(Runtime& rt) {
    aspen::semaphore s(0);
    bool ok = false;
    within(60s, "semaphore abort after grant", [&] { ok = rt.block_on(abort_after_grant_body(&s)); });
    EXPECT_TRUE(ok);
    EXPECT_EQ(s.available(), 2u);
    EXPECT_EQ(s.waiter_count(), 0u);
}

TEST(SyncSemaphore, AbortAfterGrantPassesPermitsOnOneWorker) {
    aspen::runtime rt(workers(1));
    check_abort_after_grant(rt);
}

TEST(SyncSemaphore, AbortAfterGrantPassesPermitsOnCurrentThread) {
    aspen::current_thread_runtime rt;
    check_abort_after_grant(rt);
}

// A semaphore of 1 is a lock: counting under contention stays exact.
aspen::task<void> count_under(aspen::semaphore* s, long* value, int n) {
    for (int i = 0; i < n; ++i) {
        auto p = co_await s->acquire();
        long v = *value;
        if (i % 5 == 0) co_await aspen::yield_now();
        *value = v + 1;
    }
}

aspen::task<long> count_body(aspen::semaphore* s, long* value) {
    std::vector<aspen::join_handle<void>> hs;
    for (int t = 0; t < 16; ++t) hs.push_back(aspen::spawn(count_under(s, value, 500)));
    for (auto& h : hs) co_await h;
    co_return *value;
}

TEST(SyncSemaphore, BinarySemaphoreExcludes) {
    aspen::runtime rt(workers(4));
    aspen::semaphore s(1);
    long value = 0;
    long total = 0;
    within(120s, "binary semaphore", [&] { total = rt.block_on(count_body(&s, &value)); });
    EXPECT_EQ(total, 16 * 500);
    EXPECT_EQ(s.available(), 1u);
}

// ---- close ---------------------------------------------------------------------

class SyncSemaphoreClose : public ::testing::TestWithParam<int> {};

// 1 when the acquire got its permits, 0 when it threw semaphore_closed.
aspen::task<int> acquire_or_closed(aspen::semaphore* s, std::size_t k, std::atomic<int>* queued) {
    try {
        queued->fetch_add(1);
        auto p = co_await s->acquire(k);
        co_return 1;
    } catch (const aspen::semaphore_closed&) {
        co_return 0;
    }
}

// Waiters queued behind a held permit are all woken by close() and throw;
// the permit granted before stays valid; later acquires throw at once.
aspen::task<int> close_wakes_waiters_body(aspen::semaphore* s) {
    aspen::semaphore_permit held = co_await s->acquire(1);
    std::atomic<int> queued{0};
    std::vector<aspen::join_handle<int>> hs;
    for (int i = 0; i < 20; ++i) hs.push_back(aspen::spawn(acquire_or_closed(s, 1 + i % 2, &queued)));
    while (s->waiter_count() != 20) co_await aspen::yield_now();
    s->close();
    s->close();  // twice: harmless
    int granted = 0;
    for (auto& h : hs) granted += co_await h;
    if (granted != 0 || s->waiter_count() != 0) co_return 1;
    held.release();  // counted, but nobody can take it any more
    if (s->available() != 1 || s->try_acquire(1).has_value() || s->try_acquire(0).has_value()) co_return 2;
    int late = co_await acquire_or_closed(s, 0, &queued);
    late += co_await acquire_or_closed(s, 1, &queued);
    co_return late == 0 && s->is_closed() ? 0 : 3;
}

TEST_P(SyncSemaphoreClose, CloseWakesEveryWaiterAndRefusesLaterAcquires) {
    aspen::semaphore s(1);
    EXPECT_FALSE(s.is_closed());
    EXPECT_EQ(aspen_test::run_on(GetParam(), close_wakes_waiters_body(&s), "semaphore close"), 0);
}

// close() from a plain thread while tasks acquire and release: each acquire
// either got its permits (and gave them back) or threw; none is left
// waiting, and the permits granted before the close all come back.
aspen::task<int> close_race_body(aspen::semaphore* s, int tasks, std::atomic<int>* got) {
    std::atomic<int> queued{0};
    std::vector<aspen::join_handle<int>> hs;
    for (int i = 0; i < tasks; ++i) hs.push_back(aspen::spawn(acquire_or_closed(s, 1 + i % 3, &queued)));
    std::thread closer([s, &queued, tasks] {
        while (queued.load() < tasks / 2) std::this_thread::yield();
        s->close();
    });
    int closed = 0;
    for (auto& h : hs) {
        int r = co_await h;
        got->fetch_add(r);
        closed += 1 - r;
    }
    closer.join();
    co_return closed;
}

TEST_P(SyncSemaphoreClose, CloseRacingWithAcquiresLosesNoPermitAndLeavesNoWaiter) {
#ifdef ASPEN_SANITIZED
    constexpr int tasks = 400;
#else
    constexpr int tasks = 4000;
#endif
    aspen::semaphore s(3);
    std::atomic<int> got{0};
    int closed = aspen_test::run_on(GetParam(), close_race_body(&s, tasks, &got), "semaphore close race");
    EXPECT_EQ(got.load() + closed, tasks);
    EXPECT_EQ(s.waiter_count(), 0u);
    EXPECT_EQ(s.available(), 3u);
    EXPECT_TRUE(s.is_closed());
}

// In a select the closed acquire completes (by throwing), so the select
// does not wait on the other branch.
aspen::task<int> select_closed_body(aspen::semaphore* s) {
    aspen::notify never;
    s->close();
    try {
        (void)co_await aspen::select(s->acquire(1), never.notified());
    } catch (const aspen::semaphore_closed&) {
        co_return 0;
    }
    co_return 1;
}

TEST_P(SyncSemaphoreClose, AClosedAcquireWinsASelectByThrowing) {
    aspen::semaphore s(0);
    EXPECT_EQ(aspen_test::run_on(GetParam(), select_closed_body(&s), "select closed"), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, SyncSemaphoreClose, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
