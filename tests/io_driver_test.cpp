// Driver: park returns on unpark (from another thread, or before it), on a
// timer (never early), on readiness, on max_wait; an earlier timer added
// from another thread cuts a long park short; the paused clock fires timers
// deterministically on advance(). No test asserts an upper bound on time:
// the watchdog only catches hangs.
#include "io/counting_waker.hpp"
#include "io/driver.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using aspen::detail::counting_waker;
using aspen::detail::direction;
using aspen::detail::driver;
using aspen::detail::registration;
using aspen::detail::timer_entry;
using namespace std::chrono_literals;

namespace {

#ifdef ASPEN_SANITIZED
constexpr int scale = 4;
#else
constexpr int scale = 1;
#endif

// Parks (no max_wait) until pred() holds.
template <class Pred>
void park_until(driver& d, const char* what, Pred pred) {
    aspen_test::within(60s, what, [&] {
        while (!pred()) d.park(std::nullopt);
    });
}

}  // namespace

TEST(Driver, ParkReturnsOnUnparkFromAnotherThread) {
    driver d;
    for (int i = 0; i < 50; ++i) {
        aspen_test::within(60s, "park woken by unpark", [&] {
            std::thread t([&] {
                if (i % 2) std::this_thread::sleep_for(1ms);
                d.unpark();
            });
            d.park(std::nullopt);  // no timers, no I/O: only the unpark ends it
            t.join();
        });
    }
}

TEST(Driver, UnparkBeforeParkIsNotLost) {
    driver d;
    d.unpark();
    d.poll();  // poll does not consume the token
    aspen_test::within(60s, "unpark before park", [&] { d.park(std::nullopt); });
}

TEST(Driver, ParkReturnsOnTimerNeverEarly) {
    driver d;
    counting_waker cw;
    timer_entry e;
    e.set_waker(cw.make());
    auto deadline = d.now() + 15ms;
    d.add_timer(e, deadline);
    EXPECT_FALSE(e.fired());
    park_until(d, "timer", [&] { return e.fired(); });
    EXPECT_EQ(cw.wakes(), 1u);
    EXPECT_GE(cw.first_wake(), deadline) << "fired early";
    EXPECT_GE(d.now(), deadline);
    EXPECT_EQ(cw.refs(), 0);
    d.cancel_timer(e);  // after fire: a no-op
}

TEST(Driver, ParkMaxWaitReturns) {
    driver d;
    aspen_test::within(60s, "park with max_wait", [&] {
        auto before = d.now();
        d.park(5ms);
        EXPECT_GE(d.now(), before);
        d.park(0ms);
    });
}

TEST(Driver, ParkReturnsOnReadiness) {
    driver d;
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    registration reg;
    d.io().register_fd(fds[0], reg);
    d.poll();  // initial writable edge
    counting_waker cw;
    ASSERT_FALSE(d.io().poll_ready(reg, direction::read, cw.make()));
    std::thread writer([&] {
        std::this_thread::sleep_for(5ms);
        char c = 'r';
        EXPECT_EQ(::write(fds[1], &c, 1), 1);
    });
    park_until(d, "readiness", [&] { return cw.wakes() > 0; });
    writer.join();
    EXPECT_TRUE(d.io().poll_ready(reg, direction::read, cw.make()));
    d.io().deregister(reg);
    ::close(fds[0]);
    ::close(fds[1]);
}

// The parker sleeps towards a timer an hour away; another thread adds one
// due in 10 ms: the park must be cut short (the watchdog would fire first).
TEST(Driver, EarlierTimerFromAnotherThreadUnparks) {
    driver d;
    counting_waker far_w, soon_w;  // before the entries: they outlive the wakers stored there
    timer_entry far, soon;
    far.set_waker(far_w.make());
    soon.set_waker(soon_w.make());
    d.add_timer(far, d.now() + 1h);
    std::atomic<bool> parking{false};
    std::thread adder([&] {
        while (!parking.load(std::memory_order_acquire)) std::this_thread::yield();
        std::this_thread::sleep_for(5ms);  // most likely inside epoll_wait by now
        d.add_timer(soon, d.now() + 10ms);
    });
    parking.store(true, std::memory_order_release);
    park_until(d, "earlier timer from another thread", [&] { return soon.fired(); });
    adder.join();
    EXPECT_EQ(soon_w.wakes(), 1u);
    EXPECT_FALSE(far.fired());
    EXPECT_EQ(far_w.wakes(), 0u);
    d.cancel_timer(far);
}

TEST(Driver, CancelPreventsFireAndPastDeadlineFiresAtOnce) {
    driver d;
    d.pause();
    counting_waker aw, bw;
    timer_entry a, b;
    a.set_waker(aw.make());
    b.set_waker(bw.make());
    d.add_timer(a, d.now() + 10ms);
    d.cancel_timer(a);
    d.cancel_timer(a);
    d.advance(1s);
    d.poll();
    EXPECT_FALSE(a.fired());
    EXPECT_EQ(aw.wakes(), 0u);
    // A deadline already reached fires inside add_timer.
    d.add_timer(b, d.now() - 1ms);
    EXPECT_TRUE(b.fired());
    EXPECT_EQ(bw.wakes(), 1u);
    d.add_timer(b, d.now());  // re-arm: no waker left, fires without waking
    EXPECT_TRUE(b.fired());
    EXPECT_EQ(bw.wakes(), 1u);
}

