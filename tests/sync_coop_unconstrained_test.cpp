// aspen::unconstrained and aspen::has_budget_remaining (aspen/coop.hpp):
// inside unconstrained a task never yields because its coop budget is spent,
// and when the unconstrained part ends (normally, by an exception, across
// suspensions, nested, or destroyed by abort) the task is constrained again
// with the budget coop.hpp promises. The tests run on each runtime kind;
// those about tasks run nested in another task's poll need one thread, where
// the order of the queue is fixed, and skip the others.
//
// A yield is seen as a poll: where a test counts polls, nothing else can be
// polled meanwhile (a probe task only where it cannot run beside the loop),
// so the runtime's poll count moves exactly when the task under test yields
// and is polled again.
#include "runtime_kinds.hpp"

#include <aspen/aspen.hpp>
#include <aspen/sync/all.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>

namespace {

using namespace std::chrono_literals;
using aspen_test::any_runtime;

constexpr std::uint32_t budget = 8;
constexpr int many = 10 * static_cast<int>(budget);  // ten budgets' worth

aspen::config small_budget() {
    aspen::config c;
    c.coop_budget = budget;
    return c;
}

std::uint64_t polls_so_far() { return aspen::runtime_handle::current().metrics().total().polls; }

// Operations that complete at once and spend one unit each, of every path
// that spends budget: consume_budget (as sleeps and sockets do), and sync
// leaf awaits (recv, acquire, lock).
struct ready_ops {
    std::pair<aspen::unbounded_sender<int>, aspen::mpsc_receiver<int>> ch = aspen::unbounded_channel<int>();
    aspen::semaphore sem{1};
    aspen::mutex m;

    aspen::task<void> step(int i) {
        switch (i % 4) {
            case 0:
                co_await aspen::consume_budget();
                break;
            case 1: {
                if (ch.first.send(i)) throw std::runtime_error("ready_ops: channel closed");
                auto recv = ch.second.recv();
                std::optional<int> v = co_await recv;
                if (v != i) throw std::runtime_error("ready_ops: wrong message");
                break;
            }
            case 2: {
                auto acquire = sem.acquire();
                aspen::semaphore_permit p = co_await acquire;
                break;
            }
            default: {
                auto lock = m.lock();
                aspen::mutex_guard g = co_await lock;
                break;
            }
        }
    }

