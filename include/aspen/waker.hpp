// waker and context: the one mechanism every leaf future is built on.
//
// A waker is a reference-counted handle to "something to make runnable again"
// (usually a task). wake() may be called from any thread, any number of
// times, also after the task has finished (then it does nothing).
#pragma once

#include <utility>

namespace aspen {

// How a waker reaches its target; lets tasks, threads blocked in block_on and
// future kinds of waiters share one waker type without virtual calls.
struct waker_vtable {
    void (*clone)(void* data);        // take one more reference
    void (*wake)(void* data);         // wake and release one reference
    void (*wake_by_ref)(void* data);  // wake, keep the reference
    void (*drop)(void* data);         // release one reference
};

class waker {
public:
    waker() noexcept = default;
    // Adopts one reference already taken on data.
    waker(const waker_vtable* vtable, void* data) noexcept : vtable_(vtable), data_(data) {}

    waker(const waker& other) noexcept : vtable_(other.vtable_), data_(other.data_) {
        if (vtable_) vtable_->clone(data_);
    }
    waker(waker&& other) noexcept
        : vtable_(std::exchange(other.vtable_, nullptr)), data_(std::exchange(other.data_, nullptr)) {}
    waker& operator=(waker other) noexcept {
        std::swap(vtable_, other.vtable_);
        std::swap(data_, other.data_);
        return *this;
    }
    ~waker() { reset(); }

    // Wakes the target and gives up this waker's reference; *this is empty after.
    void wake() noexcept {
        if (!vtable_) return;
        auto* vt = std::exchange(vtable_, nullptr);
        vt->wake(std::exchange(data_, nullptr));
    }
    // Wakes the target and keeps the reference.
    void wake_by_ref() const noexcept {
        if (vtable_) vtable_->wake_by_ref(data_);
    }
    // True when both wake the same target: lets a leaf skip re-storing.
    bool will_wake(const waker& other) const noexcept {
        return vtable_ == other.vtable_ && data_ == other.data_;
    }
    void reset() noexcept {
        if (vtable_) std::exchange(vtable_, nullptr)->drop(std::exchange(data_, nullptr));
    }
    explicit operator bool() const noexcept { return vtable_ != nullptr; }

    // For runtimes that lend a waker without a reference of its own: forget
    // the target without dropping the reference.
    void release_borrowed() noexcept {
        vtable_ = nullptr;
        data_ = nullptr;
    }

private:
    const waker_vtable* vtable_ = nullptr;
    void* data_ = nullptr;
};

// What a leaf future's poll receives: the waker of the task polling it.
// Store a copy of cx.waker() before returning pending.
class context {
public:
    explicit context(const aspen::waker& w) noexcept : waker_(w) {}
    const aspen::waker& waker() const noexcept { return waker_; }

private:
    const aspen::waker& waker_;
};

}  // namespace aspen
