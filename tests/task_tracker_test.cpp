// aspen::task_tracker on every runtime kind: wait() ends exactly when the
// tracker is closed and every counted task has ended (finished, thrown,
// aborted, destroyed at shutdown), waits while it is open, and tasks may
// outlive the tracker.
#include "runtime_kinds.hpp"

#include <aspen/task_tracker.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

using namespace std::chrono_literals;
using aspen::task;

namespace {

class TaskTracker : public ::testing::TestWithParam<int> {};

task<void> sleep_then_count(std::chrono::milliseconds d, std::atomic<int>& done) {
    co_await aspen::sleep(d);
    done.fetch_add(1);
}

// 100 detached tasks of different lengths: wait() returns only after the
// last has ended.
TEST_P(TaskTracker, WaitEndsWhenClosedAndEveryTaskEnded) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::task_tracker tracker;
            std::atomic<int> done{0};
            for (int i = 0; i < 100; ++i)
                tracker.spawn(sleep_then_count(std::chrono::milliseconds(i % 7), done)).detach();
            EXPECT_GT(tracker.size(), 0u);
            tracker.close();
            co_await tracker.wait();
            EXPECT_EQ(done.load(), 100);
            EXPECT_TRUE(tracker.empty());
            EXPECT_TRUE(tracker.is_closed());
        }(),
        "wait");
}

// Open, wait() waits even with no task; after close() it completes at
// once; reopen() makes it wait again.
TEST_P(TaskTracker, WaitWaitsWhileOpen) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::task_tracker tracker;
            bool timed_out = false;
            try {
                co_await aspen::timeout(20ms, tracker.wait());
            } catch (const aspen::timed_out&) {
                timed_out = true;
            }
            EXPECT_TRUE(timed_out);
            tracker.close();
            co_await tracker.wait();
            tracker.reopen();
            timed_out = false;
            try {
                co_await aspen::timeout(20ms, tracker.wait());
            } catch (const aspen::timed_out&) {
                timed_out = true;
            }
            EXPECT_TRUE(timed_out);
        }(),
        "open");
}

// A task that throws and one that is aborted are uncounted as they end; a
// handle still works as a spawned task's.
TEST_P(TaskTracker, ThrowingAndAbortedTasksEndTheirCount) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::task_tracker tracker;
            auto thrower = tracker.spawn([]() -> task<int> {
                co_await aspen::yield_now();
                throw std::runtime_error("boom");
            }());
            auto sleeper = tracker.spawn([]() -> task<void> { co_await aspen::sleep(std::chrono::hours(1)); }());
            bool threw = false;
            try {
                (void)co_await thrower;
            } catch (const std::runtime_error&) {
                threw = true;
            }
            EXPECT_TRUE(threw);
            EXPECT_EQ(tracker.size(), 1u);
            co_await aspen_test::abort_and_join(sleeper);
            EXPECT_EQ(tracker.size(), 0u);
            tracker.close();
            co_await tracker.wait();
        }(),
        "throw and abort");
}

// The tracker goes before its task ends: the task finishes normally.
TEST_P(TaskTracker, TasksMayOutliveTheTracker) {
    std::atomic<int> done{0};
    aspen_test::run_on(
        GetParam(),
        [](std::atomic<int>& done) -> task<void> {
            aspen::join_handle<void> h;
            {
                aspen::task_tracker tracker;
                h = tracker.spawn(sleep_then_count(5ms, done));
            }
            co_await h;
        }(done),
        "outlive");
    EXPECT_EQ(done.load(), 1);
}

// Shutdown destroys a tracked task that never ends: its count goes too.
TEST_P(TaskTracker, ShutdownEndsTheCountOfTasksItDestroys) {
    aspen::task_tracker tracker;  // outlives the runtime
    {
        aspen_test::any_runtime rt(GetParam());
        rt->block_on([](aspen::task_tracker& t) -> task<void> {
            t.spawn([]() -> task<void> { co_await aspen::sleep(std::chrono::hours(1)); }()).detach();
            co_return;
        }(tracker));
        EXPECT_EQ(tracker.size(), 1u);
    }
    EXPECT_EQ(tracker.size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, TaskTracker, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
