// Several co_awaits in one expression. g++ 12.2 runs the await_ready /
// await_suspend of every co_await in `f(co_await a, co_await b)` (each
// suspension and resumption in turn) before it calls any await_resume, when
// those await_resumes give a scalar, a reference or void (`co_await a +
// co_await b`, `f(co_await a, (co_await v, 0))`). A co_await whose result
// is a class (a guard, an optional, a tuple) is materialized at once: its
// await_resume runs before the next co_await starts, on g++ 12 too
// (CompilerOrder below shows both). So what an awaitable with a scalar or
// void result leaves for its await_resume is still undone while a later
// co_await of the same expression suspends. These tests await two or three
// such operations in one expression, the first of which really waits and
// is woken from elsewhere, on each kind of runtime, and check values and
// side effects exactly. (Awaitables whose destructor does something are
// named first: see README, "Compiler caveats".)
#include "runtime_kinds.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using aspen_test::any_runtime;

class OneExpression : public ::testing::TestWithParam<int> {};

template <class T>
T run(any_runtime& rt, aspen::task<T> t) {
    std::optional<T> out;
    aspen_test::within(std::chrono::seconds(60), "one-expression awaits",
                       [&] { out.emplace(rt->block_on(std::move(t))); });
    return std::move(*out);
}

int digits(int a, int b) { return a * 10 + b; }
[[maybe_unused]] int digits(int a, int b, int c) { return a * 100 + b * 10 + c; }

