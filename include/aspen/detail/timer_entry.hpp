// timer_entry: one timer, embedded in whatever waits on it (a sleep, an
// interval, a timeout). Public only so that awaitables can embed it; the
// wheel (src/time/timer_wheel.hpp) and the driver (src/io/driver.hpp) own
// its protocol.
#pragma once

#include <aspen/waker.hpp>

#include <atomic>
#include <cstdint>

namespace aspen::detail {

class timer_wheel;
class driver;

// One timer, owned (embedded) by whoever waits on it. Not copyable or
// movable: the wheel links to it by address. The owner must remove/cancel it
// before destroying it, unless fired() has returned true (then the wheel and
// the driver never touch it again).
class timer_entry {
public:
    timer_entry() noexcept = default;
    timer_entry(const timer_entry&) = delete;
    timer_entry& operator=(const timer_entry&) = delete;
    ~timer_entry() = default;

    // True once the driver handed the entry out as expired (never before its
    // deadline). Any thread.
    bool fired() const noexcept {
        // acquire: pairs with the driver's release store, which comes after
        // its last access to this entry (it moved the waker out before).
        return fired_.load(std::memory_order_acquire);
    }
    // The waker woken when the timer fires. Only while the entry is not armed
    // (before add_timer, or after it fired/was cancelled); to change it while
    // armed use driver::set_timer_waker.
    void set_waker(waker w) noexcept { waker_ = std::move(w); }
    // The deadline (in wheel ticks) of the last insert. Owner/driver only.
    std::uint64_t deadline_tick() const noexcept { return deadline_; }
    // Whether the wheel holds the entry. Only under the wheel owner's lock.
    bool is_linked() const noexcept { return list_ != unlinked; }

private:
    friend class timer_wheel;
    friend class driver;
    static constexpr std::uint16_t unlinked = 0xFFFF;

    timer_entry* prev_ = nullptr;
    timer_entry* next_ = nullptr;
    std::uint64_t deadline_ = 0;
    std::uint16_t list_ = unlinked;  // index into timer_wheel::heads_
    std::atomic<bool> fired_{false};
    waker waker_;
};

}  // namespace aspen::detail
