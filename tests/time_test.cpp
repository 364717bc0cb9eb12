// The public time API: sleep, timeout, interval, the paused clock, and the
// timers' interplay with the scheduler (driver parking, coop budget,
// shutdown). No test asserts an upper bound on wall time; "never early" is
// a lower bound and holds on any machine.
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <aspen/aspen.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen_test::within;
using aspen_test::workers;

namespace {

aspen::config paused(std::size_t n) {
    aspen::config c = workers(n);
    c.start_paused = true;
    return c;
}

// Builds a multi-threaded runtime of n workers, or a current_thread_runtime
// for n == 0, and returns use(rt).
template <class F>
auto on_runtime(std::size_t n, const aspen::config& c, F use) {
    if (n == 0) {
        aspen::current_thread_runtime rt(c);
        return use(rt);
    }
    aspen::runtime rt(c);
    return use(rt);
}

// Runs body on the runtime for n (as on_runtime).
template <class T>
T run_on(std::size_t n, const aspen::config& c, aspen::task<T> body) {
    return on_runtime(n, c, [&](auto& rt) { return rt.block_on(std::move(body)); });
}

class TimeWorkers : public ::testing::TestWithParam<std::size_t> {};
// The name is appended, not built with "w" + ...: that form trips g++ 12's
// -Wrestrict false positive (char_traits' memcpy) depending on inlining.
INSTANTIATE_TEST_SUITE_P(Workers, TimeWorkers, ::testing::Values(0u, 1u, 2u, 8u), [](const auto& info) {
    if (info.param == 0) return std::string("current_thread");
    std::string name = "w";
    name.append(std::to_string(info.param));
    return name;
});

TEST_P(TimeWorkers, SleepNeverWakesEarly) {
    auto body = []() -> aspen::task<void> {
        for (auto d : {1ms, 5ms, 20ms}) {
            auto start = std::chrono::steady_clock::now();
            co_await aspen::sleep(d);
            EXPECT_GE(std::chrono::steady_clock::now() - start, d);
        }
    };
    within(60s, "real-clock sleeps", [&] { run_on(GetParam(), workers(GetParam() ? GetParam() : 1), body()); });
}

TEST_P(TimeWorkers, SleepsFinishInDeadlineOrder) {
    // Paused clock: the order is decided by the deadlines alone.
    std::mutex m;
    std::vector<int> order;
    auto sleeper = [&](int ms) -> aspen::task<void> {
        co_await aspen::sleep(std::chrono::milliseconds(ms));
        std::lock_guard lock(m);
        order.push_back(ms);
    };
    auto body = [&]() -> aspen::task<void> {
        std::vector<aspen::join_handle<void>> hs;
        for (int ms : {50, 10, 40, 20, 30, 70, 60}) hs.push_back(aspen::spawn(sleeper(ms)));
        for (auto& h : hs) co_await h;
    };
    within(60s, "paused sleeps", [&] { run_on(GetParam(), paused(GetParam() ? GetParam() : 1), body()); });
    EXPECT_EQ(order, (std::vector<int>{10, 20, 30, 40, 50, 60, 70}));
}

TEST_P(TimeWorkers, PausedClockJumpsToTheNextTimerWhenIdle) {
    auto body = []() -> aspen::task<aspen::clock::duration> {
        auto start = aspen::now();
        co_await aspen::sleep(3h);
        co_return aspen::now() - start;
    };
    aspen::clock::duration slept{};
    // Three hours of timers: only a paused clock finishes within the watchdog.
    within(60s, "a 3h sleep on the paused clock", [&] { slept = run_on(GetParam(), paused(GetParam() ? GetParam() : 1), body()); });
    EXPECT_GE(slept, 3h);
    EXPECT_LT(slept, 3h + 1ms);  // the clock moved to the deadline, not past it
}

// Builds the runtime for n (as on_runtime) and block_on(make(rt)).
template <class F>
auto with_runtime(std::size_t n, const aspen::config& c, F make) {
    return on_runtime(n, c, [&](auto& rt) { return rt.block_on(make(rt)); });
}

std::size_t cfg_workers(std::size_t n) { return n ? n : 1; }

TEST_P(TimeWorkers, AdvanceFiresExactlyWhatBecameDue) {
    std::atomic<int> fired{0};
    auto sleeper = [&](std::chrono::milliseconds d) -> aspen::task<void> {
        co_await aspen::sleep(d);
        fired.fetch_add(1);
    };
    auto make = [&](auto& rt) -> aspen::task<void> {
        auto a = aspen::spawn(sleeper(10ms));
        auto b = aspen::spawn(sleeper(30ms));
        // Busy-yield (never idle, so the clock cannot jump by itself) until
        // both timers are armed.
        while (rt.metrics().timers_armed < 2) co_await aspen::yield_now();
        co_await aspen::advance(9ms);
        EXPECT_EQ(fired.load(), 0);  // 1 ms before the first deadline
        co_await aspen::advance(1ms);
        while (fired.load() < 1) co_await aspen::yield_now();
        co_await aspen::advance(19ms);
        EXPECT_EQ(fired.load(), 1);
        co_await aspen::advance(1ms);
        co_await a;
        co_await b;
        EXPECT_EQ(rt.metrics().timers_armed, 0u);
    };
    within(60s, "advance", [&] { with_runtime(GetParam(), paused(cfg_workers(GetParam())), make); });
    EXPECT_EQ(fired.load(), 2);
}

TEST_P(TimeWorkers, TimeoutThrowsAndCancelsTheOperation) {
    struct flag_on_destroy {
        std::atomic<bool>* f;
        ~flag_on_destroy() { f->store(true); }
    };
    std::atomic<bool> destroyed{false};
    auto slow = [&]() -> aspen::task<int> {
        flag_on_destroy guard{&destroyed};
        co_await aspen::sleep(10s);
        co_return 1;
    };
    auto make = [&](auto& rt) -> aspen::task<void> {
        EXPECT_THROW(co_await aspen::timeout(1s, slow()), aspen::timed_out);
        // The child's frame is gone and so is its timer (and ours).
        EXPECT_TRUE(destroyed.load());
        EXPECT_EQ(rt.metrics().timers_armed, 0u);
        // In time: the value comes through and no timer is left either.
        int v = co_await aspen::timeout(10s, []() -> aspen::task<int> {
            co_await aspen::sleep(1s);
            co_return 7;
        }());
        EXPECT_EQ(v, 7);
        EXPECT_EQ(rt.metrics().timers_armed, 0u);
        // An exception of the operation is the operation's, not a timeout.
        EXPECT_THROW(co_await aspen::timeout(1s, []() -> aspen::task<void> {
            throw std::runtime_error("inner");
            co_return;
        }()),
                     std::runtime_error);
        // Any movable awaitable, here a sleep.
        EXPECT_THROW(co_await aspen::timeout(1s, aspen::sleep(2s)), aspen::timed_out);
        // With a deadline: the same; one already past times out at once.
        auto start = aspen::now();
        EXPECT_THROW(co_await aspen::timeout_at(start + 1s, aspen::sleep(2s)), aspen::timed_out);
        EXPECT_TRUE(aspen::now() - start == 1s);  // the paused clock stopped at the deadline
        co_await aspen::timeout_at(aspen::now() + 2s, aspen::sleep(1s));
        EXPECT_EQ(co_await aspen::timeout_at(aspen::now() + 1s, []() -> aspen::task<int> { co_return 3; }()), 3);
        EXPECT_THROW(co_await aspen::timeout_at(aspen::now() - 1s, aspen::sleep(1ms)), aspen::timed_out);
        EXPECT_EQ(rt.metrics().timers_armed, 0u);
    };
    within(60s, "timeouts", [&] { with_runtime(GetParam(), paused(cfg_workers(GetParam())), make); });
}

TEST_P(TimeWorkers, IntervalMissedTickPolicies) {
    using aspen::missed_tick;
    struct expect {
        missed_tick policy;
        std::vector<long> ticks_ms;  // scheduled times of ticks 2..4, from the start
    };
    // Tick 1 at 0; then the task is busy for 35 ms; then three more ticks.
    for (const expect& e : {expect{missed_tick::burst, {10, 20, 30}}, expect{missed_tick::skip, {10, 40, 50}},
                            expect{missed_tick::delay, {10, 45, 55}}}) {
        auto make = [&](auto&) -> aspen::task<std::vector<long>> {
            auto start = aspen::now();
            aspen::interval every(start, 10ms, e.policy);
            EXPECT_EQ(co_await every.tick(), start);  // the first tick is at once
            co_await aspen::advance(35ms);            // busy: ticks are missed
            std::vector<long> got;
            for (int i = 0; i < 3; ++i) {
                auto t = co_await every.tick();
                got.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(t - start).count());
            }
            co_return got;
        };
        std::vector<long> got;
        within(60s, "interval", [&] { got = with_runtime(GetParam(), paused(cfg_workers(GetParam())), make); });
        EXPECT_EQ(got, e.ticks_ms) << "policy " << static_cast<int>(e.policy);
    }
}