// ---- the compiler's order, shown with awaitables that only log --------------
// Each suspends, and is resumed by hand, in the order they suspended.
struct order_log {
    std::string text;
    std::vector<std::coroutine_handle<>> suspended;
};
template <class R>
struct logging_awaitable {
    order_log* log;
    char name;
    R value;
    bool await_ready() {
        log->text += 'r';
        log->text += name;
        return false;
    }
    void await_suspend(std::coroutine_handle<> h) {
        log->text += 's';
        log->text += name;
        log->suspended.push_back(h);
    }
    R await_resume() {
        log->text += 'R';
        log->text += name;
        return value;
    }
};
struct plain_task {
    struct promise_type {
        plain_task get_return_object() { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { std::terminate(); }
    };
};
plain_task scalars(order_log* log, int* out) {
    logging_awaitable<int> a{log, 'a', 1};
    logging_awaitable<int> b{log, 'b', 2};
    *out = digits(co_await a, co_await b);
}
plain_task classes(order_log* log, int* out) {
    logging_awaitable<std::optional<int>> a{log, 'a', 1};
    logging_awaitable<std::optional<int>> b{log, 'b', 2};
    *out = digits(*(co_await a), *(co_await b));
}
std::string drive(order_log& log) {
    while (!log.suspended.empty()) {
        auto h = log.suspended.front();
        log.suspended.erase(log.suspended.begin());
        h.resume();
    }
    return log.text;
}

// True when this compiler resumes a scalar co_await only after the next
// co_await of its expression suspended (g++ 12); false when it resumes
// each one before the next begins (clang 19). Tests whose window exists
// only in the first order expect what each order gives.
bool scalar_resumes_deferred() {
    order_log s;
    int v = 0;
    scalars(&s, &v);
    std::string order = drive(s);
    return order.find("sb") < order.find("Ra");
}

// Not a runtime test: records the order this compiler gives, so that a
// reader (and the tests below) know which interleaving is exercised. Only
// the values are asserted: both orders are allowed.
TEST(CompilerOrder, ScalarAwaitsMayResumeAfterTheNextSuspends) {
    order_log s, c;
    int vs = 0, vc = 0;
    scalars(&s, &vs);
    std::string scalar_order = drive(s);
    classes(&c, &vc);
    std::string class_order = drive(c);
    EXPECT_EQ(vs, 12);
    EXPECT_EQ(vc, 12);
    std::printf("scalar results: %s; class results: %s\n", scalar_order.c_str(), class_order.c_str());
}

// ---- join handles --------------------------------------------------------------

aspen::task<int> returns_at_once(int v) { co_return v; }

// A tracked task joined (adopted: it runs nested in the join) and the
// tracker's wait in the same expression. The task's count lives in a
// parameter of its frame, which must be gone once the task finished, not
// only when the join's await_resume takes the value.
TEST_P(OneExpression, TrackedJoinThenTrackerWait) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<int> {
        aspen::task_tracker tracker;
        auto h = tracker.spawn(returns_at_once(5));
        tracker.close();
        auto w = tracker.wait();
        int r = digits(co_await h, (co_await w, 7));
        co_return r;
    };
    EXPECT_EQ(run(rt, body()), 57);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

aspen::task<int> holds_receiver(aspen::oneshot_receiver<int> rx, int v) {
    (void)rx;
    co_return v;
}

// The same with a oneshot receiver as the child's parameter: the sender's
// closed() completes once the child's frame (and the receiver) is gone.
TEST_P(OneExpression, JoinThenSenderClosed) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<int> {
        auto [tx, rx] = aspen::oneshot_channel<int>();
        auto h = aspen::spawn(holds_receiver(std::move(rx), 4));
        auto closed = tx.closed();
        int r = digits(co_await h, (co_await closed, 2));
        co_return r + (tx.is_closed() ? 0 : 1000);
    };
    EXPECT_EQ(run(rt, body()), 42);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

aspen::task<int> throws_at_once(int v) {
    if (v > 0) throw std::runtime_error("thrown by a joined child");
    co_return v;
}

// A leaf that never completes and says when it was first polled.
auto wait_for_ever(std::atomic<bool>* waiting) {
    return aspen::poll_fn([waiting](aspen::context&) -> aspen::poll<int> {
        // release: whoever sees it sees the expression's earlier awaits done.
        waiting->store(true, std::memory_order_release);
        return aspen::pending;
    });
}

// Two joined children (adopted where nothing else took them first) and a
// wait that never ends, in one expression; the joiner is aborted while it
// waits, so (on g++ 12) neither join's await_resume ever runs. Both
// children still complete: nothing is left alive, and the exception the
// second one threw, which nobody observed, goes to the unhandled-exception
// handler as any unobserved exception of a task whose handle was dropped.
TEST_P(OneExpression, JoinerAbortedBeforeTheJoinsResume) {
    std::atomic<int> reported{0};
    aspen::config cfg;
    cfg.unhandled_exception_handler = [&](std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::runtime_error& err) {
            // relaxed: a count, read after block_on returned (the runtime's
            // threads are joined or synchronized with it by then).
            if (std::string(err.what()) == "thrown by a joined child") reported.fetch_add(1, std::memory_order_relaxed);
        } catch (...) {
        }
    };
    any_runtime rt(GetParam(), cfg);
    std::atomic<bool> waiting{false};
    auto joiner = [&]() -> aspen::task<int> {
        auto a = aspen::spawn(returns_at_once(3));
        auto b = aspen::spawn(throws_at_once(1));
        auto never = wait_for_ever(&waiting);
        co_return digits(co_await a, co_await b, co_await never);
    };
    auto body = [&]() -> aspen::task<int> {
        auto j = aspen::spawn(joiner());
        // (Resumed at once, b's exception ends the joiner before `never`.)
        // acquire: pairs with the leaf's release store (the joiner got there).
        while (!waiting.load(std::memory_order_acquire) && !j.is_finished()) co_await aspen::yield_now();
        j.abort();
        try {
            (void)co_await j;
        } catch (const aspen::task_cancelled&) {
            co_return 1;
        } catch (const std::runtime_error&) {
            co_return 2;
        }
        co_return 0;
    };
    int r = run(rt, body());
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
    if (scalar_resumes_deferred()) {
        // Both joins suspended, neither resumed: the joiner is aborted in
        // `never`, and b's exception was nobody's.
        EXPECT_EQ(r, 1);
        EXPECT_EQ(reported.load(std::memory_order_relaxed), 1);  // after block_on: see the handler
    } else {
        // b's await_resume rethrew in the joiner, which ended with it.
        EXPECT_EQ(r, 2);
        EXPECT_EQ(reported.load(std::memory_order_relaxed), 0);
    }
}


// A void join (its child waits for a wake from another thread, so the join
// really suspends and completes through the result slot), an int join
// (adopted where nothing took it first) and a spawn_blocking join in one
// expression: each gives its own outcome, and every task has ended.
TEST_P(OneExpression, VoidIntAndBlockingJoins) {
    any_runtime rt(GetParam());
    aspen_test::signal go;
    std::thread waker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        go.set();
    });
    auto body = [&]() -> aspen::task<int> {
        auto v = aspen::spawn([](aspen_test::signal* g) -> aspen::task<void> { co_await g->wait(); }(&go));
        auto i = aspen::spawn(returns_at_once(2));
        auto b = aspen::spawn_blocking([] { return 3; });
        int r = digits((co_await v, 1), co_await i, co_await b);
        co_return r + (v.is_finished() && i.is_finished() && b.is_finished() ? 0 : 1000);
    };
    EXPECT_EQ(run(rt, body()), 123);
    waker.join();
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
}

