// Adopted joins (task_header.hpp, "Adopted"): a task that awaits the child it
// just spawned runs it nested, and the child's final suspend resumes the
// awaiter directly, which takes the outcome from the child's frame. The
// header's `adopted` flag tells which way a join went. Every way out of that
// path is covered: a suspension inside the child, a waker clone that
// outlives it, an exception, results with destructors, abort, and a
// parameter with a destructor (which keeps its child off the path).
#include "runtime_kinds.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using aspen_test::any_runtime;

class JoinAdoption : public ::testing::TestWithParam<int> {};

using aspen_test::counted;

aspen::task<int> square(int x) { co_return x* x; }

aspen::task<std::string> spelled(counted c, int n) {
    (void)c;
    co_return std::string(static_cast<std::size_t>(n), 'x');  // longer than the small-string buffer
}

aspen::task<std::unique_ptr<int>> boxed(int x) { co_return std::make_unique<int>(x); }

// A result whose move may throw (not noexcept): the await takes it out of
// the frame under a guard that still finishes the child.
struct throwing_move {
    std::string text;
    explicit throwing_move(std::string t) : text(std::move(t)) {}
    throwing_move(throwing_move&& o) noexcept(false) : text(std::move(o.text)) {}
};
static_assert(!std::is_nothrow_move_constructible_v<throwing_move>);
aspen::task<throwing_move> wordy(int n) { co_return throwing_move(std::string(static_cast<std::size_t>(n), 'y')); }

aspen::task<int> throws_after(int x) {
    if (x > 0) throw std::runtime_error("thrown by an adopted child");
    co_return x;
}

aspen::task<long> fib(int n) {
    if (n < 2) co_return n;
    auto h = aspen::spawn(fib(n - 1));
    long b = co_await fib(n - 2);
    co_return b + co_await h;
}

// Whether the awaited handle's child ran adopted: its header says so, or
// the handle gave the block back at the join (join_handle.hpp, "Given
// back"), which only an adopted child's join does.
template <class T>
bool ran_adopted(const aspen::join_handle<T>& h) {
    return h.valid() && (h.header() == nullptr || h.header()->adopted);
}

// A task that waits on a waker another thread fires once, 2 ms after the
// task parked on it (as a socket's readiness would come): where a test
// needs a child that really suspends and is woken from outside.
class foreign_wake {
public:
    foreign_wake()
        : thread_([this] {
              while (!registered_.load()) std::this_thread::yield();
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              woken_.store(true);
              parked_->wake_by_ref();
          }) {}
    ~foreign_wake() {
        thread_.join();
        parked_.reset();
    }
    aspen::task<int> wait_then(int value) {
        co_await aspen::poll_fn([this](aspen::context& cx) -> aspen::poll<int> {
            if (woken_.load()) return aspen::ready(0);
            if (!registered_.load()) {
                parked_.emplace(cx.waker());
                registered_.store(true);
            }
            return aspen::pending;
        });
        co_return value;
    }

private:
    std::optional<aspen::waker> parked_;
    std::atomic<bool> registered_{false};
    std::atomic<bool> woken_{false};
    std::thread thread_;
};

template <class T>
T run(any_runtime& rt, aspen::task<T> t) {
    std::optional<T> out;
    aspen_test::within(std::chrono::seconds(60), "adopted join", [&] { out.emplace(rt->block_on(std::move(t))); });
    return std::move(*out);
}

