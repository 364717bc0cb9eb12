// The coop budget in the sync primitives and channels: an await that
// completes at once spends a unit; with none left the task yields before the
// operation takes effect, so a loop on an always-ready primitive cannot
// starve the other tasks of its worker, and an operation that yielded has
// taken nothing (cancel safety is unchanged).
#include <aspen/aspen.hpp>
#include <aspen/sync/all.hpp>

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;
using aspen_test::workers;

// ---- one always-ready operation per primitive --------------------------------
// Each op's once() awaits the primitive exactly once, and that await is
// always ready (nothing else touches the primitive).

struct semaphore_op {
    aspen::semaphore s{1};
    aspen::task<void> once() { aspen::semaphore_permit p = co_await s.acquire(); }
};

struct mutex_op {
    aspen::mutex m;
    aspen::task<void> once() { aspen::mutex_guard g = co_await m.lock(); }
};

struct mpsc_recv_op {
    std::pair<aspen::unbounded_sender<int>, aspen::mpsc_receiver<int>> ch = aspen::unbounded_channel<int>();
    aspen::task<void> once() {
        if (ch.first.send(7)) throw std::runtime_error("mpsc_recv_op: closed");
        std::optional<int> v = co_await ch.second.recv();
        if (v != 7) throw std::runtime_error("mpsc_recv_op: wrong message");
    }
};

struct mpsc_send_op {
    std::pair<aspen::mpsc_sender<int>, aspen::mpsc_receiver<int>> ch = aspen::mpsc_channel<int>(1);
    aspen::task<void> once() {
        // Named, not awaited inside the if: g++ 12 miscompiled that form
        // here (the coroutine hung or never ran; clang 19 was fine).
        std::optional<int> back = co_await ch.first.send(7);
        if (back) throw std::runtime_error("mpsc_send_op: closed");
        if (ch.second.try_recv() != 7) throw std::runtime_error("mpsc_send_op: wrong message");
    }
};

struct oneshot_op {
    aspen::task<void> once() {
        auto [tx, rx] = aspen::oneshot_channel<int>();
        if (tx.send(7)) throw std::runtime_error("oneshot_op: receiver gone");
        std::optional<int> v = co_await rx;
        if (v != 7) throw std::runtime_error("oneshot_op: wrong value");
    }
};

struct notify_op {
    aspen::notify n;
    aspen::task<void> once() {
        n.notify_one();  // stores the permit the await consumes
        co_await n.notified();
    }
};

struct event_op {
    aspen::event e{true};
    aspen::task<void> once() { co_await e.wait(); }
};

struct latch_op {
    aspen::latch l{0};
    aspen::task<void> once() { co_await l.wait(); }
};

// ---- no starvation -----------------------------------------------------------

constexpr std::uint32_t budget = 8;
constexpr int steps = 50;  // the other task's steps, one per poll
#ifdef ASPEN_SANITIZED
constexpr long max_ops = 100'000;
#else
constexpr long max_ops = 1'000'000;
#endif

struct busy_result {
    long ops = 0;
    int progress_seen = 0;  // the other task's steps when the loop stopped
};

// Loops on the always-ready op until the other task has made all its steps
// (or max_ops, which a loop that never yields reaches first, on one worker).
template <class Op>
aspen::task<busy_result> busy(Op& op, aspen::event& started, std::atomic<int>& progress) {
    started.set();
    busy_result r;
    while (r.ops < max_ops && progress.load(std::memory_order_relaxed) < steps) {
        co_await op.once();
        ++r.ops;
    }
    r.progress_seen = progress.load(std::memory_order_relaxed);
    co_return r;
}

aspen::task<void> other(aspen::event& started, std::atomic<int>& progress) {
    co_await started.wait();  // the loop is running: every step below competes with it
    for (int i = 0; i < steps; ++i) {
        progress.fetch_add(1, std::memory_order_relaxed);
        co_await aspen::yield_now();
    }
}

template <class Op>
aspen::task<busy_result> busy_and_other() {
    Op op;
    aspen::event started;
    std::atomic<int> progress{0};
    auto b = aspen::spawn(busy(op, started, progress));
    auto o = aspen::spawn(other(started, progress));
    busy_result r = co_await b;
    co_await o;
    co_return r;
}

template <class Op>
void expect_no_starvation(aspen::detail::runtime_base& rt) {
    busy_result r;
    within(120s, "a loop on an always-ready primitive vs. another task", [&] { r = rt.block_on(busy_and_other<Op>()); });
    // The other task made every step while the loop ran: the loop yielded.
    EXPECT_EQ(r.progress_seen, steps);
    EXPECT_LT(r.ops, max_ops);
    // And the loop did run between the steps (at most one budget per poll).
    EXPECT_GT(r.ops, 0);
    EXPECT_LE(r.ops, static_cast<long>(steps + 2) * budget);
}