TEST(Driver, SetTimerWakerReplacesTheWaker) {
    driver d;
    d.pause();
    counting_waker first, second;
    timer_entry e;
    e.set_waker(first.make());
    d.add_timer(e, d.now() + 5ms);
    EXPECT_TRUE(d.set_timer_waker(e, second.make()));
    EXPECT_EQ(first.refs(), 0);
    d.advance(5ms);
    EXPECT_TRUE(e.fired());
    EXPECT_EQ(first.wakes(), 0u);
    EXPECT_EQ(second.wakes(), 1u);
    EXPECT_FALSE(d.set_timer_waker(e, second.make()));  // fired: not stored
    EXPECT_EQ(second.refs(), 0);
}

TEST(Driver, PausedClockAdvanceFiresDeterministically) {
    driver d;
    d.pause();
    auto t0 = d.now();
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(d.now(), t0);  // frozen
    struct timer {
        counting_waker w;  // declared first: destroyed after the entry holding its waker
        timer_entry entry;
        std::chrono::nanoseconds after;
    };
    std::vector<std::unique_ptr<timer>> timers;
    for (auto after : {10ms, 10ms, 11ms, 1000ms, 7200000ms}) {
        auto& t = *timers.emplace_back(std::make_unique<timer>());
        t.after = after;
        t.entry.set_waker(t.w.make());
        d.add_timer(t.entry, t0 + after);
    }
    auto fired = [&] {
        std::vector<bool> v;
        for (auto& t : timers) v.push_back(t->entry.fired());
        return v;
    };
    d.advance(9ms);
    d.poll();
    EXPECT_EQ(fired(), (std::vector<bool>{false, false, false, false, false}));
    d.advance(999us);  // 9.999 ms: still before 10 ms
    EXPECT_EQ(fired(), (std::vector<bool>{false, false, false, false, false}));
    d.advance(1us);  // exactly 10 ms
    EXPECT_EQ(fired(), (std::vector<bool>{true, true, false, false, false}));
    d.advance(1ms);
    EXPECT_EQ(fired(), (std::vector<bool>{true, true, true, false, false}));
    d.advance(988ms);  // 999 ms
    EXPECT_EQ(fired(), (std::vector<bool>{true, true, true, false, false}));
    d.advance(1ms);
    EXPECT_EQ(fired(), (std::vector<bool>{true, true, true, true, false}));
    d.advance(2h);
    EXPECT_EQ(fired(), (std::vector<bool>{true, true, true, true, true}));
    EXPECT_EQ(d.now(), t0 + 10ms + 1ms + 988ms + 1ms + 2h);
    for (auto& t : timers) EXPECT_EQ(t->w.wakes(), 1u);
    // A park while paused returns on max_wait (time does not move on its own).
    aspen_test::within(60s, "paused park", [&] { d.park(1ms); });
    // resume continues from the frozen value.
    auto frozen = d.now();
    d.resume();
    EXPECT_GE(d.now(), frozen);
    EXPECT_THROW(d.advance(1ms), std::logic_error);
}

// Threads add and cancel timers while one thread parks in a loop: every
// armed timer fires exactly once, never before its deadline, and cancelled
// ones never fire after the cancel returned.
TEST(Driver, ConcurrentAddCancelWhileParking) {
    const int per_thread = 300 / scale;
    const int threads = 2;
    driver d;
    struct timer {
        counting_waker w;  // declared first: destroyed after the entry holding its waker
        timer_entry entry;
        driver::time_point deadline;
        bool cancelled = false;
        std::uint32_t wakes_at_cancel = 0;
    };
    std::vector<std::unique_ptr<timer>> timers(per_thread * threads);
    for (auto& t : timers) t = std::make_unique<timer>();
    std::atomic<int> done{0};
    std::atomic<bool> stop{false};
    std::thread parker([&] {
        while (!stop.load(std::memory_order_acquire)) d.park(std::nullopt);
    });
    aspen_test::within(120s, "concurrent timers", [&] {
        std::vector<std::thread> adders;
        for (int k = 0; k < threads; ++k) {
            adders.emplace_back([&, k] {
                std::mt19937 rng(static_cast<unsigned>(k + 1));
                for (int i = 0; i < per_thread; ++i) {
                    timer& t = *timers[static_cast<std::size_t>(k * per_thread + i)];
                    t.entry.set_waker(t.w.make());
                    t.deadline = d.now() + std::chrono::microseconds(rng() % 20'000);
                    d.add_timer(t.entry, t.deadline);
                    if (rng() % 4 == 0) {
                        d.cancel_timer(t.entry);
                        t.cancelled = true;
                        t.wakes_at_cancel = t.w.wakes();
                    }
                    if (i % 16 == 0) std::this_thread::sleep_for(1ms);
                }
                done.fetch_add(1, std::memory_order_release);
            });
        }
        for (auto& a : adders) a.join();
        for (auto& t : timers) {
            if (t->cancelled) continue;
            while (!t->entry.fired()) t->w.wait_for_wake(0);
        }
    });
    stop.store(true, std::memory_order_release);
    d.unpark();
    parker.join();
    for (auto& t : timers) {
        if (t->cancelled) {
            EXPECT_EQ(t->w.wakes(), t->wakes_at_cancel);
            EXPECT_LE(t->w.wakes(), 1u);
            d.cancel_timer(t->entry);
        } else {
            EXPECT_TRUE(t->entry.fired());
            EXPECT_EQ(t->w.wakes(), 1u);
            EXPECT_GE(t->w.first_wake(), t->deadline) << "fired early";
        }
    }
}
