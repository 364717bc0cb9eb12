// spawn_blocking: values and exceptions through join_handle, the pool's
// limits and keep-alive, abort before and while running, and shutdown (which
// waits for running functions; shutdown_timeout leaves them and says so).
#include <aspen/aspen.hpp>

#include "blocking/blocking_pool.hpp"
#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;
using aspen_test::workers;

// A gate plain threads block on (never spin): blocking functions wait here
// until the test opens it.
class thread_gate {
public:
    void open() {
        {
            std::lock_guard g(m_);
            open_ = true;
        }
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock g(m_);
        cv_.wait(g, [&] { return open_; });
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool open_ = false;
};

// Counts up; waiters block until it reaches a value.
class thread_counter {
public:
    void add() {
        {
            std::lock_guard g(m_);
            ++n_;
        }
        cv_.notify_all();
    }
    void wait_for(int n) {
        std::unique_lock g(m_);
        cv_.wait(g, [&] { return n_ >= n; });
    }
    int get() {
        std::lock_guard g(m_);
        return n_;
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_ = 0;
};

// Threads of shut-down pools end just after shutdown returns; tests that
// count threads start from none.
void wait_no_blocking_threads() {
    while (aspen::detail::blocking_threads_alive() != 0) std::this_thread::sleep_for(1ms);
}

using rt_holder = aspen_test::any_runtime;

class Blocking : public ::testing::TestWithParam<int> {};

aspen::task<int> value_and_error_body() {
    int v = co_await aspen::spawn_blocking([] { return 6 * 7; });
    auto p = co_await aspen::spawn_blocking([] { return std::make_unique<int>(5); });  // move-only
    bool ran = false;
    co_await aspen::spawn_blocking([&] { ran = true; });
    auto bad = aspen::spawn_blocking([]() -> int { throw std::runtime_error("boom"); });
    std::string what;
    try {
        co_await bad;
    } catch (const std::runtime_error& e) {
        what = e.what();
    }
    co_return v + *p + (ran ? 100 : 0) + (what == "boom" ? 1000 : 0);
}

TEST_P(Blocking, ValueVoidMoveOnlyAndExceptionReachTheAwaiter) {
    rt_holder rt(GetParam());
    int r = 0;
    within(60s, "spawn_blocking values", [&] { r = rt->block_on(value_and_error_body()); });
    EXPECT_EQ(r, 42 + 5 + 100 + 1000);
}

aspen::task<int> await_handle(aspen::join_handle<int> h) { co_return co_await h; }

TEST_P(Blocking, SpawnBlockingFromOutsideTheRuntime) {
    rt_holder rt(GetParam());
    auto h = rt->spawn_blocking([] { return 9; });
    int r = 0;
    within(60s, "rt.spawn_blocking", [&] { r = rt->block_on(await_handle(std::move(h))); });
    EXPECT_EQ(r, 9);
}

#ifdef ASPEN_SANITIZED
constexpr int blocked_tasks = 200;  // sanitizers pay per thread
#else
constexpr int blocked_tasks = 1000;
#endif

aspen::task<void> child(std::atomic<int>* done) {
    co_await aspen::yield_now();
    done->fetch_add(1);
}

// Every blocking function sleeps until the async side has finished all its
// work: if blocking functions held up the workers, the async side could not
// finish and the watchdog would fire.
aspen::task<int> async_work_while_blocked(thread_gate* release, thread_counter* started,
                                          std::vector<aspen::join_handle<void>>* handles, int n, int max_threads) {
    for (int i = 0; i < n; ++i)
        handles->push_back(aspen::spawn_blocking([release, started] {
            started->add();
            release->wait();
        }));
    started->wait_for(std::min(n, max_threads));  // the pool is full of sleepers now
    std::atomic<int> done{0};
    std::vector<aspen::join_handle<void>> kids;
    for (int i = 0; i < 10000; ++i) kids.push_back(aspen::spawn(child(&done)));
    for (auto& k : kids) co_await k;
    co_return done.load();
}

aspen::task<int> join_all(std::vector<aspen::join_handle<void>>* handles) {
    int n = 0;
    for (auto& h : *handles) {
        co_await h;
        ++n;
    }
    co_return n;
}

TEST_P(Blocking, SleepingBlockingTasksDoNotStallAsyncTasks) {
    wait_no_blocking_threads();
    aspen::config cfg;
    rt_holder rt(GetParam(), cfg);
    thread_gate release;
    thread_counter started;
    std::vector<aspen::join_handle<void>> handles;
    int async_done = 0, joined = 0;
    int max_threads = static_cast<int>(cfg.max_blocking_threads);
    within(120s, "async work beside blocked pool", [&] {
        async_done = rt->block_on(async_work_while_blocked(&release, &started, &handles, blocked_tasks, max_threads));
    });
    EXPECT_EQ(async_done, 10000);
    // The pool grew to its limit and no further.
    EXPECT_EQ(started.get(), std::min(blocked_tasks, max_threads));
    EXPECT_EQ(aspen::detail::blocking_threads_alive(), static_cast<std::size_t>(std::min(blocked_tasks, max_threads)));
    release.open();
    within(120s, "joining blocking tasks", [&] { joined = rt->block_on(join_all(&handles)); });
    EXPECT_EQ(joined, blocked_tasks);
    EXPECT_EQ(started.get(), blocked_tasks);
}

TEST_P(Blocking, PoolStopsGrowingAtMaxAndQueuesTheRest) {
    wait_no_blocking_threads();
    aspen::config cfg;
    cfg.max_blocking_threads = 3;
    rt_holder rt(GetParam(), cfg);
    thread_gate release;
    thread_counter started;
    std::vector<aspen::join_handle<void>> handles;
    for (int i = 0; i < 10; ++i)
        handles.push_back(rt->spawn_blocking([&] {
            started.add();
            release.wait();
        }));
    within(60s, "three blocking threads start", [&] { started.wait_for(3); });
    EXPECT_EQ(aspen::detail::blocking_threads_alive(), 3u);
    EXPECT_EQ(started.get(), 3);  // the other 7 cannot start: every thread sleeps
    release.open();
    int joined = 0;
    within(60s, "joining queued blocking tasks", [&] { joined = rt->block_on(join_all(&handles)); });
    EXPECT_EQ(joined, 10);
    EXPECT_EQ(started.get(), 10);
}

TEST(BlockingPool, IdleThreadsEndAfterKeepAlive) {
    wait_no_blocking_threads();
    aspen::config cfg = workers(1);
    cfg.blocking_keep_alive = 20ms;
    aspen::runtime rt(cfg);
    thread_gate release;
    thread_counter started;
    std::vector<aspen::join_handle<void>> handles;
    for (int i = 0; i < 4; ++i)
        handles.push_back(rt.spawn_blocking([&] {
            started.add();
            release.wait();
        }));
    within(60s, "four blocking threads start", [&] { started.wait_for(4); });
    EXPECT_EQ(aspen::detail::blocking_threads_alive(), 4u);
    release.open();
    within(60s, "joining", [&] { rt.block_on(join_all(&handles)); });
    // With the runtime still alive, the threads end by themselves.
    within(60s, "idle blocking threads end", [] { wait_no_blocking_threads(); });
    // And the pool starts a new one when work comes again.
    int v = 0;
    within(60s, "after keep-alive", [&] { v = rt.block_on(await_handle(rt.spawn_blocking([] { return 3; }))); });
    EXPECT_EQ(v, 3);
}

// The longest keep-alive the config takes (nanoseconds::max()) keeps an
// idle thread until shutdown. Its deadline once overflowed the clock: the
// thread ended at once (and UBSan reports the signed overflow).
TEST(BlockingPool, TheLongestKeepAliveKeepsTheThreadUntilShutdown) {
    wait_no_blocking_threads();
    aspen::config cfg = workers(1);
    cfg.blocking_keep_alive = std::chrono::nanoseconds::max();
    {
        aspen::runtime rt(cfg);
        int v = 0;
        within(60s, "one blocking call", [&] { v = rt.block_on(await_handle(rt.spawn_blocking([] { return 5; }))); });
        EXPECT_EQ(v, 5);
        std::this_thread::sleep_for(50ms);  // an ended thread would be gone by now
        EXPECT_EQ(aspen::detail::blocking_threads_alive(), 1u);
    }
    within(60s, "shutdown ends the kept thread", [] { wait_no_blocking_threads(); });
}

aspen::task<bool> is_cancelled(aspen::join_handle<void> h) {
    try {
        co_await h;
    } catch (const aspen::task_cancelled&) {
        co_return true;
    }
    co_return false;
}

TEST_P(Blocking, AbortBeforeStartMeansItNeverRuns) {
    aspen::config cfg;
    cfg.max_blocking_threads = 1;
    rt_holder rt(GetParam(), cfg);
    thread_gate release;
    thread_counter started;
    std::atomic<int> second_ran{0};
    auto first = rt->spawn_blocking([&] {
        started.add();
        release.wait();
    });
    within(60s, "first blocking task starts", [&] { started.wait_for(1); });
    auto second = rt->spawn_blocking([&] { second_ran.fetch_add(1); });  // queued behind the first
    second.abort();
    bool cancelled = false;
    within(60s, "awaiting the aborted handle", [&] { cancelled = rt->block_on(is_cancelled(std::move(second))); });
    EXPECT_TRUE(cancelled);
    release.open();
    bool first_cancelled = true;
    within(60s, "first finishes", [&] { first_cancelled = rt->block_on(is_cancelled(std::move(first))); });
    EXPECT_FALSE(first_cancelled);
    rt->shutdown();  // waits for the pool: had the second started, it would have run by now
    EXPECT_EQ(second_ran.load(), 0);
}

TEST_P(Blocking, AbortWhileRunningCannotInterruptIt) {
    rt_holder rt(GetParam());
    thread_gate release;
    thread_counter started;
    std::atomic<int> finished{0};
    auto payload = std::make_shared<int>(1);
    std::weak_ptr<int> watch = payload;
    auto h = rt->spawn_blocking([&, payload = std::move(payload)] {
        started.add();
        release.wait();
        finished.fetch_add(1);
    });
    within(60s, "blocking task starts", [&] { started.wait_for(1); });
    h.abort();
    bool cancelled = false;
    // The handle reports the cancel at once, while the function still runs.
    within(60s, "awaiting the aborted running handle", [&] { cancelled = rt->block_on(is_cancelled(std::move(h))); });
    EXPECT_TRUE(cancelled);
    EXPECT_EQ(finished.load(), 0);
    EXPECT_FALSE(watch.expired());  // the function (and what it captured) is still alive
    release.open();
    rt->shutdown();  // waits for the running function
    EXPECT_EQ(finished.load(), 1);
    EXPECT_TRUE(watch.expired());  // destroyed once it returned
}

TEST_P(Blocking, ShutdownWaitsForRunningAndCancelsQueued) {
    aspen::config cfg;
    cfg.max_blocking_threads = 2;
    rt_holder rt(GetParam(), cfg);
    thread_gate release;
    thread_counter started;
    std::atomic<int> finished{0}, queued_ran{0};
    std::vector<aspen::join_handle<void>> handles;
    for (int i = 0; i < 2; ++i)
        handles.push_back(rt->spawn_blocking([&] {
            started.add();
            release.wait();
            finished.fetch_add(1);
        }));
    for (int i = 0; i < 5; ++i) handles.push_back(rt->spawn_blocking([&] { queued_ran.fetch_add(1); }));
    within(60s, "two blocking tasks start", [&] { started.wait_for(2); });
    std::thread opener([&] {
        // Open only once shutdown has cancelled the queued jobs' tasks: from
        // then on the pool can no longer start them, and shutdown goes on to
        // wait for the two running ones. (A fixed 20 ms sleep here raced
        // with a slow shutdown on a loaded machine: the queued jobs ran.)
        for (std::size_t i = 2; i < handles.size(); ++i)
            while (!handles[i].is_finished()) std::this_thread::sleep_for(1ms);
        release.open();
    });
    within(60s, "shutdown", [&] { rt->shutdown(); });
    EXPECT_EQ(finished.load(), 2);  // shutdown returned only after they did
    EXPECT_EQ(queued_ran.load(), 0);
    opener.join();
    within(60s, "blocking threads end", [] { wait_no_blocking_threads(); });
}

TEST_P(Blocking, ShutdownTimeoutReturnsWithTasksStillBlocked) {
    wait_no_blocking_threads();
    thread_gate release;
    thread_counter started;
    std::atomic<int> finished{0}, queued_ran{0};
    std::size_t left = 0;
    {
        aspen::config cfg;
        cfg.max_blocking_threads = 3;
        rt_holder rt(GetParam(), cfg);
        std::vector<aspen::join_handle<void>> handles;
        for (int i = 0; i < 3; ++i)
            handles.push_back(rt->spawn_blocking([&] {
                started.add();
                release.wait();
                finished.fetch_add(1);
            }));
        handles.push_back(rt->spawn_blocking([&] { queued_ran.fetch_add(1); }));
        within(60s, "three blocking tasks start", [&] { started.wait_for(3); });
        within(60s, "shutdown_timeout", [&] { left = rt->shutdown_timeout(30ms); });
        EXPECT_EQ(left, 3u);
        EXPECT_EQ(finished.load(), 0);
        // A second shutdown (here: the destructor) does not wait for them either.
    }
    EXPECT_EQ(finished.load(), 0);
    release.open();
    // The runtime is gone; the functions finish on their own threads and the
    // threads end without touching it (ASan checks).
    within(60s, "left-behind blocking threads end", [] { wait_no_blocking_threads(); });
    EXPECT_EQ(finished.load(), 3);
    EXPECT_EQ(queued_ran.load(), 0);
}

TEST_P(Blocking, ShutdownTimeoutWithNothingRunningReturnsZero) {
    rt_holder rt(GetParam());
    int v = 0;
    within(60s, "one blocking task", [&] { v = rt->block_on(await_handle(rt->spawn_blocking([] { return 1; }))); });
    EXPECT_EQ(v, 1);
    std::size_t left = 99;
    within(60s, "shutdown_timeout", [&] { left = rt->shutdown_timeout(10s); });
    EXPECT_EQ(left, 0u);
}

aspen::task<void> detach_failing(std::atomic<int>* reported) {
    aspen::spawn_blocking([]() -> int { throw std::runtime_error("x"); }).detach();
    while (reported->load() == 0) co_await aspen::yield_now();
}

TEST_P(Blocking, DetachedExceptionReportedWhileRunning) {
    std::atomic<int> reported{0};
    aspen::config cfg;
    cfg.unhandled_exception_handler = [&](std::exception_ptr) { reported.fetch_add(1); };
    rt_holder rt(GetParam(), cfg);
    within(60s, "report", [&] { rt->block_on(detach_failing(&reported)); });
    EXPECT_EQ(reported.load(), 1);
}

TEST(BlockingPool, Misuse) {
    EXPECT_THROW((void)aspen::spawn_blocking([] {}), std::logic_error);
    aspen::config cfg;
    cfg.max_blocking_threads = 0;
    try {
        aspen::runtime rt(cfg);
        FAIL() << "max_blocking_threads = 0 accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("max_blocking_threads"), std::string::npos);
    }
    cfg = aspen::config{};
    cfg.blocking_keep_alive = -1ms;
    try {
        aspen::current_thread_runtime rt(cfg);
        FAIL() << "negative blocking_keep_alive accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("blocking_keep_alive"), std::string::npos);
    }
    aspen::runtime rt(workers(1));
    rt.shutdown();
    std::atomic<int> ran{0};
    EXPECT_THROW((void)rt.spawn_blocking([&] { ran.fetch_add(1); }), aspen::runtime_shut_down);
    EXPECT_EQ(ran.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Runtimes, Blocking, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
