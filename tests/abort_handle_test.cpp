// abort_handle: aborting from another thread, before the start, after the
// end, after the join_handle and the runtime are gone; copies; a task
// aborting itself; races of many aborts with completions counted exactly;
// join_set::spawn's handle (next() throws task_cancelled for that child
// alone, in its turn, also when it never started).
#include <aspen/aspen.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using aspen_test::alive_token;
using aspen_test::any_runtime;
using aspen_test::run_on;

#ifdef ASPEN_SANITIZED
constexpr int many = 500;
#else
constexpr int many = 5000;
#endif

class AbortHandle : public ::testing::TestWithParam<int> {};

aspen::task<int> wait_forever(aspen::event* never, std::atomic<int>* alive, std::atomic<int>* started) {
    alive_token a(alive);
    started->fetch_add(1);
    co_await never->wait();
    co_return 1;
}

aspen::task<int> plain_value(int v) { co_return v; }
aspen::task<int> join_value(aspen::join_handle<int>& h) { co_return co_await h; }

// 0: the task was cancelled, 1: it gave its value; anything else is wrong.
template <class T>
aspen::task<int> outcome_of(aspen::join_handle<T>& h) {
    try {
        (void)co_await h;
        co_return 1;
    } catch (const aspen::task_cancelled&) {
        co_return 0;
    }
}

aspen::task<int> abort_from_thread_body() {
    aspen::event never;
    std::atomic<int> alive{0}, started{0};
    aspen::join_handle<int> h = aspen::spawn(wait_forever(&never, &alive, &started));
    aspen::abort_handle stop = h.abort_handle();
    while (started.load() == 0) co_await aspen::yield_now();  // it waits on the event now
    std::thread t([stop] { stop.abort(); });  // a copy, on a plain thread
    t.join();
    int r = co_await outcome_of(h);
    if (r != 0) co_return 10 + r;
    if (!stop.is_finished()) co_return 2;
    if (alive.load() != 0) co_return 3;  // the frame went with the abort
    co_return 0;
}

TEST_P(AbortHandle, AbortFromAPlainThreadCancelsAWaitingTask) {
    EXPECT_EQ(run_on(GetParam(), abort_from_thread_body(), "abort from thread"), 0);
}

aspen::task<int> abort_before_start_body() {
    aspen::event never;
    std::atomic<int> alive{0}, started{0};
    aspen::join_handle<int> h = aspen::spawn(wait_forever(&never, &alive, &started));
    h.abort_handle().abort();  // still in this worker's next slot: it never starts
    int r = co_await outcome_of(h);
    co_return r * 100 + started.load() * 10 + alive.load();
}

TEST_P(AbortHandle, AbortBeforeTheStartMeansTheBodyNeverRuns) {
    EXPECT_EQ(run_on(GetParam(), abort_before_start_body(), "abort before start"), 0);
}

aspen::task<int> abort_after_end_body() {
    aspen::join_handle<int> h = aspen::spawn(plain_value(7));
    aspen::abort_handle stop = h.abort_handle();
    int v = co_await h;  // the ref of `stop` keeps the child off the adopted path: the general one
    stop.abort();        // finished: nothing happens
    if (!stop.is_finished()) co_return -1;
    co_return v;
}

TEST_P(AbortHandle, AbortAfterTheEndChangesNothing) {
    EXPECT_EQ(run_on(GetParam(), abort_after_end_body(), "abort after end"), 7);
}

// The child aborts itself through its own handle, then reaches a suspension
// point: its frame goes there, the rest of its body never runs.
aspen::task<int> self_aborting(std::shared_ptr<aspen::abort_handle> self, std::atomic<int>* after) {
    while (!self->valid()) co_await aspen::yield_now();
    self->abort();
    co_await aspen::yield_now();
    after->fetch_add(1);
    co_return 1;
}

aspen::task<int> self_abort_body() {
    auto self = std::make_shared<aspen::abort_handle>();
    std::atomic<int> after{0};
    aspen::join_handle<int> h = aspen::spawn(self_aborting(self, &after));
    *self = h.abort_handle();
    int r = co_await outcome_of(h);
    co_return r * 10 + after.load();
}

