// Pieces shared by barrier, broadcast and watch, whose state changes concern
// every waiter at once (a barrier trips, a value is sent, the last sender
// goes). Not a public API.
//
// * waker_node: a queued waiter and its waker.
// * wake_all_locked: wakes every waiter queued right now. The queue moves to
//   a list on this stack first; nodes are popped from it under the lock and
//   their wakers woken in batches with the lock released. A waiter that
//   queues again in the meantime is not in this round, and one destroyed in
//   the meantime unlinks itself from this list under the lock.
// * counted_handle: the sender / receiver handle of broadcast and watch.
// * state_wait: the owner-side part of a leaf that waits until a condition
//   on the primitive's state holds, then takes what it needs in the poll
//   that completes (broadcast recv, watch changed). The coop budget is
//   spent by leaf_awaitable (waiter_list.hpp) before the first poll; a
//   completed poll whose task never resumed is undone by the leaf's
//   destructor, so an abort loses nothing.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/waker.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace aspen::detail::sync {

struct waker_node : waiter_node {
    aspen::waker waker;
};

// `g` holds the primitive's lock on entry and on return.
inline void wake_all_locked(waiter_list& waiters, std::unique_lock<aspen::detail::spin_mutex>& g) noexcept {
    waiter_list round;
    round.splice_back(waiters);
    waker_batch wake;
    while (auto* n = static_cast<waker_node*>(round.pop_front())) {
        wake.push(std::move(n->waker));
        if (wake.full() || round.empty()) {
            g.unlock();
            wake.wake_all();
            g.lock();
        }
    }
}

// A copyable handle to a channel's shared state that keeps the count of its
// kind (State::senders or State::receivers) by copy, move and destruction.
// When the last sender goes, the waiting receivers wake to see the end.
template <class State, std::size_t State::*Count>
class counted_handle {
public:
    counted_handle() noexcept = default;
    counted_handle(const counted_handle& other) : c_(other.c_) {
        if (c_) {
            std::lock_guard g(c_->lock);
            ++((*c_).*Count);
        }
    }
    counted_handle(counted_handle&& other) noexcept : c_(std::move(other.c_)) {}
    counted_handle& operator=(const counted_handle& other) {
        if (this != &other) {
            counted_handle copy(other);
            *this = std::move(copy);
        }
        return *this;
    }
    counted_handle& operator=(counted_handle&& other) noexcept {
        if (this != &other) {
            drop();
            c_ = std::move(other.c_);
        }
        return *this;
    }
    ~counted_handle() { drop(); }
    bool valid() const noexcept { return c_ != nullptr; }

protected:
    explicit counted_handle(std::shared_ptr<State> c) noexcept : c_(std::move(c)) {}
    State& checked(const char* what) const {
        if (!c_) throw std::logic_error(std::string(what) + ": the handle is empty (moved-from)");
        return *c_;
    }
    std::shared_ptr<State> c_;

private:
    void drop() noexcept {
        if (!c_) return;
        {
            std::unique_lock g(c_->lock);
            if (--((*c_).*Count) == 0 && Count == &State::senders)
                wake_all_locked(c_->waiters, g);
        }
        c_.reset();
    }
};

class state_wait {
public:
    // Under `lock`: while !can_complete(), queues on `waiters` and returns
    // false; otherwise leaves the queue, calls take()
    // and returns true.
    template <class CanComplete, class Take>
    bool poll(aspen::detail::spin_mutex& lock, waiter_list& waiters, const aspen::context& cx, const char* what,
              CanComplete can_complete, Take take) {
        if (phase_ == phase::ready || phase_ == phase::done)
            throw std::logic_error(std::string(what) + ": the awaitable was already awaited");
        std::lock_guard g(lock);
        if (!can_complete()) {
            store_waker(node_.waker, cx);
            if (!node_.linked()) waiters.push_back(&node_);
            phase_ = phase::waiting;
            return false;
        }
        if (node_.linked()) node_.unlink();
        take();
        phase_ = phase::ready;
        return true;
    }
    void handed_out() noexcept { phase_ = phase::done; }

    // For the leaf's destructor: leaves the queue, or calls undo() (under
    // `lock`) if a completed poll was never handed out.
    template <class Undo>
    void abandon(aspen::detail::spin_mutex& lock, Undo undo) noexcept {
        if (phase_ == phase::waiting) {
            aspen::waker stale;  // ours; dropped after the lock is released
            std::lock_guard g(lock);
            if (node_.linked()) node_.unlink();
            stale = std::move(node_.waker);
        } else if (phase_ == phase::ready) {
            std::lock_guard g(lock);
            undo();
        }
    }

private:
    enum class phase : unsigned char { init, waiting, ready, done };
    waker_node node_;
    phase phase_ = phase::init;
};

}  // namespace aspen::detail::sync
