// aspen::shared_mutex: readers share, writers are alone, a queued writer
// holds back later readers, and random aborts lose no permit.
#include <aspen/aspen.hpp>
#include <aspen/sync/shared_mutex.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <random>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::any_runtime;
using aspen_test::within;

#ifdef ASPEN_SANITIZED
constexpr int storm_tasks = 48;
constexpr int storm_rounds = 40;
#else
constexpr int storm_tasks = 64;
constexpr int storm_rounds = 300;
#endif

TEST(SyncSharedMutex, TryLockRules) {
    aspen::shared_mutex m;
    {
        auto r1 = m.try_lock_shared();
        auto r2 = m.try_lock_shared();
        ASSERT_TRUE(r1 && r2);
        EXPECT_EQ(m.readers(), 2u);
        EXPECT_FALSE(m.try_lock().has_value());
        r1->unlock();
        EXPECT_FALSE(r1->owns_lock());
        EXPECT_EQ(m.readers(), 1u);
    }
    {
        auto w = m.try_lock();
        ASSERT_TRUE(w.has_value());
        EXPECT_TRUE(w->owns_lock());
        EXPECT_TRUE(m.is_write_locked());
        EXPECT_EQ(m.readers(), 0u);
        EXPECT_FALSE(m.try_lock_shared().has_value());
        EXPECT_FALSE(m.try_lock().has_value());
        aspen::shared_mutex_write_guard moved = std::move(*w);
        EXPECT_TRUE(m.is_write_locked());
    }
    EXPECT_FALSE(m.is_write_locked());
    EXPECT_TRUE(m.try_lock().has_value());
}

aspen::task<void> hold_shared(aspen::shared_mutex* m, std::atomic<int>* got, aspen_test::signal* hold) {
    auto r = co_await m->lock_shared();
    got->fetch_add(1);
    if (hold) co_await hold->wait();
}

aspen::task<void> hold_exclusive(aspen::shared_mutex* m, std::atomic<int>* got, aspen_test::signal* hold) {
    auto w = co_await m->lock();
    got->fetch_add(1);
    if (hold) co_await hold->wait();
}

struct fairness_result {
    bool writer_waited_for_reader = false;
    bool late_reader_queued_behind_writer = false;
    bool late_reader_ran_after_writer = false;
};

// A reader holds the lock; a writer queues; a later reader must queue behind
// the writer (it would fit beside the first reader, but that would let
// readers starve the writer).
aspen::task<fairness_result> fairness_body(aspen::shared_mutex* m) {
    fairness_result r;
    std::atomic<int> first{0}, writer{0}, late{0};
    aspen_test::signal hold_first, hold_writer;
    auto h1 = aspen::spawn(hold_shared(m, &first, &hold_first));
    while (first.load() == 0) co_await aspen::yield_now();
    auto hw = aspen::spawn(hold_exclusive(m, &writer, &hold_writer));
    while (m->waiter_count() != 1) co_await aspen::yield_now();
    auto h2 = aspen::spawn(hold_shared(m, &late, nullptr));
    while (m->waiter_count() != 2) co_await aspen::yield_now();
    r.writer_waited_for_reader = writer.load() == 0;
    r.late_reader_queued_behind_writer = late.load() == 0 && !m->try_lock_shared().has_value();
    hold_first.set();
    co_await h1;
    while (writer.load() == 0) co_await aspen::yield_now();
    r.late_reader_ran_after_writer = late.load() == 0;  // the writer holds it now
    hold_writer.set();
    co_await hw;
    co_await h2;
    co_return r;
}

class SyncSharedMutex : public ::testing::TestWithParam<int> {};

TEST_P(SyncSharedMutex, QueuedWriterHoldsBackLaterReaders) {
    any_runtime rt(GetParam());
    aspen::shared_mutex m;
    fairness_result r;
    within(60s, "shared_mutex fairness", [&] { r = rt->block_on(fairness_body(&m)); });
    EXPECT_TRUE(r.writer_waited_for_reader);
    EXPECT_TRUE(r.late_reader_queued_behind_writer);
    EXPECT_TRUE(r.late_reader_ran_after_writer);
    EXPECT_FALSE(m.is_write_locked());
    EXPECT_EQ(m.readers(), 0u);
}

