// The driver; the park/unpark protocol and the clock rules are at the top of
// driver.hpp.
#include "io/driver.hpp"

#include <algorithm>
#include <cassert>
#include <climits>
#include <stdexcept>
#include <utility>

namespace aspen::detail {

namespace {

constexpr std::int64_t ns_per_ms = 1'000'000;

// ceil(ns / 1 ms) for ns >= 0, saturated to an epoll timeout.
int timeout_ms_of(std::int64_t ns) noexcept {
    std::int64_t ms = ns / ns_per_ms + (ns % ns_per_ms != 0);
    return static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
}

}  // namespace

driver::driver() : start_(clock::now()) { fired_.reserve(64); }

driver::~driver() {
    // Owners cancel their timers first; an entry left armed would be
    // left pointing into a dead wheel.
    assert(wheel_.empty());
}

// ---- clock -------------------------------------------------------------------------
std::int64_t driver::now_ns() const noexcept {
    // acquire: pairs with resume()'s release store of -1, so the offset it
    // stored just before is the one read below.
    std::int64_t paused = paused_ns_.load(std::memory_order_acquire);
    if (paused >= 0) return paused;
    auto real = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - start_).count();
    // relaxed: ordered by the acquire above (see resume()).
    return real + offset_ns_.load(std::memory_order_relaxed);
}

std::uint64_t driver::now_tick() const noexcept { return static_cast<std::uint64_t>(now_ns() / ns_per_ms); }

std::uint64_t driver::tick_of(time_point deadline) const noexcept {
    if (deadline <= start_) return 0;
    // Rounded up: a deadline of 10.3 ms is tick 11, and tick 11 is only
    // reached at real 11.0 ms (now rounds down): never early.
    auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - start_).count());
    return ns / ns_per_ms + (ns % ns_per_ms != 0);
}

driver::time_point driver::now() const noexcept { return start_ + std::chrono::nanoseconds(now_ns()); }

bool driver::is_paused() const noexcept {
    // relaxed: a snapshot for the caller; now_ns() does the ordered read.
    return paused_ns_.load(std::memory_order_relaxed) >= 0;
}

void driver::pause() noexcept {
    if (is_paused()) return;
    // Freeze at the next whole ms (a forward step of < 1 ms; now() stays
    // monotonic): deadlines computed from now() while paused then fall
    // exactly on wheel ticks, so advance(d) fires a timer set d ahead.
    std::int64_t now = now_ns();
    std::int64_t aligned = (now + ns_per_ms - 1) / ns_per_ms * ns_per_ms;
    // release: pairs with now_ns()'s acquire (a value; nothing else to
    // publish).
    paused_ns_.store(aligned, std::memory_order_release);
}

void driver::resume() noexcept {
    // relaxed: pause/resume/advance do not race each other (documented).
    std::int64_t paused = paused_ns_.load(std::memory_order_relaxed);
    if (paused < 0) return;
    auto real = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - start_).count();
    // Continue from the frozen value: now() stays monotonic.
    // relaxed: published by the release store below.
    offset_ns_.store(paused - real, std::memory_order_relaxed);
    // release: a now_ns() that reads -1 also reads the new offset.
    paused_ns_.store(-1, std::memory_order_release);
}

void driver::advance(std::chrono::nanoseconds d) {
    std::vector<waker> woken;
    {
        std::lock_guard lock(mutex_);
        // relaxed: advance calls are serialised by mutex_; pause/resume do
        // not race with advance (documented).
        std::int64_t paused = paused_ns_.load(std::memory_order_relaxed);
        if (paused < 0) throw std::logic_error("aspen driver: advance() needs a paused clock");
        // release: pairs with now_ns()'s acquire (a value, nothing more).
        paused_ns_.store(paused + std::max<std::int64_t>(d.count(), 0), std::memory_order_release);
        expire_locked(now_tick(), woken);
    }
    for (waker& w : woken) w.wake();
    unpark();  // a parked thread re-evaluates with the new time
}

bool driver::auto_advance() {
    std::vector<waker> woken;
    {
        std::lock_guard lock(mutex_);
        // relaxed: as in advance().
        std::int64_t paused = paused_ns_.load(std::memory_order_relaxed);
        if (paused < 0) return false;
        // next_expiration() may be a slot start before the first deadline
        // (advancing there only cascades): step until something fires.
        for (;;) {
            auto next = wheel_.next_expiration();
            if (!next) return false;
            auto at = static_cast<std::int64_t>(*next) * ns_per_ms;
            // release: pairs with now_ns()'s acquire (a value, nothing more).
            if (at > paused) paused_ns_.store(paused = at, std::memory_order_release);
            std::size_t armed = wheel_.size();
            expire_locked(now_tick(), woken);
            if (wheel_.size() < armed) break;
        }
    }
    for (waker& w : woken) w.wake();
    return true;
}

// ---- timers ------------------------------------------------------------------------
void driver::expire_locked(std::uint64_t now, std::vector<waker>& out) {
    wheel_.advance(now, [&](timer_entry& e) {
        if (e.waker_) out.push_back(std::move(e.waker_));
        // release: the last access to the entry; an owner that reads fired()
        // == true may destroy it without taking mutex_.
        e.fired_.store(true, std::memory_order_release);
    });
    count_armed();
}