TEST_P(AbortHandle, ATaskAbortingItselfStopsAtItsNextSuspension) {
    EXPECT_EQ(run_on(GetParam(), self_abort_body(), "self abort"), 0);
}

TEST(AbortHandleValue, CopiesMovesEmptyHandles) {
    aspen::abort_handle empty;
    EXPECT_FALSE(empty.valid());
    EXPECT_FALSE(empty.is_finished());
    empty.abort();  // nothing to abort: no effect
    aspen::join_handle<int> none;
    EXPECT_THROW((void)none.abort_handle(), std::logic_error);

    aspen::runtime rt(aspen_test::workers(2));
    aspen::join_handle<int> h = rt.spawn(plain_value(3));
    aspen::abort_handle a = h.abort_handle();
    aspen::abort_handle b = a;
    EXPECT_TRUE(a == b);
    EXPECT_FALSE(a == empty);
    aspen::abort_handle c = std::move(b);
    EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_TRUE(c == a);
    c = empty;
    EXPECT_FALSE(c.valid());
    EXPECT_EQ(rt.block_on(join_value(h)), 3);
    EXPECT_TRUE(a.is_finished());
}

// The join_handle is dropped (detached), then the runtime is destroyed: the
// abort_handle still works, and at the end it is the last owner of the block
// (LeakSanitizer and ASan check the free).
TEST_P(AbortHandle, OutlivesItsJoinHandleAndItsRuntime) {
    aspen::event never;
    std::atomic<int> alive{0}, started{0};
    aspen::abort_handle waiting, parked;
    {
        any_runtime rt(GetParam());
        waiting = rt->spawn(wait_forever(&never, &alive, &started)).abort_handle();
        parked = rt->spawn(wait_forever(&never, &alive, &started)).abort_handle();
        // Both join_handles are gone: both tasks are detached.
        aspen_test::within(std::chrono::seconds(60), "both started", [&] {
            while (started.load() != 2 && GetParam() != 0) std::this_thread::yield();
        });
        waiting.abort();
        if (GetParam() != 0) {
            aspen_test::within(std::chrono::seconds(60), "abort lands", [&] {
                while (!waiting.is_finished()) std::this_thread::yield();
            });
            EXPECT_EQ(alive.load(), 1);
        }
        EXPECT_FALSE(parked.is_finished());
    }  // the runtime's end destroys `parked`
    EXPECT_TRUE(waiting.is_finished());
    EXPECT_TRUE(parked.is_finished());
    EXPECT_EQ(alive.load(), 0);
    parked.abort();  // finished, runtime gone: nothing happens
}

// Every value or task_cancelled a task gave, counted: values equal the
// bodies that finished, and values + cancels equal the tasks.
void expect_each_counted_once(int values, int finished, int cancels) {
    EXPECT_EQ(values, finished);
    EXPECT_EQ(values + cancels, many);
}

aspen::task<int> yield_then_value(int yields, std::atomic<int>* finished) {
    for (int i = 0; i < yields; ++i) co_await aspen::yield_now();
    finished->fetch_add(1);
    co_return 1;
}

// Plain threads abort every other task while the tasks run and finish:
// each task either finished its body and gave its value, or was cancelled
// without finishing it; nothing is counted twice or lost.
aspen::task<int> abort_race_body(std::atomic<int>* finished, int* cancelled) {
    std::vector<aspen::join_handle<int>> hs;
    std::vector<aspen::abort_handle> stops;
    for (int i = 0; i < many; ++i) {
        hs.push_back(aspen::spawn(yield_then_value(i % 7, finished)));
        if (i % 2 == 0) stops.push_back(hs.back().abort_handle());
    }
    std::thread t1([&] {
        for (std::size_t i = 0; i < stops.size(); i += 2) stops[i].abort();
    });
    std::thread t2([&] {
        for (std::size_t i = 1; i < stops.size(); i += 2) stops[i].abort();
    });
    int values = 0;
    for (auto& h : hs) {
        int r = co_await outcome_of(h);
        values += r;
        if (r == 0) ++*cancelled;
    }
    t1.join();
    t2.join();
    co_return values;
}

