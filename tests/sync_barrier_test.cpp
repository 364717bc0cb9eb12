// aspen::barrier: rounds of n, one leader per round, nobody passes early,
// aborted waiters withdraw their arrival (rounds never trip short), and the
// coop budget makes an always-ready wait loop yield.
#include <aspen/aspen.hpp>
#include <aspen/sync/barrier.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::any_runtime;
using aspen_test::within;

#ifdef ASPEN_SANITIZED
constexpr int rounds = 50;
constexpr int storm_tasks = 400;
#else
constexpr int rounds = 300;
constexpr int storm_tasks = 4000;
#endif

constexpr std::size_t members = 4;

struct rounds_state {
    aspen::barrier b{members};
    std::atomic<int> arrivals[rounds] = {};
    std::atomic<int> leaders{0};
    std::atomic<int> early{0};  // passed a round before all had arrived
};

aspen::task<void> member(rounds_state* st) {
    for (int r = 0; r < rounds; ++r) {
        st->arrivals[r].fetch_add(1);
        aspen::barrier_wait_result res = co_await st->b.wait();
        if (st->arrivals[r].load() != static_cast<int>(members)) st->early.fetch_add(1);
        if (res.is_leader()) st->leaders.fetch_add(1);
        if (r % 3 == 0) co_await aspen::yield_now();
    }
}

aspen::task<void> run_members(rounds_state* st) {
    std::vector<aspen::join_handle<void>> hs;
    for (std::size_t i = 0; i < members; ++i) hs.push_back(aspen::spawn(member(st)));
    for (auto& h : hs) co_await h;
}

class SyncBarrier : public ::testing::TestWithParam<int> {};

TEST_P(SyncBarrier, RoundsHaveOneLeaderAndNobodyPassesEarly) {
    any_runtime rt(GetParam());
    auto st = std::make_unique<rounds_state>();
    within(120s, "barrier rounds", [&] { rt->block_on(run_members(st.get())); });
    EXPECT_EQ(st->leaders.load(), rounds);
    EXPECT_EQ(st->early.load(), 0);
    EXPECT_EQ(st->b.generation(), static_cast<std::uint64_t>(rounds));
    EXPECT_EQ(st->b.arrived(), 0u);
}

aspen::task<bool> waits_once(aspen::barrier* b, std::atomic<int>* done, std::atomic<int>* leaders) {
    aspen::barrier_wait_result r = co_await b->wait();
    done->fetch_add(1);
    if (r.is_leader()) leaders->fetch_add(1);
    co_return r.is_leader();
}

aspen::task<bool> cancelled(aspen::join_handle<bool> h) {
    try {
        co_await h;
    } catch (const aspen::task_cancelled&) {
        co_return true;
    }
    co_return false;
}

aspen::task<void> abort_withdraws_body(aspen::barrier* b, std::atomic<int>* done, std::atomic<int>* leaders,
                                       bool* aborted_cancelled) {
    auto a = aspen::spawn(waits_once(b, done, leaders));
    auto victim = aspen::spawn(waits_once(b, done, leaders));
    while (b->arrived() != 2) co_await aspen::yield_now();
    victim.abort();
    *aborted_cancelled = co_await cancelled(std::move(victim));
    // Had the victim's arrival stayed, this one would trip the round short.
    auto c = aspen::spawn(waits_once(b, done, leaders));
    while (b->arrived() != 2) co_await aspen::yield_now();
    auto d = aspen::spawn(waits_once(b, done, leaders));
    co_await a;
    co_await c;
    co_await d;
}

TEST_P(SyncBarrier, AbortedWaiterWithdrawsItsArrival) {
    any_runtime rt(GetParam());
    aspen::barrier b(3);
    std::atomic<int> done{0}, leaders{0};
    bool aborted_cancelled = false;
    within(60s, "barrier abort", [&] { rt->block_on(abort_withdraws_body(&b, &done, &leaders, &aborted_cancelled)); });
    EXPECT_TRUE(aborted_cancelled);
    EXPECT_EQ(done.load(), 3);
    EXPECT_EQ(leaders.load(), 1);
    EXPECT_EQ(b.generation(), 1u);
    EXPECT_EQ(b.arrived(), 0u);
}

struct storm_result {
    int completed = 0;
    int released_then_aborted = 0;
    int leaders = 0;
    std::uint64_t generation = 0;
    std::size_t left_arrived = 0;
};

