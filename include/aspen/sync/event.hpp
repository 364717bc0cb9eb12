// aspen::event: a manual-reset event for tasks.
//
//   aspen::event ready;
//   ...  co_await ready.wait();   // completes once set() was called
//   ...  ready.set();             // any thread: releases every waiter
//   ...  ready.reset();           // later waits wait again
//
// A set() releases every task waiting at that moment, even if reset()
// follows before they run. wait() is cancel-safe: an aborted waiter leaves
// the queue and nothing is lost (setting an event is not consumed by a
// waiter). The event must outlive its waiters.
#pragma once

#include <aspen/sync/gate.hpp>

namespace aspen {

class event {
public:
    event() = default;
    explicit event(bool set) noexcept : gate_(set) {}
    void set() { gate_.open(); }
    void reset() { gate_.close(); }
    bool is_set() const noexcept { return gate_.is_open(); }
    auto wait() noexcept { return gate_.wait(); }
    std::size_t waiter_count() const { return gate_.waiter_count(); }

private:
    detail::sync::gate gate_;
};

}  // namespace aspen
