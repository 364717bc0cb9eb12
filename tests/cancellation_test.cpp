// cancellation_token: cancel wakes every waiter, child tokens, a long
// chain of children, std::stop_token in both directions, waiters aborted
// mid-wait leave nothing behind, run_until_cancelled, a cancellable recv
// through select, and cancel racing new waiters from a foreign thread.
#include <aspen/aspen.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

namespace {

using aspen_test::alive_token;
using aspen_test::run_on;

#ifdef ASPEN_SANITIZED
constexpr int rounds = 200;
#else
constexpr int rounds = 2000;
#endif

class Cancellation : public ::testing::TestWithParam<int> {};

aspen::task<void> wait_cancelled(aspen::cancellation_token t, std::atomic<int>* woken) {
    co_await t.cancelled();
    woken->fetch_add(1);
}

aspen::task<int> cancel_wakes_all_body(int n) {
    aspen::cancellation_token t;
    std::atomic<int> woken{0};
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(aspen::spawn(wait_cancelled(t, &woken)));
    while (t.waiter_count() != static_cast<std::size_t>(n)) co_await aspen::yield_now();
    if (t.is_cancelled() || woken.load() != 0) co_return 1;
    t.cancel();
    t.cancel();  // idempotent
    for (auto& h : hs) co_await h;
    co_await t.cancelled();  // already cancelled: at once
    co_return woken.load() == n && t.waiter_count() == 0 ? 0 : 2;
}

TEST_P(Cancellation, CancelWakesEveryWaiter) {
    EXPECT_EQ(run_on(GetParam(), cancel_wakes_all_body(100), "cancel wakes"), 0);
}

TEST(CancellationToken, ChildrenFollowTheirParentOnly) {
    aspen::cancellation_token parent;
    aspen::cancellation_token copy = parent;
    aspen::cancellation_token a = parent.child();
    aspen::cancellation_token b = a.child();
    aspen::cancellation_token lone = parent.child();
    lone.cancel();
    EXPECT_TRUE(lone.is_cancelled());
    EXPECT_FALSE(parent.is_cancelled());
    EXPECT_FALSE(a.is_cancelled());
    {
        aspen::cancellation_token dropped = parent.child();  // held weakly: nothing dangles
    }
    copy.cancel();  // a copy shares the flag
    EXPECT_TRUE(parent.is_cancelled());
    EXPECT_TRUE(a.is_cancelled());
    EXPECT_TRUE(b.is_cancelled());
    EXPECT_TRUE(parent.child().is_cancelled());  // a child of a cancelled token starts cancelled
    aspen::cancellation_token moved = std::move(a);
    EXPECT_TRUE(a.is_cancelled());  // a move copies: no empty token
    EXPECT_TRUE(moved.is_cancelled());
}

TEST(CancellationToken, LongChainOfChildrenIsCancelledWithoutRecursion) {
    aspen::cancellation_token root;
    std::vector<aspen::cancellation_token> chain;
    chain.push_back(root.child());
    for (int i = 0; i < 200000; ++i) chain.push_back(chain.back().child());
    root.cancel();
    EXPECT_TRUE(chain.back().is_cancelled());
    EXPECT_TRUE(chain[chain.size() / 2].is_cancelled());
}

TEST(CancellationToken, StopTokenInterop) {
    std::stop_source src;
    aspen::cancellation_token from(src.get_token());
    EXPECT_FALSE(from.is_cancelled());
    src.request_stop();
    EXPECT_TRUE(from.is_cancelled());

    std::stop_source stopped;
    stopped.request_stop();
    EXPECT_TRUE(aspen::cancellation_token(stopped.get_token()).is_cancelled());
    EXPECT_FALSE(aspen::cancellation_token(std::stop_token{}).is_cancelled());  // no source: never

    aspen::cancellation_token t;
    std::stop_token st = t.stop_token();
    int called = 0;
    std::stop_callback cb(st, [&] { ++called; });
    EXPECT_FALSE(st.stop_requested());
    t.child().cancel();
    EXPECT_EQ(called, 0);
    t.cancel();
    EXPECT_TRUE(st.stop_requested());
    EXPECT_EQ(called, 1);
    EXPECT_TRUE(t.stop_token().stop_requested());  // made after the cancel

    // A token built from a stop_token that dies before the request.
    auto src2 = std::make_unique<std::stop_source>();
    aspen::cancellation_token survivor(src2->get_token());
    {
        aspen::cancellation_token gone(src2->get_token());
    }
    src2->request_stop();
    EXPECT_TRUE(survivor.is_cancelled());
}

aspen::task<void> wait_forever(aspen::cancellation_token t, std::atomic<int>* alive) {
    alive_token a(alive);
    co_await t.cancelled();
}

aspen::task<int> aborted_waiters_body(int n) {
    aspen::cancellation_token t;
    std::atomic<int> alive{0};
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(aspen::spawn(wait_forever(t, &alive)));
    while (t.waiter_count() != static_cast<std::size_t>(n)) co_await aspen::yield_now();
    for (auto& h : hs) co_await aspen_test::abort_and_join(h);
    // Nothing left behind: no queued waiter, and cancel() after them is fine.
    if (t.waiter_count() != 0 || alive.load() != 0) co_return 1;
    t.cancel();
    co_return 0;
}

TEST_P(Cancellation, AbortedWaitersLeaveNothingBehind) {
    EXPECT_EQ(run_on(GetParam(), aborted_waiters_body(100), "aborted waiters"), 0);
}

aspen::task<int> slow(aspen::event* e, std::atomic<int>* alive) {
    alive_token a(alive);
    co_await e->wait();
    co_return 1;
}
aspen::task<int> quick(int v) { co_return v; }
aspen::task<void> cancel_soon(aspen::cancellation_token t) {
    co_await aspen::yield_now();
    t.cancel();
}

aspen::task<int> run_until_body() {
    aspen::cancellation_token t;
    aspen::event never;
    std::atomic<int> alive{0};
    std::optional<int> v = co_await t.run_until_cancelled(quick(5));
    if (v != 5) co_return 1;
    auto c = aspen::spawn(cancel_soon(t));
    std::optional<int> w = co_await t.run_until_cancelled(slow(&never, &alive));
    co_await c;
    if (w.has_value() || alive.load() != 0) co_return 2;
    // Already cancelled: the task does not even start.
    std::optional<int> x = co_await t.run_until_cancelled(slow(&never, &alive));
    if (x.has_value() || alive.load() != 0) co_return 3;
    std::optional<std::monostate> y =
        co_await aspen::cancellation_token().run_until_cancelled([]() -> aspen::task<void> { co_return; }());
    if (!y.has_value()) co_return 4;
    // The task keeps its own copy of the token: awaiting it after the token
    // is gone is fine.
    auto later = aspen::cancellation_token().run_until_cancelled(quick(3));
    std::optional<int> z = co_await later;
    co_return z == 3 ? 0 : 5;
}

TEST_P(Cancellation, RunUntilCancelled) {
    EXPECT_EQ(run_on(GetParam(), run_until_body(), "run_until_cancelled"), 0);
}

// A consumer that selects between recv and cancelled(): everything sent
// before the cancel that it did not receive is still in the channel.
aspen::task<void> produce(aspen::mpsc_sender<int> tx, int n) {
    for (int i = 0; i < n; ++i) (void)co_await tx.send(i);
}
aspen::task<int> cancellable_recv_body(int n) {
    auto [tx, rx] = aspen::mpsc_channel<int>(2);
    aspen::cancellation_token t;
    auto p = aspen::spawn(produce(std::move(tx), n));
    int received = 0;
    for (;;) {
        if (received == n / 2) t.cancel();
        auto r = co_await aspen::select(rx.recv(), t.cancelled());
        if (r.index == 1) break;
        auto& v = std::get<0>(r.value);
        if (!v || *v != received) co_return -1;
        ++received;
    }
    // The rest is still there, in order.
    while (std::optional<int> v = co_await rx.recv()) {
        if (*v != received) co_return -2;
        ++received;
    }
    co_await p;
    co_return received == n && t.waiter_count() == 0 ? 0 : 1;
}

TEST_P(Cancellation, CancellableRecvThroughSelectLosesNoMessage) {
    EXPECT_EQ(run_on(GetParam(), cancellable_recv_body(rounds), "cancellable recv"), 0);
}

// cancel() from a foreign thread racing tasks that are starting to wait on
// fresh child tokens: every waiter wakes (watchdog otherwise).
aspen::task<int> race_body(int n, std::vector<aspen::cancellation_token>* tokens, std::atomic<int>* woken) {
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(aspen::spawn(wait_cancelled((*tokens)[static_cast<std::size_t>(i)], woken)));
    for (auto& h : hs) co_await h;
    co_return woken->load();
}

TEST_P(Cancellation, CancelFromAnotherThreadRacingNewWaiters) {
    aspen::cancellation_token root;
    std::vector<aspen::cancellation_token> tokens;
    for (int i = 0; i < rounds; ++i) tokens.push_back(i % 2 ? root.child() : root);
    std::atomic<int> woken{0};
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        root.cancel();
    });
    int n = run_on(GetParam(), race_body(rounds, &tokens, &woken), "cancel race");
    canceller.join();
    EXPECT_EQ(n, rounds);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Cancellation, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
