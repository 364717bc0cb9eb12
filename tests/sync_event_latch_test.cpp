// event and latch: release semantics, cross-thread set, cancel safety.
#include "test_util.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;
using aspen_test::workers;

TEST(SyncEvent, SetBeforeWaitCompletesAtOnce) {
    aspen::runtime rt(workers(1));
    aspen::event e;
    e.set();
    auto body = [&]() -> aspen::task<int> {
        co_await e.wait();
        co_return 1;
    };
    EXPECT_EQ(rt.block_on(body()), 1);
    EXPECT_TRUE(e.is_set());
}

TEST(SyncEvent, OneSetFromAnotherThreadReleasesEveryWaiter) {
    for (std::size_t n : {1u, 2u, 8u}) {
        aspen::runtime rt(workers(n));
        aspen::event e;
        std::atomic<int> released{0};
        auto waiter = [&]() -> aspen::task<void> {
            co_await e.wait();
            released.fetch_add(1);
        };
        auto body = [&]() -> aspen::task<void> {
            std::vector<aspen::join_handle<void>> hs;
            for (int i = 0; i < 100; ++i) hs.push_back(aspen::spawn(waiter()));
            for (auto& h : hs) co_await h;
        };
        auto h = rt.spawn(body());
        while (e.waiter_count() < 100) std::this_thread::sleep_for(1ms);
        EXPECT_EQ(released.load(), 0);
        std::thread([&] { e.set(); }).join();
        within(60s, "event waiters", [&] { rt.block_on([](aspen::join_handle<void> h) -> aspen::task<void> { co_await h; }(std::move(h))); });
        EXPECT_EQ(released.load(), 100);
        EXPECT_EQ(e.waiter_count(), 0u);
    }
}

// A set() releases the waiters it found even if reset() follows before they
// run; a later wait waits again.
TEST(SyncEvent, SetThenResetStillReleasesQueuedWaiters) {
    aspen::runtime rt(workers(1));
    aspen::event e;
    std::atomic<int> released{0};
    auto body = [&]() -> aspen::task<void> {
        auto h = aspen::spawn([](aspen::event& e, std::atomic<int>& r) -> aspen::task<void> {
            co_await e.wait();
            r.fetch_add(1);
        }(e, released));
        while (e.waiter_count() == 0) co_await aspen::yield_now();
        e.set();
        e.reset();  // before the waiter ran (one worker: it cannot have)
        co_await h;
    };
    rt.block_on(body());
    EXPECT_EQ(released.load(), 1);
    EXPECT_FALSE(e.is_set());
}

TEST(SyncEvent, AbortedWaiterLeavesTheQueue) {
    aspen::runtime rt(workers(2));
    aspen::event e;
    auto body = [&]() -> aspen::task<bool> {
        auto h = aspen::spawn([](aspen::event& e) -> aspen::task<void> { co_await e.wait(); }(e));
        while (e.waiter_count() == 0) co_await aspen::yield_now();
        h.abort();
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            co_return e.waiter_count() == 0;
        }
        co_return false;
    };
    EXPECT_TRUE(rt.block_on(body()));
    e.set();  // nobody left to wake; must not touch the destroyed waiter
}

TEST(SyncLatch, ReleasesWaitersExactlyWhenTheCountReachesZero) {
    for (std::size_t n : {1u, 2u, 8u}) {
        aspen::runtime rt(workers(n));
        constexpr int parties = 50;
        aspen::latch done(parties);
        std::atomic<int> arrived{0};
        auto worker = [&]() -> aspen::task<void> {
            arrived.fetch_add(1);
            done.count_down();
            co_return;
        };
        auto body = [&]() -> aspen::task<int> {
            for (int i = 0; i < parties; ++i) aspen::spawn(worker()).detach();
            co_await done.wait();
            co_return arrived.load();
        };
        int seen = 0;
        within(60s, "latch", [&] { seen = rt.block_on(body()); });
        EXPECT_EQ(seen, parties);  // every count_down happened before the release
        EXPECT_TRUE(done.try_wait());
    }
}

TEST(SyncLatch, MisuseIsAnError) {
    EXPECT_THROW(aspen::latch(-1), std::invalid_argument);
    aspen::latch l(1);
    EXPECT_FALSE(l.try_wait());
    l.count_down();
    EXPECT_TRUE(l.try_wait());
    EXPECT_THROW(l.count_down(), std::logic_error);
    aspen::latch zero(0);
    EXPECT_TRUE(zero.try_wait());
}

}  // namespace
