// The I/O and time driver: one reactor (epoll), one timer wheel and one
// clock, parked on by one worker at a time in place of its futex.
//
// Park protocol
// -------------
// park(max_wait):
//   1. under mutex_: fire the timers due now (their wakers are collected and
//      woken at the end, outside the lock). If any fired, do not block.
//      Otherwise the timeout is the earliest of: the wheel's
//      next_expiration() (converted exactly to real time, rounded up to a
//      whole ms; so never before the deadline, and never later than ~1 ms
//      after it), max_wait, unlimited. Record `parked_ = true` and the tick at
//      which this park wakes by itself (`park_wake_tick_`).
//   2. unpark token: CAS state_ idle -> parked. If it fails, an unpark() came
//      first (state_ == notified): do not block (timeout 0).
//   3. reactor.wait(timeout): epoll_wait, then wake the I/O wakers.
//   4. state_ = idle (consumes a notification), parked_ = false, fire the
//      timers due now, wake their wakers.
// park may return without anything having happened (an early epoll return,
// an unpark whose work someone else took): the caller re-checks and parks
// again.
//
// unpark(): state_.exchange(notified). If it was `parked`, the parker may be
// inside epoll_wait: write the eventfd. If it was `idle`, the parker will see
// `notified` in step 2 (a token: an unpark before park makes that park
// return at once). The exchange is a single RMW on state_, so it is ordered
// either before the parker's step-2 CAS (the CAS fails) or after it (we see
// `parked` and write the eventfd, which epoll_wait reports even if it starts
// later).
//
// Timers from other threads: add_timer inserts under mutex_; if a park is in
// progress (`parked_`, set in step 1 under the same mutex) and the new
// deadline is before `park_wake_tick_`, it unpark()s so the parker recomputes
// its timeout. An insert that comes before step 1 is seen by step 1.
//
// Clock
// -----
// Ticks are whole ms since the driver was created. A deadline converts to a
// tick by rounding UP, `now` by rounding DOWN; a timer fires when now_tick >=
// deadline_tick, so real now >= deadline: never early.
// Paused mode (tests): pause() freezes now() at the next whole ms (so a
// deadline of now() + d is exactly on a tick); advance(d) moves it by d and
// fires what became due before returning (on the calling thread). While
// paused, park does not wait for timers (time only moves by advance()).
//
// Threads: park() and poll() by one thread at a time (the scheduler's
// try-lock holder). Everything else from any thread. pause()/resume() are
// for tests and must not race each other.
#pragma once

#include "io/reactor.hpp"
#include "time/timer_wheel.hpp"

#include <aspen/waker.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace aspen::detail {

class driver {
public:
    using clock = std::chrono::steady_clock;
    using time_point = clock::time_point;

    driver();
    // Armed timers must have been cancelled (or have fired) and registrations
    // deregistered before the driver goes away.
    ~driver();
    driver(const driver&) = delete;
    driver& operator=(const driver&) = delete;

    // Blocks until I/O readiness, the next timer deadline (never later than
    // it), max_wait (nullopt: no limit), or unpark(); fires ready wakers and
    // expired timers before returning. One thread at a time.
    void park(std::optional<std::chrono::milliseconds> max_wait);
    // park without blocking: fire what is ready now. Does not consume an
    // unpark() token (the next park still returns at once). Same thread rule.
    void poll();
    // Makes a concurrent park return promptly, or else the next one. Any thread.
    void unpark() noexcept;

    // Arms `entry` (re-arms it if armed) to fire at `deadline`: its waker
    // (entry.set_waker, before arming) is woken and entry.fired() becomes
    // true. A deadline already reached fires right here, on this thread.
    // Any thread; unparks the parked thread if the deadline is before the
    // current park's wake-up.
    void add_timer(timer_entry& entry, time_point deadline);
    // Disarms `entry`; a no-op if it fired or was never armed. After it
    // returns the driver no longer touches the entry. Any thread.
    void cancel_timer(timer_entry& entry) noexcept;
    // Replaces the waker of an armed entry (a leaf re-polled by another task
    // or with a new waker). Returns false (waker not stored) if the entry is
    // not armed (fired or cancelled). Any thread.
    bool set_timer_waker(timer_entry& entry, const waker& w);

    // The driver's clock (frozen / manually advanced while paused). Any thread.
    time_point now() const noexcept;
    // Test clock: pause() freezes now(); advance(d) moves it forward by d and
    // fires the timers that became due before returning (std::logic_error if
    // not paused); resume() lets it run again from where it stands.
    void pause() noexcept;
    void resume() noexcept;
    void advance(std::chrono::nanoseconds d);
    bool is_paused() const noexcept;
    // Paused clock with nothing else to do (the runtime is idle): moves the
    // clock to the earliest timer deadline and fires the timers due there.
    // False (and nothing changes) if the clock runs or no timer is armed.
    bool auto_advance();

    // Whether a timer is armed or an fd registered (a hint: any thread, may
    // be stale at once). Busy workers skip their non-blocking poll without.
    std::size_t timers_armed() const noexcept {
        // relaxed: a statistic, and poll()'s hint (driver.cpp, poll: a stale
        // value only defers a due timer to the next poll or park).
        return armed_.load(std::memory_order_relaxed);
    }
    bool has_interest() const noexcept {
        // relaxed: a hint (see reactor::registered()).
        return armed_.load(std::memory_order_relaxed) != 0 || reactor_.registered() != 0;
    }

    // For sockets: register their fds here.
    detail::reactor& io() noexcept { return reactor_; }
    const detail::reactor& io() const noexcept { return reactor_; }

private:
    enum : std::uint8_t { idle, parked, notified };

    // Wakes (outside mutex_) and clears the wakers of the timers that fired.
    void wake_fired() noexcept;
    std::int64_t now_ns() const noexcept;
    std::uint64_t now_tick() const noexcept;
    std::uint64_t tick_of(time_point deadline) const noexcept;
    // Under mutex_: fire due timers, moving their wakers into `out`.
    void expire_locked(std::uint64_t now, std::vector<waker>& out);
    // Under mutex_, after every change of wheel_.
    void count_armed() noexcept {
        // relaxed: a hint (has_interest).
        armed_.store(wheel_.size(), std::memory_order_relaxed);
    }

    const time_point start_;
    reactor reactor_;

    // Clock: paused_ns_ >= 0 is the frozen now (ns since start_); -1 means
    // running, at steady_clock + offset_ns_.
    std::atomic<std::int64_t> paused_ns_{-1};
    std::atomic<std::int64_t> offset_ns_{0};

    std::atomic<std::uint8_t> state_{idle};  // the unpark token, see above

    std::mutex mutex_;  // guards wheel_, parked_, park_wake_tick_ and armed entries
    timer_wheel wheel_;
    bool parked_ = false;
    std::uint64_t park_wake_tick_ = 0;

    std::vector<waker> fired_;  // park/poll's buffer (one thread), reused
    // wheel_.size(), written under mutex_, read as a hint by has_interest().
    std::atomic<std::size_t> armed_{0};
};

}  // namespace aspen::detail
