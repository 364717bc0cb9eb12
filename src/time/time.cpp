// The public time API (include/aspen/time.hpp) over the runtime's driver.
#include <aspen/time.hpp>
#include <aspen/yield.hpp>

#include "io/driver.hpp"
#include "scheduler/scheduler.hpp"

#include <stdexcept>
#include <string>

namespace aspen {

namespace detail {

driver& current_driver(const char* what) {
    scheduler* s = tls().sched;
    if (!s) throw std::logic_error(std::string(what) + ": needs a runtime; call it from inside a task");
    return s->io_driver();
}

void arm_timer(driver& d, timer_entry& e, clock::time_point deadline, const waker& w) {
    e.set_waker(w);
    d.add_timer(e, deadline);
}

bool update_timer_waker(driver& d, timer_entry& e, const waker& w) { return d.set_timer_waker(e, w); }

void cancel_timer(driver& d, timer_entry& e) noexcept { d.cancel_timer(e); }

}  // namespace detail

clock::time_point now() noexcept {
    if (detail::scheduler* s = detail::tls().sched) return s->io_driver().now();
    return clock::now();
}

interval::interval(clock::duration period, missed_tick policy) : interval(now(), period, policy) {}

interval::interval(clock::time_point start, clock::duration period, missed_tick policy)
    : next_(start), period_(period), policy_(policy) {
    if (period <= clock::duration::zero()) throw std::invalid_argument("aspen::interval: the period must be positive");
}

task<clock::time_point> interval::tick() {
    clock::time_point scheduled = next_;
    co_await sleep_until(scheduled);
    clock::time_point t = now();
    switch (policy_) {
        case missed_tick::burst:
            next_ = scheduled + period_;
            break;
        case missed_tick::delay:
            next_ = t + period_;
            break;
        case missed_tick::skip:
            // The first point of the original schedule after now.
            next_ = scheduled + period_ * ((t - scheduled) / period_ + 1);
            break;
    }
    co_return scheduled;
}

task<void> advance(clock::duration d) {
    detail::require_current_task("aspen::advance");
    detail::driver& drv = detail::current_driver("aspen::advance");
    if (!drv.is_paused()) throw std::logic_error("aspen::advance: the clock is not paused (config::start_paused)");
    drv.advance(d);
    co_await yield_now();
}

}  // namespace aspen
