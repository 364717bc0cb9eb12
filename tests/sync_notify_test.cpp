// aspen::notify: permit semantics (notify before wait is not lost), FIFO
// notify_one, notify_all wakes current waiters only, cancel safety
// (forwarding a notification picked by an aborted waiter), and a
// foreign-thread flag-and-notify stress with a watchdog.
#include <aspen/aspen.hpp>
#include <aspen/sync/notify.hpp>

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;

using aspen_test::workers;

aspen::task<void> wait_once(aspen::notify* n, std::atomic<int>* done) {
    co_await n->notified();
    done->fetch_add(1);
}

aspen::task<void> wait_and_record(aspen::notify* n, std::mutex* m, std::vector<int>* order, int id) {
    co_await n->notified();
    std::lock_guard g(*m);
    order->push_back(id);
}

class SyncNotifyWorkers : public ::testing::TestWithParam<std::size_t> {};

aspen::task<int> permit_body(aspen::notify* n) {
    co_await n->notified();  // the permit stored before the task started
    int steps = 1;
    // Two notify_one() with nobody waiting store one permit, not two.
    n->notify_one();
    n->notify_one();
    co_await n->notified();
    ++steps;
    std::atomic<int> done{0};
    auto h = aspen::spawn(wait_once(n, &done));
    while (n->waiter_count() != 1) co_await aspen::yield_now();
    if (done.load() == 0) ++steps;  // the second one waits
    n->notify_one();
    co_await h;
    if (done.load() == 1) ++steps;
    co_return steps;
}

TEST_P(SyncNotifyWorkers, NotifyBeforeWaitIsNotLostAndPermitsDoNotAccumulate) {
    aspen::runtime rt(workers(GetParam()));
    aspen::notify n;
    n.notify_one();  // before anyone waits, from outside the runtime
    int steps = 0;
    within(60s, "notify permit", [&] { steps = rt.block_on(permit_body(&n)); });
    EXPECT_EQ(steps, 4);
}

aspen::task<std::vector<int>> fifo_body(aspen::notify* n, int count) {
    std::mutex m;
    std::vector<int> order;
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < count; ++i) {
        hs.push_back(aspen::spawn(wait_and_record(n, &m, &order, i)));
        while (n->waiter_count() != static_cast<std::size_t>(i + 1)) co_await aspen::yield_now();
    }
    for (int i = 0; i < count; ++i) {
        n->notify_one();
        for (;;) {  // wait until that one has recorded itself
            {
                std::lock_guard g(m);
                if (order.size() == static_cast<std::size_t>(i + 1)) break;
            }
            co_await aspen::yield_now();
        }
    }
    for (auto& h : hs) co_await h;
    co_return order;
}

TEST_P(SyncNotifyWorkers, NotifyOneWakesLongestWaiterFirst) {
    aspen::runtime rt(workers(GetParam()));
    aspen::notify n;
    constexpr int count = 20;
    std::vector<int> order;
    within(60s, "notify fifo", [&] { order = rt.block_on(fifo_body(&n, count)); });
    ASSERT_EQ(order.size(), static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) EXPECT_EQ(order[i], i);
}

struct all_result {
    int woken = 0;
    bool later_waiter_waits = false;
    bool unpolled_completed = false;
};

aspen::task<all_result> notify_all_body(aspen::notify* n, int count) {
    all_result r;
    std::atomic<int> done{0};
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < count; ++i) hs.push_back(aspen::spawn(wait_once(n, &done)));
    while (n->waiter_count() != static_cast<std::size_t>(count)) co_await aspen::yield_now();
    auto created_before = n->notified();  // created, not yet polled
    n->notify_all();
    for (auto& h : hs) co_await h;
    r.woken = done.load();
    co_await created_before;  // completes: it was created before notify_all
    r.unpolled_completed = true;
    // No permit was stored: a new waiter waits.
    auto later = aspen::spawn(wait_once(n, &done));
    while (n->waiter_count() != 1) co_await aspen::yield_now();
    r.later_waiter_waits = done.load() == count;
    n->notify_one();
    co_await later;
    co_return r;
}

TEST_P(SyncNotifyWorkers, NotifyAllWakesCurrentWaitersOnly) {
    aspen::runtime rt(workers(GetParam()));
    aspen::notify n;
    constexpr int count = 100;  // more than one wake batch
    all_result r;
    within(60s, "notify all", [&] { r = rt.block_on(notify_all_body(&n, count)); });
    EXPECT_EQ(r.woken, count);
    EXPECT_TRUE(r.unpolled_completed);
    EXPECT_TRUE(r.later_waiter_waits);
    EXPECT_EQ(n.waiter_count(), 0u);
}

