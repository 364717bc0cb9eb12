// A worker's parking spot: a token word on which the worker sleeps either on
// a futex (std::atomic::wait) or inside the I/O driver (epoll_wait), and
// which unpark() turns into "notified" and wakes whichever sleep it is.
//
// Protocol (token_ states):
//   empty          nobody is sleeping and no notification is pending
//   parked_futex   the owner sleeps on the futex (or is about to)
//   parked_driver  the owner sleeps in driver::park (or is about to)
//   notified       an unpark() arrived; the next park consumes it
// * park: CAS empty -> parked_*; a failed CAS means `notified`: consume it
//   and return at once (an unpark before park is not lost). After sleeping,
//   exchange(empty) consumes the notification, if any.
// * unpark: exchange(notified); the old value says how to wake the owner:
//   parked_futex -> futex notify; parked_driver -> driver::unpark (eventfd).
//   The exchange is one RMW, so it is ordered either before the parker's CAS
//   (which then fails) or after it (we see parked_* and wake that sleep; the
//   futex wait and the driver's own token both tolerate a wake that arrives
//   before the sleep starts).
// * A driver park can also end without an unpark (I/O, a timer, a stale
//   driver token): park_on_driver then returns false and the caller must fix
//   the idle counts itself (idle_state::unpark_self).
#pragma once

#include "io/driver.hpp"

#include <atomic>
#include <cstdint>
#include <optional>

namespace aspen::detail {

class parker {
public:
    void park() noexcept {
        if (enter(parked_futex)) {
            // acquire: see the unparker's writes once woken.
            while (token_.load(std::memory_order_acquire) == parked_futex)
                token_.wait(parked_futex, std::memory_order_acquire);
        }
        leave();
    }
    // Sleeps in d.park(); true if an unpark() ended it, false if the driver
    // returned by itself (I/O, timers).
    bool park_on_driver(driver& d) {
        if (!enter(parked_driver)) {
            leave();
            return true;
        }
        d.park(std::nullopt);
        return leave() == notified;
    }
    void unpark(driver& d) noexcept {
        // seq_cst: releases the work published before unpark to the parker's
        // acquire in leave(), and keeps this write before libstdc++'s seq_cst
        // check of the futex waiter count inside notify_one (a write ordered
        // after that check could leave a parker asleep: notify_one skips the
        // futex wake when the count reads 0, and a parker that registered and
        // read the old token in between would sleep on).
        std::uint32_t prev = token_.exchange(notified, std::memory_order_seq_cst);
        if (prev == parked_futex) token_.notify_one();
        if (prev == parked_driver) d.unpark();
    }

private:
    enum : std::uint32_t { empty, parked_futex, parked_driver, notified };

    // false if a notification was already pending.
    bool enter(std::uint32_t how) noexcept {
        std::uint32_t expected = empty;
        // acq_rel: orders the sleep after this CAS for the unparker's RMW;
        // acquire on failure: we read `notified` and take its writes.
        return token_.compare_exchange_strong(expected, how, std::memory_order_acq_rel, std::memory_order_acquire);
    }
    std::uint32_t leave() noexcept {
        // acq_rel: acquire the unparker's writes; consume the notification.
        return token_.exchange(empty, std::memory_order_acq_rel);
    }

    std::atomic<std::uint32_t> token_{empty};
};

}  // namespace aspen::detail
