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
        waiting->store(true);
        return aspen::pending;
    });
}

// Two joined children (adopted where nothing else took them first) and a
// wait that never ends, in one expression; the joiner is aborted while it
// waits, so neither join's await_resume ever runs. Both children still
// complete: nothing is left alive, and the exception the second one threw,
// which nobody observed, goes to the unhandled-exception handler as any
// unobserved exception of a task whose handle was dropped.
TEST_P(OneExpression, JoinerAbortedBeforeTheJoinsResume) {
    std::atomic<int> reported{0};
    aspen::config cfg;
    cfg.unhandled_exception_handler = [&](std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::runtime_error& err) {
            if (std::string(err.what()) == "thrown by a joined child") reported.fetch_add(1);
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
        while (!waiting.load()) co_await aspen::yield_now();
        j.abort();
        try {
            (void)co_await j;
        } catch (const aspen::task_cancelled&) {
            co_return 1;
        }
        co_return 0;
    };
    EXPECT_EQ(run(rt, body()), 1);
    EXPECT_EQ(rt->metrics().tasks_alive, 0u);
    EXPECT_EQ(reported.load(), 1);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Runtimes, OneExpression, aspen_test::runtime_kinds, aspen_test::kind_name);
