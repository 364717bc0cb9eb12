// Time: sleep, sleep_until, timeout, interval, and the runtime's clock.
//
//   co_await aspen::sleep(10ms);
//   int v = co_await aspen::timeout(1s, fetch());   // throws aspen::timed_out
//   aspen::interval every(100ms);
//   for (;;) { co_await every.tick(); ... }
//
// Timers live in the runtime's hierarchical timing wheel (1 ms resolution)
// and are driven by the worker that parks on the I/O driver, or polled by
// busy workers every config::event_interval ticks. A timer never fires
// before its deadline; on an unloaded machine it fires within about a
// millisecond after it.
//
// Test clock: with config::start_paused the clock stands still; it moves by
// aspen::advance(d), or jumps to the next timer by itself whenever every
// worker is idle and no spawn_blocking function is running, so a test of a
// 10-minute timeout runs instantly.
#pragma once

#include <aspen/coop.hpp>
#include <aspen/detail/combinator.hpp>
#include <aspen/detail/task_header.hpp>
#include <aspen/detail/timer_entry.hpp>
#include <aspen/errors.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/poll.hpp>
#include <aspen/spawn.hpp>
#include <aspen/task.hpp>

#include <chrono>
#include <coroutine>
#include <type_traits>
#include <utility>

namespace aspen {

using clock = std::chrono::steady_clock;

// The current runtime's clock (paused-aware) on its threads; the real
// steady clock elsewhere.
clock::time_point now() noexcept;

namespace detail {
// The driver of the runtime running the calling task; std::logic_error
// naming `what` outside one.
driver& current_driver(const char* what);
// Arms `e` with waker `w` to fire at `deadline` (fires at once if it passed).
void arm_timer(driver& d, timer_entry& e, clock::time_point deadline, const waker& w);
// Stores `w` in the armed entry; false if it fired meanwhile.
bool update_timer_waker(driver& d, timer_entry& e, const waker& w);
void cancel_timer(driver& d, timer_entry& e) noexcept;
}  // namespace detail

// A one-shot timer that can be polled by hand: the building block of
// sleep, timeout and interval (and of custom leaf futures that need a
// deadline). Moving one disarms the source; the new one arms on its first
// poll (the wheel links armed timers by address).
class timer {
public:
    explicit timer(clock::time_point deadline) noexcept : deadline_(deadline) {}
    timer(timer&& other) noexcept : deadline_(other.deadline_) { other.reset(other.deadline_); }
    timer& operator=(const timer&) = delete;
    ~timer() { cancel(); }

    // True once the deadline passed; otherwise stores cx's waker to be woken
    // then (the first poll arms the timer on the calling task's runtime).
    bool poll(context& cx) {
        if (!driver_) {
            driver_ = &detail::current_driver("aspen::timer");
            detail::arm_timer(*driver_, entry_, deadline_, cx.waker());
            return entry_.fired();
        }
        return entry_.fired() || !detail::update_timer_waker(*driver_, entry_, cx.waker());
    }
    // Disarms it; a no-op if it fired or was never polled.
    void cancel() noexcept {
        if (driver_ && !entry_.fired()) detail::cancel_timer(*driver_, entry_);
    }
    // Moves the deadline (re-arms on the next poll).
    void reset(clock::time_point deadline) noexcept {
        cancel();
        driver_ = nullptr;
        deadline_ = deadline;
    }
    clock::time_point deadline() const noexcept { return deadline_; }

private:
    clock::time_point deadline_;
    detail::driver* driver_ = nullptr;
    detail::timer_entry entry_;
};

// co_await sleep_until(t) / sleep(d): completes at (never before) the
// deadline. Spends one unit of coop budget; when the budget is spent it
// yields first. Dropping it while it waits (abort) disarms the timer.
class [[nodiscard]] sleep_awaitable {
public:
    explicit sleep_awaitable(clock::time_point deadline) noexcept : timer_(deadline) {}