struct storm_state {
    aspen::shared_mutex m;
    std::atomic<int> readers_in{0};
    std::atomic<int> writers_in{0};
    std::atomic<int> violations{0};
    std::atomic<long> writes{0};
    std::atomic<long> reads{0};
    long guarded_value = 0;  // written only under the write lock
};

// Counts a task inside the lock; leaves on destruction, so a task aborted
// inside its critical section leaves too (declared after the guard, it goes
// before the guard unlocks).
struct inside {
    std::atomic<int>* n;
    explicit inside(std::atomic<int>* c) : n(c) { n->fetch_add(1); }
    ~inside() { n->fetch_sub(1); }
};

// Each task alternates reads and writes; some are aborted at random points
// (while waiting, while holding, between rounds).
aspen::task<void> storm_task(storm_state* st, unsigned seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < storm_rounds; ++i) {
        if (rng() % 4 == 0) {
            auto w = co_await st->m.lock();
            inside in(&st->writers_in);
            if (st->writers_in.load() != 1 || st->readers_in.load() != 0) st->violations.fetch_add(1);
            ++st->guarded_value;
            if (rng() % 2) co_await aspen::yield_now();
            st->writes.fetch_add(1);
        } else {
            auto r = co_await st->m.lock_shared();
            inside in(&st->readers_in);
            if (st->writers_in.load() != 0) st->violations.fetch_add(1);
            if (rng() % 2) co_await aspen::yield_now();
            st->reads.fetch_add(1);
        }
    }
}

struct storm_result {
    long writes = 0;
    long guarded = 0;
    int aborted = 0;
};

aspen::task<storm_result> storm_body(storm_state* st, bool with_aborts) {
    std::mt19937 rng(7);
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < storm_tasks; ++i) hs.push_back(aspen::spawn(storm_task(st, 100 + i)));
    storm_result r;
    if (with_aborts) {
        for (int k = 0; k < storm_tasks / 2; ++k) {
            co_await aspen::yield_now();
            hs[rng() % hs.size()].abort();
        }
    }
    for (auto& h : hs) {
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            ++r.aborted;
        }
    }
    r.writes = st->writes.load();
    r.guarded = st->guarded_value;
    co_return r;
}

TEST_P(SyncSharedMutex, ExclusionHoldsUnderContention) {
    any_runtime rt(GetParam());
    auto st = std::make_unique<storm_state>();
    storm_result r;
    within(120s, "shared_mutex storm", [&] { r = rt->block_on(storm_body(st.get(), false)); });
    EXPECT_EQ(st->violations.load(), 0);
    EXPECT_EQ(st->reads.load() + st->writes.load(), static_cast<long>(storm_tasks) * storm_rounds);
    EXPECT_EQ(r.guarded, r.writes);
}

TEST_P(SyncSharedMutex, RandomAbortsLoseNoPermit) {
    any_runtime rt(GetParam());
    auto st = std::make_unique<storm_state>();
    storm_result r;
    within(120s, "shared_mutex abort storm", [&] { r = rt->block_on(storm_body(st.get(), true)); });
    EXPECT_EQ(st->violations.load(), 0);
    // An aborted writer may have incremented guarded_value without counting
    // the write (aborted inside its critical section), never the reverse.
    EXPECT_GE(r.guarded, r.writes);
    EXPECT_LE(r.guarded - r.writes, r.aborted);
    // Conservation: every permit is back, nobody is queued.
    EXPECT_EQ(st->m.waiter_count(), 0u);
    EXPECT_EQ(st->m.readers(), 0u);
    EXPECT_FALSE(st->m.is_write_locked());
    auto w = st->m.try_lock();
    EXPECT_TRUE(w.has_value());
}

INSTANTIATE_TEST_SUITE_P(Runtimes, SyncSharedMutex, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