// Lives in a waiter's frame: if the task is destroyed after its round
// tripped (woken, not resumed), it counted in that round without completing.
struct release_probe {
    aspen::barrier* b;
    std::uint64_t generation;
    std::atomic<int>* released_then_aborted;
    bool done = false;
    ~release_probe() {
        if (!done && b->generation() != generation) released_then_aborted->fetch_add(1);
    }
};

aspen::task<void> storm_waiter(aspen::barrier* b, std::atomic<int>* done, std::atomic<int>* leaders,
                               std::atomic<int>* released_then_aborted) {
    release_probe probe{b, b->generation(), released_then_aborted};
    aspen::barrier_wait_result r = co_await b->wait();
    probe.done = true;
    done->fetch_add(1);
    if (r.is_leader()) leaders->fetch_add(1);
}

aspen::task<bool> cancelled_void(aspen::join_handle<void> h) {
    try {
        co_await h;
    } catch (const aspen::task_cancelled&) {
        co_return true;
    }
    co_return false;
}

// Many one-shot waiters, a random third of them aborted at random moments
// (before their first poll, while waiting, or after their round tripped).
// Then the last open round is filled up. Each round needs n live members:
// completed + released-then-aborted == n * rounds (exact on the
// current-thread runtime; on several workers a round may trip between an
// abort and the probe's check, so the probe can only over-count there).
aspen::task<storm_result> storm_body(aspen::barrier* b, std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::atomic<int> done{0}, leaders{0}, released_then_aborted{0};
    std::vector<aspen::join_handle<void>> kept, aborted;
    for (int i = 0; i < storm_tasks; ++i) {
        auto h = aspen::spawn(storm_waiter(b, &done, &leaders, &released_then_aborted));
        if (rng() % 3 == 0) aborted.push_back(std::move(h));
        else kept.push_back(std::move(h));
        if (rng() % 4 == 0) co_await aspen::yield_now();
        if (!aborted.empty() && rng() % 2 == 0) aborted[rng() % aborted.size()].abort();
    }
    for (auto& h : aborted) h.abort();
    int aborted_completed = 0;
    for (auto& h : aborted) aborted_completed += co_await cancelled_void(std::move(h)) ? 0 : 1;
    // Settle: every kept task has either passed or waits in the open round.
    while (done.load() + static_cast<int>(b->arrived()) != static_cast<int>(kept.size()) + aborted_completed)
        co_await aspen::yield_now();
    std::vector<aspen::join_handle<void>> fillers;
    if (std::size_t open = b->arrived(); open != 0)
        for (std::size_t i = open; i < n; ++i)
            fillers.push_back(aspen::spawn(storm_waiter(b, &done, &leaders, &released_then_aborted)));
    for (auto& h : kept) co_await h;
    for (auto& h : fillers) co_await h;
    co_return storm_result{done.load(), released_then_aborted.load(), leaders.load(), b->generation(), b->arrived()};
}

TEST_P(SyncBarrier, RandomAbortsNeverTripARoundShort) {
    any_runtime rt(GetParam());
    constexpr std::size_t n = 5;
    aspen::barrier b(n);
    storm_result r;
    within(120s, "barrier abort storm", [&] { r = rt->block_on(storm_body(&b, n, 1234u + GetParam())); });
    EXPECT_GT(r.generation, 0u);
    auto accounted = static_cast<std::uint64_t>(r.completed + r.released_then_aborted);
    if (GetParam() == 0) EXPECT_EQ(accounted, n * r.generation);
    else EXPECT_GE(accounted, n * r.generation);
    EXPECT_LE(static_cast<std::uint64_t>(r.completed), n * r.generation);
    EXPECT_EQ(static_cast<std::uint64_t>(r.leaders), r.generation);
    EXPECT_EQ(r.left_arrived, 0u);
}

// n = 1: every wait completes at once and leads.
TEST(SyncBarrierSingle, ReadyWaitsSpendTheCoopBudget) {
    aspen::barrier b(1);
    int seen_at = aspen_test::coop_yield_point([&](int) -> aspen::task<bool> {
        aspen::barrier_wait_result r = co_await b.wait();
        co_return r.is_leader();
    });
    EXPECT_GE(seen_at, 0) << "-2: a wait did not lead; -1: the loop never yielded";
    EXPECT_LT(seen_at, 100);
    EXPECT_EQ(b.generation(), 100u);
}

TEST(SyncBarrierSingle, Misuse) {
    EXPECT_THROW(aspen::barrier(0), std::invalid_argument);
    aspen::barrier b(2);
    auto w = b.wait();
    EXPECT_THROW((void)w.await_ready(), std::logic_error);  // outside a task
}

INSTANTIATE_TEST_SUITE_P(Runtimes, SyncBarrier, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
