// aspen::watch_channel: versions and seen marks, closing, values coming
// back with no receiver, latest-value delivery under load, cancel safety
// under random aborts and the coop budget.
#include <aspen/aspen.hpp>
#include <aspen/sync/watch.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::any_runtime;
using aspen_test::within;

#ifdef ASPEN_SANITIZED
constexpr int updates = 2000;
#else
constexpr int updates = 20000;
#endif

TEST(SyncWatch, VersionsSeenMarksAndSnapshots) {
    auto [tx, rx] = aspen::watch_channel<std::string>("a");
    EXPECT_EQ(*rx.borrow(), "a");
    EXPECT_FALSE(rx.has_changed());  // the initial value counts as seen
    auto snapshot = rx.borrow();
    EXPECT_FALSE(tx.send("b").has_value());
    EXPECT_EQ(*snapshot, "a");  // a snapshot survives later sends
    EXPECT_TRUE(rx.has_changed());
    EXPECT_EQ(*rx.borrow(), "b");
    EXPECT_TRUE(rx.has_changed());  // borrow() does not mark it seen
    EXPECT_EQ(*rx.borrow_and_update(), "b");
    EXPECT_FALSE(rx.has_changed());
    auto rx2 = rx;  // a copy has seen what rx has
    EXPECT_FALSE(rx2.has_changed());
    auto rx3 = tx.subscribe();
    EXPECT_FALSE(rx3.has_changed());
    EXPECT_EQ(tx.receiver_count(), 3u);
    EXPECT_EQ(*tx.send_replace("c"), "b");
    EXPECT_TRUE(rx2.has_changed() && rx3.has_changed());
    EXPECT_EQ(*tx.borrow(), "c");
}

TEST(SyncWatch, SendWithNoReceiverGivesTheValueBack) {
    auto [tx, rx] = aspen::watch_channel<std::unique_ptr<int>>(std::make_unique<int>(1));
    { auto drop = std::move(rx); }
    EXPECT_EQ(tx.receiver_count(), 0u);
    auto back = tx.send(std::make_unique<int>(2));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(**back, 2);
    EXPECT_EQ(**tx.borrow(), 1);  // unchanged
    auto old = tx.send_replace(std::make_unique<int>(3));  // stores anyway
    EXPECT_EQ(**old, 1);
    EXPECT_EQ(**tx.borrow(), 3);
}

TEST(SyncWatch, Misuse) {
    auto [tx, rx] = aspen::watch_channel<int>(0);
    auto moved = std::move(rx);
    EXPECT_THROW((void)rx.borrow(), std::logic_error);
    EXPECT_THROW((void)rx.changed(), std::logic_error);
    auto tmoved = std::move(tx);
    EXPECT_THROW((void)tx.send(1), std::logic_error);
}

aspen::task<std::vector<int>> changes_until_closed(aspen::watch_receiver<int> rx) {
    std::vector<int> seen;
    for (;;) {
        bool changed = co_await rx.changed();
        if (!changed) break;
        seen.push_back(*rx.borrow_and_update());
    }
    co_return seen;
}

aspen::task<std::vector<int>> close_body() {
    auto [tx, rx] = aspen::watch_channel<int>(0);
    auto h = aspen::spawn(changes_until_closed(std::move(rx)));
    co_await aspen::yield_now();
    (void)tx.send(1);
    { auto drop = std::move(tx); }  // an unseen version is still reported, then the end
    co_return co_await h;
}

TEST(SyncWatch, ChangedReportsTheLastVersionThenTheEnd) {
    aspen::current_thread_runtime rt;
    std::vector<int> seen;
    within(60s, "watch close", [&] { seen = rt.block_on(close_body()); });
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0], 1);
}

struct observer_result {
    int last = -1;
    bool increasing = true;
    int changes = 0;
};

aspen::task<observer_result> observe(aspen::watch_receiver<int> rx) {
    observer_result r;
    for (;;) {
        bool changed = co_await rx.changed();
        if (!changed) break;
        int v = *rx.borrow_and_update();
        if (v <= r.last) r.increasing = false;
        r.last = v;
        ++r.changes;
    }
    co_return r;
}

aspen::task<void> update(aspen::watch_sender<int> tx) {
    for (int i = 1; i <= updates; ++i) {
        if (tx.send(i).has_value()) throw std::runtime_error("value came back with receivers alive");
        if (i % 16 == 0) co_await aspen::yield_now();
    }
}

aspen::task<std::vector<observer_result>> load_body(int observers) {
    auto [tx, rx] = aspen::watch_channel<int>(0);
    std::vector<aspen::join_handle<observer_result>> hs;
    for (int i = 1; i < observers; ++i) hs.push_back(aspen::spawn(observe(tx.subscribe())));
    hs.push_back(aspen::spawn(observe(std::move(rx))));
    co_await aspen::spawn(update(std::move(tx)));
    std::vector<observer_result> out;
    for (auto& h : hs) out.push_back(co_await h);
    co_return out;
}

class SyncWatch : public ::testing::TestWithParam<int> {};

// Observers may skip values, never go backwards, and always end on the
// last value sent.
TEST_P(SyncWatch, ObserversEndOnTheLatestValue) {
    any_runtime rt(GetParam());
    std::vector<observer_result> rs;
    within(120s, "watch load", [&] { rs = rt->block_on(load_body(4)); });
    ASSERT_EQ(rs.size(), 4u);
    for (const auto& r : rs) {
        EXPECT_EQ(r.last, updates);
        EXPECT_TRUE(r.increasing);
        EXPECT_GE(r.changes, 1);
        EXPECT_LE(r.changes, updates);
    }
}