TEST_P(TimeWorkers, SelectWithASleepBranch) {
    // A receive with a deadline: the sleep wins while nothing is sent (and
    // the losing receive takes nothing), the receive wins once a value is
    // there (and the losing sleep leaves no timer armed).
    auto make = [](auto& rt) -> aspen::task<void> {
        auto [tx, rx] = aspen::mpsc_channel<int>(4);
        auto r1 = co_await aspen::select(rx.recv(), aspen::sleep(50ms));
        EXPECT_EQ(r1.index, 1u);
        EXPECT_EQ(rt.metrics().timers_armed, 0u);
        EXPECT_FALSE(tx.try_send(7).has_value());
        auto r2 = co_await aspen::select(rx.recv(), aspen::sleep(50ms));
        EXPECT_EQ(r2.index, 0u);
        EXPECT_EQ(std::get<0>(r2.value), std::optional<int>(7));
        EXPECT_EQ(rt.metrics().timers_armed, 0u);
    };
    within(60s, "select with a sleep", [&] { with_runtime(GetParam(), paused(cfg_workers(GetParam())), make); });
}

TEST_P(TimeWorkers, PausedClockWaitsForBlockingFunctions) {
    // A blocking function is work the runtime waits for: the idle runtime
    // must not jump the paused clock past a timeout while it runs (else the
    // timeout below would fire at once). When it ends, the clock may jump
    // again: the detached function's end must not leave the sleep hanging.
    auto make = [](auto&) -> aspen::task<int> {
        auto slow = aspen::spawn_blocking([] {
            std::this_thread::sleep_for(30ms);  // real time
            return 7;
        });
        int v = co_await aspen::timeout(1s, [](aspen::join_handle<int> h) -> aspen::task<int> {
            co_return co_await h;
        }(std::move(slow)));
        auto detached = aspen::spawn_blocking([] { std::this_thread::sleep_for(10ms); });
        detached.detach();
        co_await aspen::sleep(1h);  // jumps once the detached function is done
        co_return v;
    };
    int v = 0;
    within(60s, "timeout around a blocking function, paused clock",
           [&] { v = with_runtime(GetParam(), paused(cfg_workers(GetParam())), make); });
    EXPECT_EQ(v, 7);
}

