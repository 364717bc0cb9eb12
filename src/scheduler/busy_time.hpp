// How long a worker has been busy (worker_metrics::busy_ns, as Tokio's
// worker_total_busy_duration): the time it spent not parked, the spell it is
// in now included. Written by the worker's thread only (or by the stand-in
// that runs the worker during a block_in_place, which takes over with a
// happens-before), read by any thread through runtime::metrics().
//
// Protocol: one atomic word, so a reader needs no retry loop.
//   parked: word = busy time of the closed spells (done_)
//   busy:   word = BUSY | (start of this spell - done_), on the steady clock;
//           a reader's now - that = done_ + the time since the spell began
// Invariants: only the owner writes the word; done_ is the owner's plain
// copy of the closed spells' sum; start() and stop() alternate (a stop with
// no spell open does nothing). A reader reads the clock after the word, so
// with the release store and its acquire load its now is not before the
// spell's start: the value it computes is never below done_. (A read that
// races with stop() may count up to the instant of its own clock read, a
// little more than stop() then closes the spell with.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace aspen::detail {

class busy_time {
public:
    static std::uint64_t now_ns() noexcept {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
                .count());
    }
    // The worker is awake (its thread began, or it unparked).
    void start(std::uint64_t now = now_ns()) noexcept {
        // release: a reader that sees it reads its clock after ours (above).
        word_.store(busy | (now - done_), std::memory_order_release);
    }
    // The worker parks (or its thread ends).
    void stop(std::uint64_t now = now_ns()) noexcept {
        // relaxed: only this thread writes the word.
        std::uint64_t w = word_.load(std::memory_order_relaxed);
        if (!(w & busy)) return;
        done_ = now - (w & ~busy);
        // release: as start's.
        word_.store(done_, std::memory_order_release);
    }
    std::uint64_t read() const noexcept {
        // acquire: pairs with start's release (see the protocol).
        std::uint64_t w = word_.load(std::memory_order_acquire);
        if (!(w & busy)) return w;
        std::uint64_t since = w & ~busy;
        std::uint64_t now = now_ns();
        return now > since ? now - since : 0;
    }

private:
    static constexpr std::uint64_t busy = std::uint64_t{1} << 63;
    std::atomic<std::uint64_t> word_{0};
    std::uint64_t done_ = 0;
};

}  // namespace aspen::detail