// Not `if (co_await ...)`: g++ 12 miscompiles destroying a coroutine that is
// suspended in a co_await inside an if condition (abort then corrupts the
// heap); clang 19 is fine. Awaiting into a variable first avoids it.
aspen::task<void> wait_change(aspen::watch_receiver<int>* rx, std::atomic<int>* got) {
    bool changed = co_await rx->changed();
    if (changed) got->fetch_add(1);
}

struct abort_result {
    int missed_changes = 0;  // a change neither reported nor left unseen (or both)
    int cancelled_waits = 0;
};

// A waiter is aborted at random; each send must still be reported to the
// receiver by the next changed() (the aborted one did not mark it seen).
aspen::task<abort_result> abort_body(unsigned seed) {
    std::mt19937 rng(seed);
    abort_result out;
    auto [tx, rx] = aspen::watch_channel<int>(0);
#ifdef ASPEN_SANITIZED
    constexpr int rounds = 300;
#else
    constexpr int rounds = 3000;
#endif
    for (int i = 1; i <= rounds; ++i) {
        std::atomic<int> got{0};
        auto h = aspen::spawn(wait_change(&rx, &got));
        if (rng() % 2) co_await aspen::yield_now();
        (void)tx.send(i);
        if (rng() % 2) co_await aspen::yield_now();
        if (rng() % 2) h.abort();  // before or after it saw the change
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            ++out.cancelled_waits;
        }
        // The change was reported by the waiter, or is still unseen.
        bool reported = got.load() == 1;
        if (reported == rx.has_changed()) ++out.missed_changes;
        if (*rx.borrow_and_update() != i) ++out.missed_changes;
    }
    co_return out;
}

TEST_P(SyncWatch, AbortedWaitersMissNoChange) {
    any_runtime rt(GetParam());
    abort_result r;
    within(120s, "watch abort storm", [&] { r = rt->block_on(abort_body(5u + GetParam())); });
    EXPECT_EQ(r.missed_changes, 0);
    EXPECT_GT(r.cancelled_waits, 0);
}

// changed() right after a send is always ready.
TEST(SyncWatch, ReadyChangesSpendTheCoopBudget) {
    auto ch = aspen::watch_channel<int>(0);
    auto& tx = ch.first;
    auto& rx = ch.second;
    int seen_at = aspen_test::coop_yield_point([&](int i) -> aspen::task<bool> {
        (void)tx.send(i);
        bool changed = co_await rx.changed();
        co_return changed && *rx.borrow() == i;
    });
    EXPECT_GE(seen_at, 0) << "-2: changed() said closed; -1: the loop never yielded";
    EXPECT_LT(seen_at, 100);
}

// wait_for: 4 waiters each want a different threshold while a sender
// counts up with send_modify from a plain thread; each gets the first value
// at or past its threshold (values may be skipped), and a
// waiter whose threshold is never reached gets null once the sender goes.
aspen::task<int> wait_at_least(aspen::watch_receiver<int> rx, int threshold) {
    auto at_least = [threshold](const int& v) { return v >= threshold; };
    std::shared_ptr<const int> v = co_await rx.wait_for(at_least);
    if (!v) co_return -1;
    co_return *v >= threshold ? threshold : -2;
}

aspen::task<int> wait_for_body() {
    auto [tx, rx] = aspen::watch_channel<int>(0);
    std::vector<aspen::join_handle<int>> hs;
    for (int t : {0, 1000, updates / 2, updates}) hs.push_back(aspen::spawn(wait_at_least(rx, t)));
    aspen::join_handle<int> never = aspen::spawn(wait_at_least(rx, updates + 1));
    std::optional<aspen::watch_sender<int>> held(std::move(tx));
    std::thread counter([&] {
        for (int i = 0; i < updates; ++i) held->send_modify([](int& v) { ++v; });
        held.reset();  // the last sender goes: `never` ends with null
    });
    int ok = 0;
    for (auto& h : hs) {
        int r = co_await h;
        ok += r > -1 ? 1 : 0;
    }
    int last = co_await never;
    counter.join();
    co_return ok * 10 + (last == -1 ? 1 : 0) + (*rx.borrow() == updates ? 100 : 0);
}

TEST_P(SyncWatch, WaitForGivesTheFirstValueThatMatchesOrNullAtTheEnd) {
    any_runtime rt(GetParam());
    int r = 0;
    within(120s, "watch wait_for", [&] { r = rt->block_on(wait_for_body()); });
    EXPECT_EQ(r, 141);
}

TEST(SyncWatch, SendIfModifiedStoresOnlyWhatChanged) {
    auto [tx, rx] = aspen::watch_channel<std::string>("a");
    EXPECT_FALSE(tx.send_if_modified([](std::string& v) { return v == "b"; }));
    EXPECT_FALSE(rx.has_changed());
    EXPECT_TRUE(tx.send_if_modified([](std::string& v) {
        v += "b";
        return true;
    }));
    EXPECT_TRUE(rx.has_changed());
    EXPECT_EQ(*rx.borrow_and_update(), "ab");
    EXPECT_THROW(tx.send_modify([](std::string&) { throw std::runtime_error("no"); }), std::runtime_error);
    EXPECT_FALSE(rx.has_changed());  // nothing stored
    {
        aspen::watch_receiver<std::string> gone = std::move(rx);
    }
    tx.send_modify([](std::string& v) { v = "stored without receivers"; });
    EXPECT_EQ(*tx.borrow(), "stored without receivers");
}

INSTANTIATE_TEST_SUITE_P(Runtimes, SyncWatch, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