TEST_P(TimeWorkers, AlwaysReadyTimersDoNotStarveOtherTasks) {
    // A task whose sleeps are always already due never waits; the coop
    // budget must still make it yield, or the flag-setter never runs (and
    // the watchdog fails the test).
    auto make = [](auto&) -> aspen::task<long> {
        std::atomic<bool> stop{false};
        auto hog = [&]() -> aspen::task<long> {
            long n = 0;
            while (!stop.load()) {
                co_await aspen::sleep_until(aspen::clock::time_point{});
                ++n;
            }
            co_return n;
        };
        auto h = aspen::spawn(hog());
        co_await aspen::spawn([&]() -> aspen::task<void> {
            co_await aspen::sleep(2ms);
            stop.store(true);
        }());
        co_return co_await h;
    };
    long n = 0;
    // One worker: the hog and the setter share it.
    within(60s, "timer task behind an always-ready timer loop",
           [&] { n = with_runtime(GetParam() == 0 ? 0 : 1, workers(1), make); });
    EXPECT_GT(n, 0);
}

TEST_P(TimeWorkers, ShutdownWithSleepingTasksDisarmsEveryTimer) {
    std::atomic<int> destroyed{0};
    struct count_on_destroy {
        std::atomic<int>* n;
        ~count_on_destroy() { n->fetch_add(1); }
    };
    auto sleeper = [&]() -> aspen::task<void> {
        count_on_destroy guard{&destroyed};
        co_await aspen::sleep(1h);
    };
    constexpr int n = 1000;
    auto make = [&](auto& rt) -> aspen::task<void> {
        for (int i = 0; i < n; ++i) rt.spawn(sleeper()).detach();
        while (rt.metrics().timers_armed < n) co_await aspen::yield_now();
    };
    // with_runtime's runtime goes away with 1000 tasks asleep: its destructor
    // destroys them, and the driver asserts its wheel is empty.
    with_runtime(GetParam(), workers(cfg_workers(GetParam())), make);
    EXPECT_EQ(destroyed.load(), n);
}