// Two poll_fn leaves with int results: the first stores its waker and is
// woken from another thread; the second is pending until its own flag is
// set, and the first's waker is woken again (spuriously) meanwhile, which
// must not resume the task before the second is ready. Each leaf is
// polled only through its own poll: the values say which poll completed.
TEST_P(OneExpression, PollFnLeavesAndASpuriousWake) {
    any_runtime rt(GetParam());
    std::atomic<int> phase{0};  // 1: the first is ready, 2: the second is
    std::mutex m;
    aspen::waker first_waker, second_waker;
    std::atomic<int> second_polls_before_ready{0};
    std::thread other([&] {
        // Wait until the first leaf stored its waker.
        for (;;) {
            std::lock_guard g(m);
            if (first_waker) break;
        }
        phase.store(1, std::memory_order_release);  // release: to the leaf's acquire load
        { std::lock_guard g(m); first_waker.wake_by_ref(); }
        for (;;) {
            std::lock_guard g(m);
            if (second_waker) break;
        }
        // Spurious: the first leaf is done; its waker wakes the same task.
        { std::lock_guard g(m); first_waker.wake_by_ref(); }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        phase.store(2, std::memory_order_release);  // as above
        std::lock_guard g(m);
        second_waker.wake_by_ref();
    });
    auto body = [&]() -> aspen::task<int> {
        auto a = aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
            if (phase.load(std::memory_order_acquire) >= 1) return aspen::ready(4);  // acquire: the thread's store
            std::lock_guard g(m);
            first_waker = cx.waker();
            return aspen::pending;
        });
        auto b = aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
            if (phase.load(std::memory_order_acquire) >= 2) return aspen::ready(5);  // as above
            second_polls_before_ready.fetch_add(1, std::memory_order_relaxed);  // a count, read after block_on
            std::lock_guard g(m);
            second_waker = cx.waker();
            return aspen::pending;
        });
        co_return digits(co_await a, co_await b);
    };
    EXPECT_EQ(run(rt, body()), 45);
    other.join();
    EXPECT_GE(second_polls_before_ready.load(std::memory_order_relaxed), 1);
    std::lock_guard g(m);
    first_waker.reset();
    second_waker.reset();
}

// ---- sync primitives with void or bool results ---------------------------------

// Two notified() in one expression, on two notifies, each notified from
// another task while it waits.
TEST_P(OneExpression, TwoNotifiedEachWokenFromElsewhere) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<int> {
        aspen::notify n1, n2;
        auto notifier = aspen::spawn([](aspen::notify* a, aspen::notify* b) -> aspen::task<void> {
            while (a->waiter_count() == 0) co_await aspen::yield_now();
            a->notify_one();
            while (b->waiter_count() == 0) co_await aspen::yield_now();
            b->notify_one();
        }(&n1, &n2));
        auto w1 = n1.notified();
        auto w2 = n2.notified();
        int r = digits((co_await w1, 1), (co_await w2, 2));
        co_await notifier;
        co_return r;
    };
    EXPECT_EQ(run(rt, body()), 12);
}

// A notified() that a notify_one() completed, in a task aborted while a
// later co_await of the same expression waits: its await_resume never
// ran (g++ 12), so the notification is passed on, here to the other waiter.
TEST_P(OneExpression, NotificationOfAnAbortedAwaitIsPassedOn) {
    if (!scalar_resumes_deferred()) GTEST_SKIP() << "each co_await resumes before the next: no such window";
    any_runtime rt(GetParam());
    std::atomic<bool> waiting{false};
    aspen::notify n;
    auto first = [&]() -> aspen::task<int> {
        auto w = n.notified();
        auto never = wait_for_ever(&waiting);
        co_return digits((co_await w, 1), co_await never);
    };
    auto body = [&]() -> aspen::task<int> {
        auto f = aspen::spawn(first());
        while (n.waiter_count() == 0) co_await aspen::yield_now();
        n.notify_one();  // picks f's notified()
        while (!waiting.load(std::memory_order_acquire)) co_await aspen::yield_now();  // acquire: the leaf's store
        auto second = aspen::spawn([](aspen::notify* n) -> aspen::task<int> {
            auto w = n->notified();
            co_await w;
            co_return 7;
        }(&n));
        while (n.waiter_count() == 0) co_await aspen::yield_now();
        f.abort();
        co_await aspen_test::abort_and_join(f);
        co_return co_await second;  // hangs (the watchdog) if the notification was lost
    };
    EXPECT_EQ(run(rt, body()), 7);
}