TEST_P(JoinAdoption, TheOutcomeComesFromTheChildsFrame) {
    any_runtime rt(GetParam());
    std::atomic<long> destroyed{0};
    auto body = [&]() -> aspen::task<int> {
        int failures = 0;
        auto a = aspen::spawn(square(7));
        failures += co_await a != 49;
        failures += !ran_adopted(a);
        failures += !a.is_finished();
        a.abort();  // finished: no effect
        try {
            (void)co_await a;
            ++failures;
        } catch (const std::logic_error&) {
        }
        auto b = aspen::spawn(spelled(counted(&destroyed), 100));
        std::string text = co_await b;
        failures += text != std::string(100, 'x');
        // A parameter with a destructor: not adopted (its frame goes when it
        // ends, before the join's await_resume: see final_awaiter).
        failures += ran_adopted(b);
        failures += destroyed.load() != 1;  // the parameter's copy, when the frame went
        auto c = aspen::spawn(boxed(5));
        auto p = co_await c;
        failures += !p || *p != 5;
        failures += !ran_adopted(c);
        auto w = aspen::spawn(wordy(50));
        throwing_move moved = co_await w;
        failures += moved.text != std::string(50, 'y');
        failures += !ran_adopted(w);
        auto d = aspen::spawn(throws_after(1));
        try {
            (void)co_await d;
            ++failures;
        } catch (const std::runtime_error& e) {
            failures += std::string(e.what()) != "thrown by an adopted child";
        }
        failures += !ran_adopted(d);
        co_return failures;
    };
    EXPECT_EQ(run(rt, body()), 0);
    EXPECT_EQ(destroyed.load(), 1);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// The nested chains of fib adopt at every level; the count of live tasks
// returns to zero, so every adopted completion was counted.
TEST_P(JoinAdoption, DeepChainsOfAdoptedChildren) {
    any_runtime rt(GetParam());
    EXPECT_EQ(run(rt, fib(22)), 17711);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// A parent that spawns several children and then awaits them in spawn
// order wants the oldest first, which sits below its siblings in the
// worker's own places: the join takes it from there (down to 16 places),
// so every child runs adopted, in a tree of such parents too. Without that
// the join would run the newer siblings first as help (not adopted) and
// adopt only the oldest. Where nobody else can take a child (one thread:
// current_thread, one worker) every join must adopt; with more workers a
// child may be stolen first, so only the sum and the count are checked.
// Counted from several workers at once: relaxed atomics (read after block_on).
aspen::task<long> fan(int depth, long offset, std::atomic<int>& adopted, std::atomic<int>& joins) {
    if (depth == 0) co_return offset;
    constexpr int width = 12;
    std::vector<aspen::join_handle<long>> children;
    for (int i = 0; i < width; ++i)
        children.push_back(aspen::spawn(fan(depth - 1, offset * width + i, adopted, joins)));
    long sum = 0;
    for (auto& child : children) {
        sum += co_await child;
        if (ran_adopted(child)) adopted.fetch_add(1, std::memory_order_relaxed);
        joins.fetch_add(1, std::memory_order_relaxed);
    }
    co_return sum;
}

TEST_P(JoinAdoption, ChildrenAwaitedInSpawnOrderAreEachAdopted) {
    any_runtime rt(GetParam());
    std::atomic<int> adopted{0};
    std::atomic<int> joins{0};
    // Leaves 0 .. 12^3 - 1.
    EXPECT_EQ(run(rt, fan(3, 0, adopted, joins)), 1727L * 1728 / 2);
    EXPECT_EQ(joins.load(), 12 + 144 + 1728);
    if (GetParam() <= 1) {
        EXPECT_EQ(adopted.load(), joins.load());
    }
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// Wider than the 16 places a join scans: the oldest of 40 children sits 39
// places down, and is found at the slot it was staged in
// (task_header::stage_slot). On one worker every join adopts; with the scan
// alone 16 of the 40 did (checked), the rest running after newer siblings
// that the joins took as help.
aspen::task<long> wide_fan(int width, std::atomic<int>& adopted) {
    std::vector<aspen::join_handle<int>> children;
    for (int i = 0; i < width; ++i) children.push_back(aspen::spawn(square(i)));
    long sum = 0;
    for (auto& child : children) {
        sum += co_await child;
        if (ran_adopted(child)) adopted.fetch_add(1, std::memory_order_relaxed);
    }
    co_return sum;
}

TEST_P(JoinAdoption, ChildrenFarBelowTheTopAreAdoptedToo) {
    any_runtime rt(GetParam());
    std::atomic<int> adopted{0};
    constexpr int width = 40;
    EXPECT_EQ(run(rt, wide_fan(width, adopted)), 39L * 40 * 79 / 6);
    if (GetParam() == 1) {
        EXPECT_EQ(adopted.load(), width);
    }
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// Several joins in one expression. g++ 12 runs every await_suspend of
// `co_await a + co_await b` before either await_resume, so the joiner runs
// on between an adopted child's end and the await_resume that takes its
// outcome, and awaits the next handle there. The current task must already
// be the joiner again then (the adopted child's final suspend restores it),
// or the second join would record the finished child as its joiner.
TEST_P(JoinAdoption, JoinsInOneExpressionEachSeeTheirJoiner) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<int> {
        int failures = 0;
        for (int round = 0; round < 100; ++round) {
            auto a = aspen::spawn(square(2));
            auto b = aspen::spawn(square(3));
            auto c = aspen::spawn(square(4));
            // Newest first, then the oldest: each the top of its place.
            failures += co_await c + co_await b + co_await a != 29;
            auto d = aspen::spawn(square(5));
            auto e = aspen::spawn(square(6));
            failures += co_await d * co_await e != 900;
        }
        co_return failures;
    };
    EXPECT_EQ(run(rt, body()), 0);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// A child that suspends stops being adopted: it finishes as an ordinary
// task, its joiner is woken through the join waker, and the outcome comes
// from the result slot.
TEST_P(JoinAdoption, AChildThatSuspendsFinishesAsAnOrdinaryTask) {
    any_runtime rt(GetParam());
    auto yields = []() -> aspen::task<int> {
        co_await aspen::yield_now();
        co_return 3;
    };
    {
        foreign_wake wake;
        auto body = [&]() -> aspen::task<int> {
            int failures = 0;
            auto a = aspen::spawn(yields());
            failures += co_await a != 3;
            failures += ran_adopted(a);
            auto b = aspen::spawn(wake.wait_then(4));
            failures += co_await b != 4;
            failures += ran_adopted(b);
            co_return failures;
        };
        EXPECT_EQ(run(rt, body()), 0);
    }
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// A chain of joins deeper than join_by_call's 64 nested calls: each task
// spawns one child and awaits it. Below that depth each child runs by a
// plain call from its joiner's await_ready; deeper ones by symmetric
// transfer (suspend_on_join), so the stack stays bounded however deep the
// chain. Where nobody can steal a child every join of the chain adopts.
aspen::task<long> chain(int depth, std::atomic<long>* adopted) {
    if (depth == 0) co_return 0;
    auto h = aspen::spawn(chain(depth - 1, adopted));
    long below = co_await h;
    if (ran_adopted(h)) adopted->fetch_add(1, std::memory_order_relaxed);
    co_return below + 1;
}

TEST_P(JoinAdoption, ChainsDeeperThanTheNestedCallsStillAdopt) {
    any_runtime rt(GetParam());
    constexpr int depth = 20'000;
    std::atomic<long> adopted{0};
    EXPECT_EQ(run(rt, chain(depth, &adopted)), depth);
    if (GetParam() <= 1) {
        EXPECT_EQ(adopted.load(), depth);
    }
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// A child run by a call (join_by_call) runs grandchildren by calls too;
// when the innermost one suspends, every level stops being adopted: each
// finishes as an ordinary task and wakes its joiner, and the outcomes come
// from the result slots. The wake comes from another thread (as a socket's
// would), so the suspended tasks may finish on any worker.
TEST_P(JoinAdoption, ASuspensionBelowNestedCallsFinishesEveryLevelAsAnOrdinaryTask) {
    any_runtime rt(GetParam());
    std::atomic<int> not_adopted{0};
    {
        foreign_wake wake;
        auto level = [&](auto& self, int depth) -> aspen::task<int> {
            if (depth == 0) co_return co_await wake.wait_then(1);
            auto h = aspen::spawn(self(self, depth - 1));
            int below = co_await h;
            if (!ran_adopted(h)) not_adopted.fetch_add(1);
            co_return below + 1;
        };
        EXPECT_EQ(run(rt, level(level, 5)), 6);
    }
    EXPECT_EQ(not_adopted.load(), 5);  // every level saw the suspension
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// A child run by a call whose own join cannot adopt (an abort_handle also
// holds the grandchild) runs the grandchild nested by symmetric transfer;
// when that one suspends, the call returns with the grandchild current,
// and both nested runs must finish as ordinary tasks before the joiner
// waits (join_by_call unwinds the chain above its child first).
TEST_P(JoinAdoption, ASuspensionInATransferRunBelowACallUnwindsTheWholeChain) {
    any_runtime rt(GetParam());
    {
        foreign_wake wake;
        auto child = [&]() -> aspen::task<int> {
            auto g = aspen::spawn(wake.wait_then(5));
            aspen::abort_handle keeps_it_shared = g.abort_handle();
            int v = co_await g;
            co_return v + (ran_adopted(g) ? 100 : 1);
        };
        auto body = [&]() -> aspen::task<int> {
            auto c = aspen::spawn(child());
            int v = co_await c;
            co_return v + (ran_adopted(c) ? 100 : 10);
        };
        EXPECT_EQ(run(rt, body()), 16);
    }
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// A waker clone that outlives an adopted child: its end takes the CAS path
// (the block is freed when the clone and the handle are gone, which ASan
// checks), and waking the clone afterwards does nothing.
TEST_P(JoinAdoption, AWakerCloneThatOutlivesTheChildKeepsItsBlock) {
    any_runtime rt(GetParam());
    std::optional<aspen::waker> kept;
    auto keeps_waker = [&]() -> aspen::task<int> {
        co_return co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
            kept.emplace(cx.waker());
            return aspen::ready(5);
        });
    };
    auto body = [&]() -> aspen::task<int> {
        int failures = 0;
        auto h = aspen::spawn(keeps_waker());
        failures += co_await h != 5;
        failures += !ran_adopted(h);
        failures += !h.is_finished();
        kept->wake();  // the task is complete: a no-op
        co_return failures;
    };
    EXPECT_EQ(run(rt, body()), 0);
    kept.reset();
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// A sibling aborts the child its joiner runs nested (adopted, until it
// suspends; or still queued, if the sibling ran first on another worker):
// the child is destroyed and the await throws task_cancelled.
TEST_P(JoinAdoption, AbortReachesAChildItsJoinerRunsNested) {
    any_runtime rt(GetParam());
    std::atomic<long> destroyed{0};
    auto forever = [](counted c) -> aspen::task<int> {
        (void)c;
        co_await aspen::poll_fn([](aspen::context&) -> aspen::poll<int> { return aspen::pending; });
        co_return 1;
    };
    auto body = [&]() -> aspen::task<int> {
        auto child = aspen::spawn(forever(counted(&destroyed)));
        auto aborter = aspen::spawn([](aspen::join_handle<int>* h) -> aspen::task<void> {
            h->abort();
            co_return;
        }(&child));
        int result = 0;
        try {
            result = co_await child;
        } catch (const aspen::task_cancelled&) {
            result = -1;
        }
        co_await aborter;
        co_return result;
    };
    EXPECT_EQ(run(rt, body()), -1);
    EXPECT_EQ(destroyed.load(), 1);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// An adopted child that nothing else can reach gives its block back at the
// join (join_handle.hpp, "Given back"): the handle keeps only the id, and
// everything a handle offers after an await still works. Where nobody can
// steal the child (one thread) every such join gives the block back; a
// child whose abort_handle was taken first keeps its block (the
// abort_handle holds a reference), and both kinds of handle still answer.
// ASan checks that nothing touches a given-back block.
TEST_P(JoinAdoption, AGivenBackHandleKeepsTheIdAndAnswersAsFinished) {
    any_runtime rt(GetParam());
    const bool one_thread = GetParam() <= 1;
    auto reports_id = [](std::atomic<std::uint64_t>& seen) -> aspen::task<int> {
        seen.store(aspen::current_task_id().value(), std::memory_order_relaxed);
        co_return 6;
    };
    auto body = [&]() -> aspen::task<int> {
        int failures = 0;
        // Nobody asked for an id before the join: the handle gives one at
        // its first id(), and keeps it.
        auto a = aspen::spawn(square(4));
        failures += co_await a != 16;
        failures += one_thread && a.header() != nullptr;
        failures += !ran_adopted(a);
        failures += !a.is_finished();
        a.abort();  // finished: nothing to do
        const aspen::task_id a_id = a.id();
        failures += a_id.value() == 0 || a.id() != a_id;
        aspen::abort_handle ah = a.abort_handle();
        aspen::abort_handle ah_copy = ah;
        failures += !ah.valid() || !ah.is_finished() || ah.id() != a_id || !(ah == ah_copy);
        failures += !(ah == a.abort_handle());
        ah.abort();  // finished: nothing to do
        try {
            (void)co_await a;
            ++failures;
        } catch (const std::logic_error&) {
        }
        // The child asked for its id while it ran: the handle keeps that one.
        std::atomic<std::uint64_t> seen{0};
        auto b = aspen::spawn(reports_id(seen));
        failures += co_await b != 6;
        failures += one_thread && b.header() != nullptr;
        failures += b.id().value() != seen.load(std::memory_order_relaxed);
        failures += b.id() == a_id;
        failures += b.abort_handle() == ah;
        // An abort_handle taken before the join holds a reference: the
        // child keeps its block until both handles are gone (it is not
        // adopted either: adoption wants the handle's reference alone).
        auto c = aspen::spawn(square(5));
        aspen::abort_handle before = c.abort_handle();
        failures += co_await c != 25;
        failures += c.header() == nullptr;
        failures += !before.is_finished() || before.id() != c.id() || !(before == c.abort_handle());
        // Moving and dropping a given-back handle touches no block.
        aspen::join_handle<int> moved = std::move(a);
        failures += a.valid() || !moved.valid() || moved.id() != a_id;
        moved.detach();
        failures += moved.valid();
        co_return failures;
    };
    EXPECT_EQ(run(rt, body()), 0);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// Ids that given-back handles give out when first asked: distinct across
// workers and from the ids tasks ask for themselves.
TEST_P(JoinAdoption, GivenBackIdsAreDistinct) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<std::vector<std::uint64_t>> {
        std::vector<std::uint64_t> ids;
        for (int round = 0; round < 50; ++round) {
            std::vector<aspen::join_handle<int>> children;
            for (int i = 0; i < 40; ++i) children.push_back(aspen::spawn(square(i)));
            for (auto& child : children) (void)co_await child;
            for (auto& child : children) ids.push_back(child.id().value());
            ids.push_back(aspen::current_task_id().value());
        }
        co_return ids;
    };
    auto fanned = [&]() -> aspen::task<std::vector<std::uint64_t>> {
        std::vector<aspen::join_handle<std::vector<std::uint64_t>>> parts;
        for (int i = 0; i < 4; ++i) parts.push_back(aspen::spawn(body()));
        std::vector<std::uint64_t> all;
        for (auto& p : parts) {
            auto ids = co_await p;
            all.insert(all.end(), ids.begin(), ids.end());
            all.push_back(p.id().value());
        }
        co_return all;
    };
    std::vector<std::uint64_t> ids = run(rt, fanned());
    // 4 parts x 50 rounds x (40 children + the part's own id, asked each
    // round) + the 4 parts' ids through their handles. A part's own id is
    // the same every round, and its handle's id() repeats it.
    ASSERT_EQ(ids.size(), 4u * 50 * 41 + 4);
    std::vector<std::uint64_t> children_ids;
    std::vector<std::uint64_t> own_ids;
    std::size_t k = 0;
    for (int part = 0; part < 4; ++part) {
        for (int round = 0; round < 50; ++round) {
            for (int i = 0; i < 40; ++i) children_ids.push_back(ids[k++]);
            own_ids.push_back(ids[k++]);
        }
        const std::uint64_t via_handle = ids[k++];
        for (int round = 0; round < 50; ++round) EXPECT_EQ(own_ids[own_ids.size() - 1 - round], via_handle);
        children_ids.push_back(via_handle);
    }
    std::sort(children_ids.begin(), children_ids.end());
    EXPECT_EQ(std::adjacent_find(children_ids.begin(), children_ids.end()), children_ids.end());
    EXPECT_NE(children_ids.front(), 0u);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

INSTANTIATE_TEST_SUITE_P(Runtimes, JoinAdoption, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