TEST_P(AbortHandle, AbortsRacingWithCompletionsAreCountedExactly) {
    std::atomic<int> finished{0};
    int cancelled = 0;
    int values = run_on(GetParam(), abort_race_body(&finished, &cancelled), "abort race");
    expect_each_counted_once(values, finished.load(), cancelled);
    EXPECT_GE(values, many / 2);  // the odd ones have no abort_handle
}

// ---- join_set::spawn's handle ---------------------------------------------------

// Takes every result of the set: the sum of the values; cancelled children
// are counted into *cancels.
aspen::task<int> drain(aspen::join_set<int>& set, int* cancels) {
    int values = 0;
    for (;;) {
        try {
            std::optional<int> v = co_await set.next();
            if (!v) co_return values;
            values += *v;
        } catch (const aspen::task_cancelled&) {
            ++*cancels;
        }
    }
}

aspen::task<int> join_set_abort_body(std::atomic<int>* alive) {
    aspen::event never;
    std::atomic<int> started{0};
    aspen::join_set<int> set;
    aspen::abort_handle stuck = set.spawn(wait_forever(&never, alive, &started));
    aspen::abort_handle unstarted = set.spawn(wait_forever(&never, alive, &started));
    unstarted.abort();  // before it ran: its report comes from the frame's end
    aspen::abort_handle done = set.spawn(plain_value(5));
    set.spawn(plain_value(6));
    int cancels = 0;
    std::thread t([stuck] { stuck.abort(); });
    int values = co_await drain(set, &cancels);
    t.join();
    done.abort();  // finished and taken: nothing happens
    if (!set.empty()) co_return -1;
    co_return values * 10 + cancels;  // 11 and 2
}

TEST_P(AbortHandle, JoinSetChildAbortedThroughItsHandleGivesTaskCancelledOnce) {
    std::atomic<int> alive{0};
    EXPECT_EQ(run_on(GetParam(), join_set_abort_body(&alive), "join_set abort"), 112);
    EXPECT_EQ(alive.load(), 0);
}

// After abort_all the set forgot its children: their handles' aborts, and
// the cancelled reports they make, change nothing.
aspen::task<int> join_set_forgotten_body(std::atomic<int>* alive) {
    aspen::event never;
    std::atomic<int> started{0};
    aspen::join_set<int> set;
    std::vector<aspen::abort_handle> hs;
    for (int i = 0; i < 8; ++i) hs.push_back(set.spawn(wait_forever(&never, alive, &started)));
    set.abort_all();
    for (auto& h : hs) h.abort();
    set.spawn(plain_value(9));
    std::optional<int> v = co_await set.next();
    std::optional<int> end = co_await set.next();
    co_await set.shutdown();
    co_return (v ? *v : -1) * 10 + (end ? 1 : 0);
}

TEST_P(AbortHandle, JoinSetChildrenForgottenByAbortAllReportNothing) {
    std::atomic<int> alive{0};
    EXPECT_EQ(run_on(GetParam(), join_set_forgotten_body(&alive), "join_set forgotten"), 90);
    EXPECT_EQ(alive.load(), 0);
}

// Many children, every third aborted by a plain thread while next() runs:
// values + cancels account for every child exactly once.
aspen::task<int> join_set_race_body(std::atomic<int>* finished, int* cancels) {
    aspen::join_set<int> set;
    std::vector<aspen::abort_handle> hs;
    for (int i = 0; i < many; ++i) {
        aspen::abort_handle h = set.spawn(yield_then_value(i % 5, finished));
        if (i % 3 == 0) hs.push_back(std::move(h));
    }
    std::thread t([&] {
        for (auto& h : hs) h.abort();
    });
    int values = co_await drain(set, cancels);
    t.join();
    co_return values;
}

TEST_P(AbortHandle, JoinSetAbortsRacingWithCompletionsAreCountedExactly) {
    std::atomic<int> finished{0};
    int cancels = 0;
    int values = run_on(GetParam(), join_set_race_body(&finished, &cancels), "join_set race");
    expect_each_counted_once(values, finished.load(), cancels);
}

INSTANTIATE_TEST_SUITE_P(Kinds, AbortHandle, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