    // n steps; false if has_budget_remaining() was ever false before one.
    aspen::task<bool> run(int n) {
        bool always_had_budget = true;
        for (int i = 0; i < n; ++i) {
            if (!aspen::has_budget_remaining()) always_had_budget = false;
            aspen::task<void> s = step(i);
            co_await std::move(s);
        }
        co_return always_had_budget;
    }
};

// Exactly n units are left in this poll: n operations complete without a
// yield, then the budget reads spent, and the next operation yields.
aspen::task<void> expect_units_left(std::uint32_t n, const char* where) {
    std::uint64_t before = polls_so_far();
    for (std::uint32_t i = 0; i < n; ++i) {
        EXPECT_TRUE(aspen::has_budget_remaining()) << where << ": unit " << i;
        co_await aspen::consume_budget();
    }
    EXPECT_EQ(polls_so_far(), before) << where << ": yielded within " << n << " units";
    EXPECT_FALSE(aspen::has_budget_remaining()) << where << ": more than " << n << " units left";
    co_await aspen::consume_budget();
    EXPECT_GT(polls_so_far(), before) << where << ": did not yield after " << n << " units";
}

// A fresh poll, then 3 units spent: budget - 3 left.
aspen::task<void> fresh_poll_then_spend_three() {
    co_await aspen::yield_now();
    for (int i = 0; i < 3; ++i) co_await aspen::consume_budget();
}

// A fresh poll with 3 units spent, then inner under unconstrained; then
// exactly `left` units must be left.
aspen::task<int> around(aspen::task<void> inner, std::uint32_t left, const char* where) {
    aspen::task<void> start = fresh_poll_then_spend_three();
    co_await std::move(start);
    aspen::task<void> u = aspen::unconstrained(std::move(inner));
    co_await std::move(u);
    aspen::task<void> check = expect_units_left(left, where);
    co_await std::move(check);
    co_return 0;
}

class CoopUnconstrained : public ::testing::TestWithParam<int> {
protected:
    template <class T>
    T run(aspen::task<T> t, const char* what) {
        any_runtime rt(GetParam(), small_budget());
        std::optional<T> out;
        aspen_test::within(60s, what, [&] { out.emplace(rt->block_on(std::move(t))); });
        return std::move(*out);
    }
    // Only on one thread can a spawned probe not run beside the loop.
    bool one_thread() const { return GetParam() <= 1; }
};

struct loop_result {
    std::uint64_t polls = 0;   // polls of the runtime during the loop
    bool probe_ran = false;    // the competing task ran during the loop
    bool always_had_budget = false;
};

aspen::task<loop_result> loop_beside_probe(bool unconstrained, bool with_probe) {
    ready_ops ops;
    std::atomic<bool> probe_ran{false};
    std::optional<aspen::join_handle<void>> probe;
    co_await aspen::yield_now();
    if (with_probe) probe.emplace(aspen::spawn(aspen_test::set_flag(&probe_ran)));
    loop_result r;
    std::uint64_t before = polls_so_far();
    if (unconstrained) {
        aspen::task<bool> body = aspen::unconstrained(ops.run(many));
        r.always_had_budget = co_await std::move(body);
    } else {
        aspen::task<bool> body = ops.run(many);
        r.always_had_budget = co_await std::move(body);
    }
    r.polls = polls_so_far() - before;
    r.probe_ran = probe_ran.load();
    if (probe) co_await *probe;
    co_return r;
}

TEST_P(CoopUnconstrained, LoopOfTenBudgetsNeverYields) {
    loop_result r = run(loop_beside_probe(true, one_thread()), "unconstrained loop");
    EXPECT_EQ(r.polls, 0u);
    EXPECT_FALSE(r.probe_ran);
    EXPECT_TRUE(r.always_had_budget);
}

// The control: the same loop, constrained, yields about once a budget.
TEST_P(CoopUnconstrained, SameLoopOutsideYieldsAndLetsTheProbeRun) {
    loop_result r = run(loop_beside_probe(false, one_thread()), "constrained loop");
    EXPECT_GE(r.polls, static_cast<std::uint64_t>(many / budget - 1));
    if (one_thread()) {
        EXPECT_TRUE(r.probe_ran);
    }
    EXPECT_FALSE(r.always_had_budget);
}

// Ends in the stretch of the poll it began in: the enclosing task has what
// it had left then (budget - 3), not what the body left, nor a full budget.
TEST_P(CoopUnconstrained, BudgetLeftWhenEnteredIsGivenBackWhenItEnds) {
    auto body = []() -> aspen::task<int> {
        ready_ops ops;
        aspen::task<void> start = fresh_poll_then_spend_three();
        co_await std::move(start);
        aspen::task<bool> u = aspen::unconstrained(ops.run(many));
        bool always = co_await std::move(u);
        EXPECT_TRUE(always);
        aspen::task<void> check = expect_units_left(budget - 3, "after unconstrained");
        co_await std::move(check);
        co_return 0;
    };
    run(body(), "budget after unconstrained");
}

aspen::task<int> spend_then_throw(int n) {
    ready_ops ops;
    aspen::task<bool> loop = ops.run(n);
    co_await std::move(loop);
    throw std::runtime_error("boom");
}

TEST_P(CoopUnconstrained, BudgetGivenBackWhenTheBodyThrows) {
    auto body = []() -> aspen::task<int> {
        aspen::task<void> start = fresh_poll_then_spend_three();
        co_await std::move(start);
        std::uint64_t before = polls_so_far();
        bool caught = false;
        try {
            aspen::task<int> u = aspen::unconstrained(spend_then_throw(many));
            co_await std::move(u);
        } catch (const std::runtime_error&) {
            caught = true;
        }
        EXPECT_TRUE(caught);
        EXPECT_EQ(polls_so_far(), before);  // the body did not yield
        aspen::task<void> check = expect_units_left(budget - 3, "after a throw");
        co_await std::move(check);
        co_return 0;
    };
    run(body(), "budget after a throwing unconstrained body");
}

// The body suspends (a sleep) between two loops: the opt-out holds in the
// later poll too, and when the body ends there the enclosing task gets that
// poll's full budget back and is constrained again.
TEST_P(CoopUnconstrained, OptOutHoldsAcrossASuspensionAndEndsWithTheBody) {
    struct outcome {
        std::uint64_t polls_in_second_loop = 0;
        bool suspended = false;
        bool always = false;
    };
    auto inner = [](outcome& o) -> aspen::task<void> {
        ready_ops ops;
        aspen::task<bool> first = ops.run(many);
        bool a = co_await std::move(first);
        // A sleep whose deadline passed before its first poll (the thread
        // was preempted for a millisecond, as on a loaded machine) completes
        // without suspending: sleep again until one did.
        std::uint64_t before_sleep = 0, after_sleep = 0;
        for (int tries = 0; tries < 100 && after_sleep == before_sleep; ++tries) {
            before_sleep = polls_so_far();
            aspen::sleep_awaitable nap = aspen::sleep(1ms);
            co_await nap;
            after_sleep = polls_so_far();
        }
        o.suspended = after_sleep > before_sleep;
        aspen::task<bool> second = ops.run(many);
        bool b = co_await std::move(second);
        o.polls_in_second_loop = polls_so_far() - after_sleep;
        o.always = a && b;
    };
    outcome o;
    run(around(inner(o), budget, "after a body that suspended"), "unconstrained across a sleep");
    EXPECT_TRUE(o.suspended);
    EXPECT_EQ(o.polls_in_second_loop, 0u);
    EXPECT_TRUE(o.always);
}

// The inner scope's end must not end the outer one's opt-out.
TEST_P(CoopUnconstrained, NestedScopesHoldUntilTheOutermostEnds) {
    struct outcome {
        std::uint64_t polls = 0;
        bool always = false;
    };
    auto outer = [](outcome& o) -> aspen::task<void> {
        ready_ops ops;
        std::uint64_t before = polls_so_far();
        aspen::task<bool> in = aspen::unconstrained(ops.run(many));
        bool a = co_await std::move(in);
        aspen::task<bool> rest = ops.run(many);
        bool b = co_await std::move(rest);
        o.polls = polls_so_far() - before;
        o.always = a && b;
    };
    outcome o;
    run(around(outer(o), budget - 3, "after nested scopes"), "nested unconstrained");
    EXPECT_EQ(o.polls, 0u);
    EXPECT_TRUE(o.always);
}

// A spawned task whose root is unconstrained: its scope is its whole life.
TEST_P(CoopUnconstrained, SpawnedUnconstrainedTaskNeverYields) {
    auto body = [](bool one_thread) -> aspen::task<int> {
        ready_ops ops;
        std::atomic<bool> probe_ran{false};
        co_await aspen::yield_now();
        std::optional<aspen::join_handle<void>> probe;
        if (one_thread) probe.emplace(aspen::spawn(aspen_test::set_flag(&probe_ran)));
        auto child = [](ready_ops& o, std::atomic<bool>& ran) -> aspen::task<bool> {
            aspen::task<bool> loop = o.run(many);
            bool always = co_await std::move(loop);
            co_return always && !ran.load();
        };
        aspen::join_handle<bool> h = aspen::spawn(aspen::unconstrained(child(ops, probe_ran)));
        bool ok = co_await h;
        EXPECT_TRUE(ok);
        if (probe) co_await *probe;
        co_return 0;
    };
    run(body(one_thread()), "spawned unconstrained task");
}

// A task aborted while inside unconstrained: its frame goes on the
// aborter's thread (here, when the victim is idle), in the aborter's poll,
// which must keep its own budget.
TEST_P(CoopUnconstrained, AbortedBodyLeavesTheAbortersBudgetAlone) {
    auto body = []() -> aspen::task<int> {
        std::atomic<int> alive{0};
        auto [tx, rx] = aspen::unbounded_channel<int>();
        aspen::event started;
        auto victim = [](aspen::mpsc_receiver<int>& r, aspen::event& s, std::atomic<int>& count) -> aspen::task<void> {
            aspen_test::alive_token token(&count);
            s.set();
            auto recv = r.recv();
            std::optional<int> v = co_await recv;  // never sent
            (void)v;
        };
        auto h = aspen::spawn(aspen::unconstrained(victim(rx, started, alive)));
        auto wait = started.wait();
        co_await wait;
        aspen::task<void> start = fresh_poll_then_spend_three();
        co_await std::move(start);
        h.abort();
        aspen::task<void> check = expect_units_left(budget - 3, "after aborting an unconstrained task");
        co_await std::move(check);
        aspen::task<void> join = aspen_test::abort_and_join(h);
        co_await std::move(join);
        EXPECT_EQ(alive.load(), 0);
        co_return 0;
    };
    run(body(), "abort inside unconstrained");
}

// With its budget spent, an unconstrained task whose operation has to wait
// waits (one poll, then idle until woken) instead of yielding first and
// being polled again for nothing. Counted on one thread, where the order
// of polls is fixed.
TEST_P(CoopUnconstrained, OperationThatHasToWaitWaitsWithTheBudgetSpent) {
    if (!one_thread()) GTEST_SKIP() << "counts every poll of the runtime: one thread only";
    auto body = []() -> aspen::task<int> {
        auto [tx, rx] = aspen::unbounded_channel<int>();
        std::atomic<bool> waiting{false};
        auto waiter = [](aspen::mpsc_receiver<int>& r, std::atomic<bool>& w) -> aspen::task<void> {
            ready_ops ops;
            aspen::task<bool> loop = ops.run(many);  // spends the whole budget
            co_await std::move(loop);
            w.store(true);
            auto recv = r.recv();
            std::optional<int> v = co_await recv;  // never sent: waits
            (void)v;
        };
        co_await aspen::yield_now();
        std::uint64_t before = polls_so_far();
        auto h = aspen::spawn(aspen::unconstrained(waiter(rx, waiting)));
        std::uint64_t own_polls = 0;
        while (!waiting.load()) {
            co_await aspen::yield_now();
            ++own_polls;
        }
        for (int i = 0; i < 3; ++i) {  // room for a needless second poll
            co_await aspen::yield_now();
            ++own_polls;
        }
        EXPECT_EQ(polls_so_far() - before, own_polls + 1);  // the waiter's one poll
        aspen::task<void> join = aspen_test::abort_and_join(h);
        co_await std::move(join);
        co_return 0;
    };
    run(body(), "a wait with the budget spent");
}

// A task run nested in an unconstrained task's poll (its join ran the child
// inline) shares that poll's budget, which the unconstrained body spent:
// the child is constrained and finds it spent. The body never refills it.
TEST_P(CoopUnconstrained, ChildRunNestedInAnUnconstrainedPollFindsTheBudgetSpent) {
    if (!one_thread()) GTEST_SKIP() << "the child must run nested in the joiner's poll: one thread only";
    auto child = []() -> aspen::task<bool> { co_return aspen::has_budget_remaining(); };
    auto parent = [&child]() -> aspen::task<bool> {
        ready_ops ops;
        aspen::task<bool> loop = ops.run(many + 1);
        co_await std::move(loop);
        auto h = aspen::spawn(child());
        co_return co_await h;  // the newest task of this thread: runs nested
    };
    auto body = [&parent]() -> aspen::task<int> {
        co_await aspen::yield_now();
        aspen::task<bool> u = aspen::unconstrained(parent());
        bool child_had_budget = co_await std::move(u);
        EXPECT_FALSE(child_had_budget);
        co_return 0;
    };
    run(body(), "a child nested in an unconstrained poll");
}

// A body that ran a task nested (its join ran the child inline) ends in the
// same poll but not in the same stretch: the child's spending was the
// poll's, so the enclosing task keeps paying for it (else a loop of such
// bodies could run children without end in one poll).
TEST_P(CoopUnconstrained, BodyThatRanAChildNestedGivesNoRefund) {
    if (!one_thread()) GTEST_SKIP() << "the child must run nested in the joiner's poll: one thread only";
    auto child = []() -> aspen::task<void> {
        for (int i = 0; i < 2; ++i) co_await aspen::consume_budget();
    };
    auto parent = [&child]() -> aspen::task<void> {
        auto h = aspen::spawn(child());
        co_await h;  // the newest task of this thread: runs nested, free
    };
    run(around(parent(), budget - 5, "after a body that ran a child nested"), "a body that ran a child nested");
}

// An unconstrained body that began in an earlier poll and ends while its
// task runs nested in another task's poll (a join that runs its target in
// its own poll) gives that poll nothing back: the joiner goes on with what
// it had. The order of the queue is the current_thread runtime's (a FIFO
// whose newest entries a join looks through for its target).
TEST(CoopUnconstrainedNested, BodyEndingInAJoinersPollGivesItNothing) {
    aspen::current_thread_runtime rt(small_budget());
    auto inner = []() -> aspen::task<void> { co_await aspen::yield_now(); };
    auto scoped = [&inner]() -> aspen::task<void> {
        aspen::task<void> u = aspen::unconstrained(inner());  // suspends inside, ends nested in the joiner
        co_await std::move(u);
    };
    auto body = [&]() -> aspen::task<int> {
        auto c = aspen::spawn(scoped());  // queue: c
        co_await aspen::yield_now();      // c opens its scope and yields: r c
        for (int i = 0; i < 3; ++i) co_await aspen::consume_budget();
        co_await c;  // runs c nested (the target: free), which ends its scope
        aspen::task<void> check = expect_units_left(budget - 3, "after joining an unconstrained task");
        co_await std::move(check);
        co_return 0;
    };
    aspen_test::within(60s, "unconstrained body ending nested", [&] { rt.block_on(body()); });
}

TEST_P(CoopUnconstrained, HasBudgetRemainingIsFalseAfterTheBudget) {
    auto body = []() -> aspen::task<int> {
        co_await aspen::yield_now();
        aspen::task<void> check = expect_units_left(budget, "a fresh poll");
        co_await std::move(check);
        // The yield gave a fresh poll, which spent the unit of that consume.
        EXPECT_TRUE(aspen::has_budget_remaining());
        co_return 0;
    };
    run(body(), "has_budget_remaining");
}

INSTANTIATE_TEST_SUITE_P(Kinds, CoopUnconstrained, aspen_test::runtime_kinds, aspen_test::kind_name);

// Nothing outside a task spends budget or yields for it.
TEST(CoopUnconstrainedOutside, HasBudgetRemainingIsTrueOutsideATask) {
    EXPECT_TRUE(aspen::has_budget_remaining());
    aspen::current_thread_runtime rt(small_budget());
    bool in_blocking = false;
    auto body = [&]() -> aspen::task<int> {
        auto job = aspen::spawn_blocking([] { return aspen::has_budget_remaining(); });
        in_blocking = co_await job;
        co_return 0;
    };
    aspen_test::within(60s, "has_budget_remaining in a blocking job", [&] { rt.block_on(body()); });
    EXPECT_TRUE(in_blocking);
}

}  // namespace