template <class Op>
class SyncCoop : public ::testing::Test {};

using ops = ::testing::Types<semaphore_op, mutex_op, mpsc_recv_op, mpsc_send_op, oneshot_op, notify_op, event_op,
                             latch_op>;
TYPED_TEST_SUITE(SyncCoop, ops);

TYPED_TEST(SyncCoop, LoopDoesNotStarveAnotherTaskOnCurrentThreadRuntime) {
    aspen::config c;
    c.coop_budget = budget;
    aspen::current_thread_runtime rt(c);
    expect_no_starvation<TypeParam>(rt);
}

TYPED_TEST(SyncCoop, LoopDoesNotStarveAnotherTaskOnOneWorker) {
    aspen::config c = workers(1);
    c.coop_budget = budget;
    aspen::runtime rt(c);
    expect_no_starvation<TypeParam>(rt);
}

// Every await that completes at once spends exactly one unit: 1000 of them
// at 10 per poll take 100 polls (as consume_budget does).
TYPED_TEST(SyncCoop, EachReadyAwaitSpendsOneUnit) {
    aspen::config c = workers(1);
    c.coop_budget = 10;
    aspen::runtime rt(c);
    auto body = []() -> aspen::task<void> {
        TypeParam op;
        for (int i = 0; i < 1000; ++i) co_await op.once();
    };
    auto before = rt.metrics().total().polls;
    rt.block_on(body());
    auto polls = rt.metrics().total().polls - before;
    EXPECT_GE(polls, 100u);
    EXPECT_LE(polls, 102u);
}

// ---- exact counts with constant budget yields, on 1, 2 and 8 workers -------
// A budget of 2 makes almost every other await yield (and resume on
// whichever worker runs the task next, after steals): every message and
// every increment must still be counted exactly once.

#ifdef ASPEN_SANITIZED
constexpr int per_producer = 2'000;
#else
constexpr int per_producer = 20'000;
#endif
constexpr int producers = 4;

aspen::task<void> produce(aspen::mpsc_sender<std::int64_t> tx, int first) {
    for (int k = 0; k < per_producer; ++k) {
        std::optional<std::int64_t> back = co_await tx.send(first + k);
        if (back) throw std::runtime_error("produce: channel closed");
    }
}

aspen::task<void> add_under_lock(aspen::mutex& m, aspen::semaphore& s, std::int64_t& counter) {
    for (int k = 0; k < per_producer; ++k) {
        aspen::semaphore_permit p = co_await s.acquire();
        aspen::mutex_guard g = co_await m.lock();
        ++counter;
    }
}

aspen::task<std::pair<std::int64_t, std::int64_t>> traffic() {
    aspen::mutex m;
    aspen::semaphore s(2);
    std::int64_t counter = 0;
    std::vector<aspen::join_handle<void>> adders;
    for (int i = 0; i < producers; ++i) adders.push_back(aspen::spawn(add_under_lock(m, s, counter)));
    std::int64_t sum = 0;
    {
        auto [tx, rx] = aspen::mpsc_channel<std::int64_t>(4);
        std::vector<aspen::join_handle<void>> senders;
        for (int p = 0; p < producers; ++p) senders.push_back(aspen::spawn(produce(tx, p * per_producer)));
        tx = {};
        while (std::optional<std::int64_t> v = co_await rx.recv()) sum += *v;
        for (auto& h : senders) co_await h;
    }
    for (auto& h : adders) co_await h;
    co_return std::pair{sum, counter};
}

TEST(SyncCoopExact, ChannelAndLockTrafficWithATinyBudgetCountsExactly) {
    constexpr std::int64_t n = std::int64_t{producers} * per_producer;
    for (std::size_t w : {1u, 2u, 8u}) {
        aspen::config c = workers(w);
        c.coop_budget = 2;
        aspen::runtime rt(c);
        std::pair<std::int64_t, std::int64_t> r;
        within(120s, "channel and lock traffic with coop_budget 2", [&] { r = rt.block_on(traffic()); });
        EXPECT_EQ(r.first, n * (n - 1) / 2) << w << " workers";
        EXPECT_EQ(r.second, n) << w << " workers";
    }
}

// ---- cancel safety of an await that yielded for budget -----------------------
// The task spends its whole budget with consume_budget (which completes
// without yielding while a unit is left), then awaits a primitive that is
// ready: the await must yield without taking anything. The root checks
// that, then aborts the task.

constexpr std::uint32_t small_budget = 4;

aspen::config small_budget_config() {
    aspen::config c;
    c.coop_budget = small_budget;
    return c;
}