TEST_P(TimeWorkers, ManyShortRealSleepsAllComplete) {
    // Workers keep parking on the driver, being woken by timers (parks that
    // end without a notify) and by each other: every task must finish.
    constexpr int tasks = 2000, rounds = 5;
    std::atomic<int> done{0};
    auto sleeper = [&](int seed) -> aspen::task<void> {
        for (int r = 0; r < rounds; ++r) co_await aspen::sleep(std::chrono::microseconds((seed * 7919 + r * 104729) % 3000));
        done.fetch_add(1);
    };
    auto body = [&]() -> aspen::task<void> {
        std::vector<aspen::join_handle<void>> hs;
        for (int i = 0; i < tasks; ++i) hs.push_back(aspen::spawn(sleeper(i)));
        for (auto& h : hs) co_await h;
    };
    within(120s, "many short sleeps", [&] { run_on(GetParam(), workers(cfg_workers(GetParam())), body()); });
    EXPECT_EQ(done.load(), tasks);
}

// An idle runtime with no timer armed and no socket registered: its last
// worker to park sleeps on its futex, where only an unpark can reach it
// (multi_thread.cpp, futex_will_do). A task that then arms a timer must
// still be woken by it, in every round, each after the runtime went idle
// again. Fails (watchdog) if a worker that parks with the timer armed
// sleeps on its futex: nothing would end the sleep.
TEST_P(TimeWorkers, TimerArmedAfterTheRuntimeWentIdleFires) {
    constexpr int rounds = 10;
    int fired = 0;
    within(60s, "timers armed on an idle runtime", [&] {
        auto once = []() -> aspen::task<void> { co_await aspen::sleep(2ms); };
        on_runtime(GetParam(), workers(cfg_workers(GetParam())), [&](auto& rt) {
            for (int r = 0; r < rounds; ++r) {
                std::this_thread::sleep_for(5ms);  // every worker parks
                rt.block_on(once());
                ++fired;
            }
        });
    });
    EXPECT_EQ(fired, rounds);
}

TEST(Time, MillionTimersArmAndCancel) {
#ifdef ASPEN_SANITIZED
    constexpr std::size_t n = 100'000;
#else
    constexpr std::size_t n = 1'000'000;
#endif
    aspen::runtime rt(workers(1));
    auto body = [&]() -> aspen::task<void> {
        std::deque<aspen::timer> timers;  // deque: grows without moving its elements
        auto base = aspen::now() + 1h;
        for (std::size_t i = 0; i < n; ++i) timers.emplace_back(base + std::chrono::milliseconds(i % 100'000));
        co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<bool> {
            for (auto& t : timers) EXPECT_FALSE(t.poll(cx));
            return aspen::ready(true);
        });
        EXPECT_EQ(rt.metrics().timers_armed, n);
        for (std::size_t i = 0; i < n; i += 2) timers[i].cancel();
        EXPECT_EQ(rt.metrics().timers_armed, n / 2);
        timers.clear();  // the rest cancel in their destructors
        EXPECT_EQ(rt.metrics().timers_armed, 0u);
    };
    within(120s, "a million timers", [&] { rt.block_on(body()); });
}

TEST(Time, Misuse) {
    // Awaiting a sleep outside a task, advancing a running clock.
    EXPECT_THROW(
        {
            auto s = aspen::sleep(1ms);
            s.await_ready();
        },
        std::logic_error);
    aspen::runtime rt(workers(1));
    EXPECT_THROW(rt.block_on(aspen::advance(1ms)), std::logic_error);
    EXPECT_THROW(aspen::interval(0ms), std::invalid_argument);
    aspen::config c = workers(1);
    c.event_interval = 0;
    EXPECT_THROW(aspen::runtime{c}, std::invalid_argument);
}

}  // namespace