aspen::task<bool> abort_queued_body(aspen::notify* n) {
    std::atomic<int> a_done{0}, b_done{0};
    auto a = aspen::spawn(wait_once(n, &a_done));
    while (n->waiter_count() != 1) co_await aspen::yield_now();
    auto b = aspen::spawn(wait_once(n, &b_done));
    while (n->waiter_count() != 2) co_await aspen::yield_now();
    a.abort();
    while (n->waiter_count() != 1) co_await aspen::yield_now();
    n->notify_one();  // must reach B, not the aborted A
    co_await b;
    bool cancelled = false;
    try {
        co_await a;
    } catch (const aspen::task_cancelled&) {
        cancelled = true;
    }
    co_return cancelled && a_done.load() == 0 && b_done.load() == 1;
}

TEST_P(SyncNotifyWorkers, AbortedWaiterLeavesQueue) {
    aspen::runtime rt(workers(GetParam()));
    aspen::notify n;
    bool ok = false;
    within(60s, "notify abort queued", [&] { ok = rt.block_on(abort_queued_body(&n)); });
    EXPECT_TRUE(ok);
    EXPECT_EQ(n.waiter_count(), 0u);
}

// Flag-and-notify from foreign threads: the consumer checks the counter,
// then waits; a notify_one between the check and the wait must not be lost.
aspen::task<long> consume_until(aspen::notify* n, std::atomic<long>* produced, long target) {
    long rounds = 0;
    while (produced->load(std::memory_order_acquire) < target) {
        co_await n->notified();
        ++rounds;
    }
    co_return rounds;
}

TEST_P(SyncNotifyWorkers, ForeignThreadNotifiesAreNotLost) {
    aspen::runtime rt(workers(GetParam()));
#ifdef ASPEN_SANITIZED
    constexpr long per_thread = 2000;
#else
    constexpr long per_thread = 50000;
#endif
    constexpr int threads = 3;
    for (int round = 0; round < 3; ++round) {
        aspen::notify n;
        std::atomic<long> produced{0};
        auto consumer = rt.spawn(consume_until(&n, &produced, per_thread * threads));
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&] {
                for (long i = 0; i < per_thread; ++i) {
                    produced.fetch_add(1, std::memory_order_release);
                    n.notify_one();
                    if (i % 64 == 0) std::this_thread::yield();
                }
            });
        for (auto& t : ts) t.join();
        long rounds = 0;
        within(60s, "notify foreign threads", [&] {
            rounds = rt.block_on([](aspen::join_handle<long> h) -> aspen::task<long> { co_return co_await h; }(std::move(consumer)));
        });
        EXPECT_GE(rounds, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Workers, SyncNotifyWorkers, ::testing::Values(1, 2, 8));

// Deterministic on one thread: notify_one picks A, A is aborted before it
// resumes: the notification goes to B. With nobody left, it becomes the permit.
aspen::task<bool> forward_body(aspen::notify* n) {
    std::atomic<int> a_done{0}, b_done{0}, c_done{0};
    auto a = aspen::spawn(wait_once(n, &a_done));
    while (n->waiter_count() != 1) co_await aspen::yield_now();
    auto b = aspen::spawn(wait_once(n, &b_done));
    while (n->waiter_count() != 2) co_await aspen::yield_now();
    n->notify_one();  // picks A
    a.abort();        // A never resumes: forwarded to B
    co_await b;
    bool forwarded = b_done.load() == 1 && a_done.load() == 0;

    auto c = aspen::spawn(wait_once(n, &c_done));
    while (n->waiter_count() != 1) co_await aspen::yield_now();
    n->notify_one();  // picks C
    c.abort();        // nobody else waits: it must become the permit
    bool c_cancelled = false;
    try {
        co_await c;
    } catch (const aspen::task_cancelled&) {
        c_cancelled = true;
    }
    co_await n->notified();  // consumes the forwarded permit
    try {
        co_await a;
    } catch (const aspen::task_cancelled&) {
    }
    co_return forwarded && c_cancelled && c_done.load() == 0;
}

TEST(SyncNotify, AbortAfterNotifyOneForwardsOnOneWorker) {
    aspen::runtime rt(workers(1));
    aspen::notify n;
    bool ok = false;
    within(60s, "notify forward", [&] { ok = rt.block_on(forward_body(&n)); });
    EXPECT_TRUE(ok);
}

TEST(SyncNotify, AbortAfterNotifyOneForwardsOnCurrentThread) {
    aspen::current_thread_runtime rt;
    aspen::notify n;
    bool ok = false;
    within(60s, "notify forward current-thread", [&] { ok = rt.block_on(forward_body(&n)); });
    EXPECT_TRUE(ok);
}

}  // namespace