    bool await_ready() {
        auto& t = detail::require_current_task("aspen::sleep");
        if (!detail::coop_try_consume()) return false;  // yield in await_suspend
        budget_ok_ = true;
        return detail::poll_leaf_now(t, this, &poll_thunk);
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        if (budget_ok_) detail::suspend_on_leaf(h, this, &poll_thunk);
        else detail::yield_on_leaf(h, this, &poll_thunk);
    }
    void await_resume() noexcept {}
    // As a branch of aspen::select (a deadline beside channel operations):
    // polled with the selecting task's waker; a losing sleep disarms its
    // timer in its destructor.
    bool poll_as_branch(context& cx) { return timer_.poll(cx); }

private:
    static bool poll_thunk(void* self, context& cx) { return static_cast<sleep_awaitable*>(self)->timer_.poll(cx); }
    timer timer_;
    bool budget_ok_ = false;
};

inline sleep_awaitable sleep_until(clock::time_point deadline) noexcept { return sleep_awaitable(deadline); }
inline sleep_awaitable sleep(clock::duration d) { return sleep_awaitable(now() + d); }

namespace detail {
// The awaiter `co_await a` uses (its operator co_await, if it has one) and
// what that gives.
template <class A>
decltype(auto) awaiter_of(A&& a) {
    if constexpr (requires { static_cast<A&&>(a).operator co_await(); }) return static_cast<A&&>(a).operator co_await();
    else return static_cast<A&&>(a);
}
template <class A>
using await_result_t = decltype(awaiter_of(std::declval<A>()).await_resume());
template <class A>
inline constexpr bool is_join_handle = false;
template <class T>
inline constexpr bool is_join_handle<join_handle<T>> = true;
}  // namespace detail

// Runs t as a child task; if it has not finished after d, aborts it and
// throws timed_out (the child's destructors have run by then: no timer or
// socket registration is left behind). If the child finished in the same
// instant, its result wins: nothing it received is lost. If the awaiting
// task is itself cancelled, the child is aborted with it.
template <class T>
task<T> timeout(clock::duration d, task<T> t) {
    timer deadline(now() + d);
    join_handle<T> child = spawn(std::move(t));
    detail::on_exit abort_left([&] { child.abort(); });  // a no-op once it finished
    bool expired = co_await poll_fn([&](context& cx) -> poll<bool> {
        if (!detail::register_join_waker(child.header(), cx.waker())) return ready(false);
        if (deadline.poll(cx)) return ready(true);
        return pending;
    });
    if (expired) child.abort();
    try {
        co_return co_await child;
    } catch (const task_cancelled&) {
        if (expired) throw timed_out();
        throw;
    }
}

// Any movable awaitable, wrapped into a task: every aspen operation that
// waits (socket operations, sleeps, channel, lock and notify operations)
// moves until it is first awaited.
//   std::size_t n = co_await aspen::timeout(1s, stream.read(buf, sizeof buf));
//   std::optional<int> v = co_await aspen::timeout(1s, rx.recv());
// On time-out the operation is cancelled as an aborted task's would be (its
// registration or place in a wait list given up; what its cancel-safety
// note promises is kept: see net/tcp.hpp and the sync headers). An
// awaitable that cannot move goes in a task of its own:
//   co_await aspen::timeout(1s, [&]() -> aspen::task<int> { co_return co_await pinned_op(); }());
// Also what has an operator co_await, such as a oneshot_receiver (given
// by value: on time-out it is dropped, and a later send gets its value
// back). Not a join_handle: dropping it would leave the task running, so
// pass the task itself (then aborted on time-out), or await the handle in
// a task of your own and keep it.
template <class A>
auto timeout(clock::duration d, A awaitable) -> task<detail::await_result_t<A>> {
    static_assert(!detail::is_join_handle<A>,
                  "aspen::timeout: pass the task itself, timeout(d, make_task()), which is aborted on time-out; "
                  "a join_handle dropped on time-out would leave its task running (to keep the handle, await it "
                  "in a task of your own)");
    static_assert(std::is_move_constructible_v<A>,
                  "aspen::timeout: this awaitable cannot move into the task that timeout runs; "
                  "await it in a task of your own and pass that task (see the comment above)");
    auto wrap = [](A a) -> task<detail::await_result_t<A>> { co_return co_await std::move(a); };
    return timeout(d, wrap(std::move(awaitable)));
}

// timeout with a deadline instead of a duration: the same for a task or an
// awaitable. A deadline already past times out at once (the operation does
// not get to run first).
template <class A>
auto timeout_at(clock::time_point deadline, A op) {
    return timeout(deadline - now(), std::move(op));
}

// What interval::tick does when ticks were missed (the task was busy).
enum class missed_tick {
    burst,  // fire the missed ticks back to back until caught up
    delay,  // the next tick is one period after now
    skip,   // drop the missed ticks; stay on the original schedule
};

// A periodic timer: the first tick() completes at once, the k-th at
// start + k * period (subject to the missed-tick policy).
class interval {
public:
    explicit interval(clock::duration period, missed_tick policy = missed_tick::burst);
    interval(clock::time_point start, clock::duration period, missed_tick policy = missed_tick::burst);

    // Waits for the next tick; returns its scheduled time.
    task<clock::time_point> tick();
    clock::duration period() const noexcept { return period_; }

private:
    clock::time_point next_;
    clock::duration period_;
    missed_tick policy_;
};

// Paused clock only (config::start_paused): moves it forward by d, fires
// the timers that became due, and yields so their tasks can run. Throws
// std::logic_error if the clock is not paused.
task<void> advance(clock::duration d);

}  // namespace aspen