aspen::task<void> spend_budget(std::atomic<bool>& about_to_await) {
    for (std::uint32_t i = 0; i < small_budget; ++i) co_await aspen::consume_budget();
    about_to_await.store(true, std::memory_order_relaxed);
}

aspen::task<void> wait_for(std::atomic<bool>& flag) {
    while (!flag.load(std::memory_order_relaxed)) co_await aspen::yield_now();
}

aspen::task<void> expect_cancelled(aspen::join_handle<void>& h) {
    h.abort();
    bool cancelled = false;
    try {
        co_await h;
    } catch (const aspen::task_cancelled&) {
        cancelled = true;
    }
    EXPECT_TRUE(cancelled);
}

TEST(SyncCoopCancel, RecvThatYieldedForBudgetTookNoMessage) {
    aspen::current_thread_runtime rt(small_budget_config());
    auto [tx, rx] = aspen::unbounded_channel<int>();
    ASSERT_FALSE(tx.send(42));
    std::atomic<bool> about_to_await{false};
    bool received = false;
    auto receiver = [&]() -> aspen::task<void> {
        co_await spend_budget(about_to_await);
        std::optional<int> v = co_await rx.recv();
        received = v.has_value();
    };
    auto body = [&]() -> aspen::task<void> {
        auto h = aspen::spawn(receiver());
        co_await wait_for(about_to_await);
        EXPECT_FALSE(h.is_finished());
        EXPECT_EQ(rx.size(), 1u);  // the recv yielded before taking the message
        co_await expect_cancelled(h);
    };
    within(60s, "recv out of budget, then aborted", [&] { rt.block_on(body()); });
    EXPECT_FALSE(received);
    EXPECT_EQ(rx.try_recv(), 42);
}

TEST(SyncCoopCancel, LockThatYieldedForBudgetDoesNotHoldTheLock) {
    aspen::current_thread_runtime rt(small_budget_config());
    aspen::mutex m;
    std::atomic<bool> about_to_await{false};
    bool locked = false;
    auto locker = [&]() -> aspen::task<void> {
        co_await spend_budget(about_to_await);
        aspen::mutex_guard g = co_await m.lock();
        locked = true;
    };
    auto body = [&]() -> aspen::task<void> {
        auto h = aspen::spawn(locker());
        co_await wait_for(about_to_await);
        EXPECT_FALSE(h.is_finished());
        EXPECT_FALSE(m.is_locked());  // the lock() yielded before taking the lock
        EXPECT_EQ(m.waiter_count(), 0u);
        co_await expect_cancelled(h);
    };
    within(60s, "lock out of budget, then aborted", [&] { rt.block_on(body()); });
    EXPECT_FALSE(locked);
    EXPECT_FALSE(m.is_locked());
    EXPECT_TRUE(m.try_lock().has_value());
}

TEST(SyncCoopCancel, AcquireThatYieldedForBudgetHoldsNoPermit) {
    aspen::current_thread_runtime rt(small_budget_config());
    aspen::semaphore s(2);
    std::atomic<bool> about_to_await{false};
    bool acquired = false;
    auto acquirer = [&]() -> aspen::task<void> {
        co_await spend_budget(about_to_await);
        aspen::semaphore_permit p = co_await s.acquire(2);
        acquired = true;
    };
    auto body = [&]() -> aspen::task<void> {
        auto h = aspen::spawn(acquirer());
        co_await wait_for(about_to_await);
        EXPECT_FALSE(h.is_finished());
        EXPECT_EQ(s.available(), 2u);  // the acquire yielded before taking permits
        co_await expect_cancelled(h);
    };
    within(60s, "acquire out of budget, then aborted", [&] { rt.block_on(body()); });
    EXPECT_FALSE(acquired);
    EXPECT_EQ(s.available(), 2u);
}

// The await that yielded completes in the task's next poll, with the value.
TEST(SyncCoopCancel, RecvThatYieldedForBudgetCompletesInTheNextPoll) {
    aspen::current_thread_runtime rt(small_budget_config());
    auto [tx, rx] = aspen::unbounded_channel<int>();
    ASSERT_FALSE(tx.send(42));
    std::atomic<bool> about_to_await{false};
    auto receiver = [&]() -> aspen::task<std::optional<int>> {
        co_await spend_budget(about_to_await);
        co_return co_await rx.recv();
    };
    auto body = [&]() -> aspen::task<std::optional<int>> {
        auto h = aspen::spawn(receiver());
        co_await wait_for(about_to_await);
        EXPECT_EQ(rx.size(), 1u);
        co_return co_await h;
    };
    std::optional<int> v;
    within(60s, "recv out of budget, then resumed", [&] { v = rt.block_on(body()); });
    EXPECT_EQ(v, 42);
    EXPECT_EQ(rx.size(), 0u);
}

}  // namespace