// watch changed() (bool) twice in one expression on two channels, each
// sent to from another task while it waits. Then the aborted case: a
// changed() that completed (and marked the version seen) in a task aborted
// while a later co_await waits, before its await_resume (g++ 12), is rolled
// back, so the receiver still has that version unseen.
TEST_P(OneExpression, WatchChangedInOneExpression) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<int> {
        auto [tx1, rx1] = aspen::watch_channel<int>(0);
        auto [tx2, rx2] = aspen::watch_channel<int>(0);
        auto sender = aspen::spawn([](aspen::watch_sender<int>* a, aspen::watch_sender<int>* b) -> aspen::task<void> {
            co_await aspen::yield_now();
            (void)a->send(1);
            co_await aspen::yield_now();
            (void)b->send(2);
        }(&tx1, &tx2));
        auto c1 = rx1.changed();
        auto c2 = rx2.changed();
        int r = digits(co_await c1, co_await c2);
        co_await sender;
        co_return digits(r, *rx1.borrow() * 10 + *rx2.borrow(), rx1.has_changed() || rx2.has_changed());
    };
    EXPECT_EQ(run(rt, body()), 11 * 100 + 12 * 10 + 0);
}

TEST_P(OneExpression, WatchChangedOfAnAbortedAwaitIsRolledBack) {
    any_runtime rt(GetParam());
    std::atomic<bool> waiting{false};
    auto [tx, rx] = aspen::watch_channel<int>(0);
    auto first = [&]() -> aspen::task<int> {
        auto c = rx.changed();
        auto never = wait_for_ever(&waiting);
        co_return digits(co_await c, co_await never);
    };
    auto body = [&]() -> aspen::task<int> {
        auto f = aspen::spawn(first());
        co_await aspen::yield_now();
        (void)tx.send(5);
        while (!waiting.load(std::memory_order_acquire)) co_await aspen::yield_now();  // acquire: the leaf's store
        bool seen_while_waiting = !rx.has_changed();  // the completed poll marked it seen
        f.abort();
        co_await aspen_test::abort_and_join(f);
        co_return digits(seen_while_waiting, rx.has_changed(), *rx.borrow());
    };
    // Resumed at once (no window), changed() was handed out: seen for good.
    EXPECT_EQ(run(rt, body()), scalar_resumes_deferred() ? 115 : 105);
}

// An event wait, a cancellation token's cancelled() and an mpsc sender's
// closed() (all void) in one expression, each completed from another
// thread while it waits (the thread waits for each to be queued, or for
// the task to have moved on, before completing it).
TEST_P(OneExpression, EventTokenAndClosedWaits) {
    any_runtime rt(GetParam());
    aspen::event ev;
    aspen::cancellation_token tok;
    auto [tx, rx] = aspen::mpsc_channel<int>(1);
    std::optional<aspen::mpsc_receiver<int>> held(std::move(rx));
    std::thread other([&] {
        while (ev.waiter_count() == 0) std::this_thread::yield();
        ev.set();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        tok.cancel();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        held.reset();  // the receiver goes: the channel is closed
    });
    auto body = [&]() -> aspen::task<int> {
        auto e = ev.wait();
        auto c = tok.cancelled();
        auto cl = tx.closed();
        int r = digits((co_await e, 1), (co_await c, 2), (co_await cl, 3));
        co_return r * 10 + (ev.is_set() && tok.is_cancelled() && tx.is_closed());
    };
    int r = run(rt, body());
    other.join();
    EXPECT_EQ(r, 1231);
}

// Two sleeps (void) in one expression on the paused clock: the first
// really waits, the second's deadline was set when it was made, so the
// expression ends exactly at the later deadline.
TEST_P(OneExpression, TwoSleepsOnThePausedClock) {
    aspen::config cfg;
    cfg.start_paused = true;
    any_runtime rt(GetParam(), cfg);
    auto body = []() -> aspen::task<long> {
        auto start = aspen::now();
        auto s1 = aspen::sleep(std::chrono::milliseconds(10));
        auto s2 = aspen::sleep(std::chrono::milliseconds(30));
        int r = digits((co_await s1, 1), (co_await s2, 2));
        auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(aspen::now() - start).count();
        co_return r * 1000 + waited;
    };
    EXPECT_EQ(run(rt, body()), 12030);
}

// ---- byte streams: size_t results ------------------------------------------------