void driver::add_timer(timer_entry& entry, time_point deadline) {
    std::uint64_t tick = tick_of(deadline);
    waker fire_now;
    bool wake_parker = false;
    {
        std::lock_guard lock(mutex_);
        wheel_.remove(entry);
        // relaxed: the arming thread owns the entry; whoever reads fired()
        // concurrently only cares about the release store that ends it.
        entry.fired_.store(false, std::memory_order_relaxed);
        // The exact comparison too: a deadline of exactly now is due now,
        // though its tick (rounded up) may still be ahead.
        if (tick <= now_tick() || deadline <= now()) {
            fire_now = std::move(entry.waker_);
            // release: as in expire_locked.
            entry.fired_.store(true, std::memory_order_release);
        } else {
            wheel_.insert(entry, tick);
            wake_parker = parked_ && tick < park_wake_tick_;
        }
        count_armed();
    }
    if (wake_parker) unpark();
    fire_now.wake();
}

void driver::cancel_timer(timer_entry& entry) noexcept {
    std::lock_guard lock(mutex_);
    wheel_.remove(entry);
    count_armed();
}

bool driver::set_timer_waker(timer_entry& entry, const waker& w) {
    waker old;
    {
        std::lock_guard lock(mutex_);
        if (!entry.is_linked()) return false;
        if (!entry.waker_.will_wake(w)) old = std::exchange(entry.waker_, w);
    }
    return true;  // `old` dropped outside the lock
}

// ---- park / unpark -----------------------------------------------------------------
// Harvests I/O, then fires the due timers. It touches no park state
// (parked_, the unpark token), and with no timer armed neither the clock
// nor mutex_: a busy worker runs this every event_interval ticks and
// whenever its queues run dry (multi_thread.cpp, poll_driver). The hint
// may lag a timer armed on another thread just now; such a timer is not
// due yet (add_timer fires a due one itself), and a timer left unfired
// here is fired by the next poll or park.
void driver::poll() {
    reactor_.wait(0);
    if (timers_armed() == 0) return;
    {
        std::lock_guard lock(mutex_);
        expire_locked(now_tick(), fired_);
    }
    wake_fired();
}

void driver::wake_fired() noexcept {
    for (waker& w : fired_) w.wake();
    fired_.clear();
}

void driver::unpark() noexcept {
    // acq_rel: release publishes what the caller did before unpark() (new
    // work) to the parker's acquire exchange in step 4; the RMW ordering on
    // state_ is what decides between "parker will see notified" and "parker
    // may be in epoll_wait".
    if (state_.exchange(notified, std::memory_order_acq_rel) == parked) reactor_.wake();
}

void driver::park(std::optional<std::chrono::milliseconds> max_wait) {
    int timeout = 0;
    {
        std::lock_guard lock(mutex_);
        std::int64_t now = now_ns();
        std::uint64_t tick = static_cast<std::uint64_t>(now / ns_per_ms);
        expire_locked(tick, fired_);
        if (fired_.empty()) {
            std::int64_t wait_ns = -1;  // unlimited
            std::uint64_t wake_tick = ~std::uint64_t{0};
            if (is_paused()) {
                // Time moves only by advance(), which fires timers itself: no
                // timer deadline bounds the wait, and add_timer need not
                // unpark us (wake_tick 0 never compares greater).
                wake_tick = 0;
            } else if (auto next = wheel_.next_expiration()) {
                // next > tick: everything due at `tick` just fired.
                wake_tick = *next;
                if (*next < static_cast<std::uint64_t>(INT64_MAX / ns_per_ms))
                    wait_ns = std::max<std::int64_t>(static_cast<std::int64_t>(*next) * ns_per_ms - now, 0);
            }
            timeout = wait_ns < 0 ? -1 : timeout_ms_of(wait_ns);
            if (max_wait) {
                std::int64_t limit = std::clamp<std::int64_t>(max_wait->count(), 0, INT_MAX);
                if (timeout < 0 || limit < timeout) timeout = static_cast<int>(limit);
                if (wake_tick != 0) wake_tick = std::min(wake_tick, tick + static_cast<std::uint64_t>(limit));
            }
            if (timeout != 0) {
                parked_ = true;
                park_wake_tick_ = wake_tick;
            }
        }
    }
    if (timeout != 0) {
        std::uint8_t expected = idle;
        // acq_rel on success: publishes nothing, but orders this park before
        // the eventfd write of an unpark() that reads `parked`. acquire on
        // failure: we read `notified` and will not block.
        if (!state_.compare_exchange_strong(expected, parked, std::memory_order_acq_rel, std::memory_order_acquire))
            timeout = 0;
    }
    reactor_.wait(timeout);
    // acq_rel: acquire what the unparker published before its unpark();
    // consuming the token here (even if we did not sleep) is fine: the
    // caller re-checks for work after every park.
    state_.exchange(idle, std::memory_order_acq_rel);
    {
        std::lock_guard lock(mutex_);
        parked_ = false;
        expire_locked(now_tick(), fired_);
    }
    wake_fired();
}

}  // namespace aspen::detail
