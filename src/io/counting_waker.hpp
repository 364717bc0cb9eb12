// A waker target over an atomic counter: counts wakes and live references,
// and lets a plain thread block until the next wake. For tests of the
// reactor, the timer wheel and the driver, before any task is involved.
#pragma once

#include <aspen/waker.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace aspen::detail {

class counting_waker {
public:
    counting_waker() noexcept = default;
    counting_waker(const counting_waker&) = delete;
    counting_waker& operator=(const counting_waker&) = delete;

    // A new waker holding one reference.
    aspen::waker make() noexcept {
        // relaxed: a counter; it is read after the threads involved joined.
        refs_.fetch_add(1, std::memory_order_relaxed);
        return aspen::waker(&vtable, this);
    }
    std::uint32_t wakes() const noexcept {
        // acquire: pairs with note_wake's release; a test that sees the
        // count also sees what the waker published before waking.
        return wakes_.load(std::memory_order_acquire);
    }
    // Blocks while wakes() == seen.
    void wait_for_wake(std::uint32_t seen) const noexcept { wakes_.wait(seen, std::memory_order_acquire); }
    // Live references (clones + make()s - drops - wakes).
    std::int64_t refs() const noexcept { return refs_.load(std::memory_order_relaxed); }
    // steady_clock time of the first wake (time_point{} if none).
    std::chrono::steady_clock::time_point first_wake() const noexcept {
        // acquire: pairs with the release CAS in note_wake.
        return std::chrono::steady_clock::time_point(
            std::chrono::steady_clock::duration(first_wake_.load(std::memory_order_acquire)));
    }

private:
    void note_wake() noexcept {
        std::int64_t t = std::chrono::steady_clock::now().time_since_epoch().count();
        std::int64_t none = 0;
        // release: published together with the count below.
        first_wake_.compare_exchange_strong(none, t, std::memory_order_release, std::memory_order_relaxed);
        // release: pairs with wakes()'s acquire.
        wakes_.fetch_add(1, std::memory_order_release);
        wakes_.notify_all();
    }
    static void do_clone(void* p) noexcept {
        static_cast<counting_waker*>(p)->refs_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
    }
    static void do_wake(void* p) noexcept {
        auto* self = static_cast<counting_waker*>(p);
        self->note_wake();
        self->refs_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: a counter
    }
    static void do_wake_by_ref(void* p) noexcept { static_cast<counting_waker*>(p)->note_wake(); }
    static void do_drop(void* p) noexcept {
        static_cast<counting_waker*>(p)->refs_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: a counter
    }
    static constexpr waker_vtable vtable{&do_clone, &do_wake, &do_wake_by_ref, &do_drop};

    std::atomic<std::uint32_t> wakes_{0};
    std::atomic<std::int64_t> refs_{0};
    std::atomic<std::int64_t> first_wake_{0};
};

}  // namespace aspen::detail