// Two read_exact on one pipe in one expression: the first waits for the
// writer (another task); each read gives the read slot back when it
// completes, not in its await_resume, so the second may start while the
// first's result is not taken yet (else it would throw "another read-side
// operation is already in progress").
TEST_P(OneExpression, TwoReadsOnOnePipe) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<std::string> {
        auto [rd, wr] = aspen::pipe();
        auto writer = aspen::spawn([](aspen::pipe_writer w) -> aspen::task<void> {
            co_await aspen::yield_now();
            auto op = w.write_all("abcdef");
            co_await op;
        }(std::move(wr)));
        char b1[4] = {}, b2[4] = {};
        auto r1 = rd.read_exact(b1, 3);
        auto r2 = rd.read_exact(b2, 3);
        int n = digits(static_cast<int>(co_await r1), static_cast<int>(co_await r2));
        co_await writer;
        co_return std::to_string(n) + b1 + b2;
    };
    EXPECT_EQ(run(rt, body()), "33abcdef");
}

// The same on an in-memory duplex stream.
TEST_P(OneExpression, TwoReadsOnADuplex) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<std::string> {
        auto [a, b] = aspen::io::duplex(64);
        auto writer = aspen::spawn([](aspen::io::duplex_stream* s) -> aspen::task<void> {
            co_await aspen::yield_now();
            auto op = s->write_all("uvwxyz", 6);
            co_await op;
        }(&b));
        char b1[4] = {}, b2[4] = {};
        auto r1 = a.read_exact(b1, 3);
        auto r2 = a.read_exact(b2, 3);
        int n = digits(static_cast<int>(co_await r1), static_cast<int>(co_await r2));
        co_await writer;
        co_return std::to_string(n) + b1 + b2;
    };
    EXPECT_EQ(run(rt, body()), "33uvwxyz");
}

// ---- tasks awaited inline: task_local scopes, unconstrained ----------------------

inline aspen::task_local<int> one_expression_key;

aspen::task<int> key_after_a_wait() {
    co_await aspen::yield_now();
    int* v = one_expression_key.try_get();
    co_return v ? *v : 0;
}

// Two scopes, and an unscoped read, in one expression: each body sees its
// own binding only, and none is left bound afterwards.
TEST_P(OneExpression, TaskLocalScopesInOneExpression) {
    any_runtime rt(GetParam());
    auto body = []() -> aspen::task<int> {
        auto s1 = one_expression_key.scope(1, key_after_a_wait());
        auto s2 = one_expression_key.scope(2, key_after_a_wait());
        auto plain = key_after_a_wait();
        int r = digits(co_await std::move(s1), co_await std::move(s2), co_await std::move(plain));
        co_return r * 10 + (one_expression_key.try_get() ? 1 : 0);
    };
    EXPECT_EQ(run(rt, body()), 1200);
}

// An unconstrained body, then a constrained one, in one expression: the
// first spends more than the budget without yielding; the second must be
// constrained again (it sees the budget run out).
TEST_P(OneExpression, UnconstrainedThenConstrained) {
    aspen::config cfg;
    cfg.coop_budget = 4;
    any_runtime rt(GetParam(), cfg);
    auto spend = [](int n) -> aspen::task<int> {
        int done = 0;
        for (; done < n; ++done) {
            if (!aspen::has_budget_remaining()) co_return done;
            co_await aspen::consume_budget();
        }
        co_return done;
    };
    auto body = [&]() -> aspen::task<int> {
        co_await aspen::yield_now();  // a fresh poll: the full budget
        auto free = aspen::unconstrained(spend(9));
        auto bound = spend(9);
        co_return digits(co_await std::move(free), co_await std::move(bound));
    };
    int r = run(rt, body());
    EXPECT_EQ(r / 10, 9);  // never out of budget inside unconstrained
    EXPECT_LT(r % 10, 9);  // constrained again: the budget runs out
}

// consume_budget (void) twice per expression in a loop, on a budget of 4:
// the loop must still yield to another task before it ends (each step
// spends budget).
TEST(OneExpressionCoop, ConsumeBudgetTwicePerExpressionStillYields) {
    int seen_at = aspen_test::coop_yield_point([](int) -> aspen::task<bool> {
        auto a = aspen::consume_budget();
        auto b = aspen::consume_budget();
        co_return digits((co_await a, 1), (co_await b, 2)) == 12;
    });
    EXPECT_GE(seen_at, 1);
    EXPECT_LE(seen_at, 4);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Runtimes, OneExpression, aspen_test::runtime_kinds, aspen_test::kind_name);
