// aspen::latch: a single-use countdown, like std::latch, for tasks.
//
//   aspen::latch done(n);
//   ... each of n tasks: done.count_down();
//   ... co_await done.wait();    // completes once the count reached zero
//
// count_down below zero throws std::logic_error (std::latch leaves it
// undefined). wait() is cancel-safe: an aborted waiter leaves the queue; the
// count is never changed by waiting. The latch must outlive its waiters.
#pragma once

#include <aspen/sync/gate.hpp>

#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace aspen {

class latch {
public:
    explicit latch(std::ptrdiff_t count) : count_(count), gate_(count == 0) {
        if (count < 0) throw std::invalid_argument("aspen::latch: count = " + std::to_string(count) + " is negative");
    }

    void count_down(std::ptrdiff_t n = 1) {
        // acq_rel: the task that takes the count to zero sees every earlier
        // count_down's writes before it opens the gate (which publishes them
        // to the waiters).
        std::ptrdiff_t before = count_.fetch_sub(n, std::memory_order_acq_rel);
        if (n < 0 || before < n) throw std::logic_error("aspen::latch: count_down past zero");
        if (before == n) gate_.open();
    }
    bool try_wait() const noexcept { return gate_.is_open(); }
    auto wait() noexcept { return gate_.wait(); }
    std::size_t waiter_count() const { return gate_.waiter_count(); }

private:
    std::atomic<std::ptrdiff_t> count_;
    detail::sync::gate gate_;
};

}  // namespace aspen
