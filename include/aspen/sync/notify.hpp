// aspen::notify: wake one task or all waiting tasks, like Tokio's Notify.
//
//   aspen::notify n;
//   co_await n.notified();   // in a waiting task
//   n.notify_one();          // from anywhere (any thread, inside a task or not)
//   n.notify_all();
//
// Semantics:
// * notify_one() wakes the task that has waited longest (FIFO). If nobody is
//   waiting it stores a permit instead, so a notification sent before the
//   waiter arrives is not lost: the next notified() completes at once and
//   consumes it. At most one permit is stored (two notify_one() calls with
//   nobody waiting complete one notified(), not two).
// * notify_all() wakes every task waiting right now, and also completes every
//   notified() awaitable that was created (n.notified() was called) before
//   notify_all() but has not been polled yet. It stores no permit: a later
//   notified() waits.
//
// Cancel safety: `co_await n.notified()` is cancel-safe. An awaitable
// destroyed while waiting (its task aborted) leaves the queue. If notify_one()
// had already picked it but its task never resumed, the notification is not
// lost: it is forwarded to the next waiter, or stored as the permit if nobody
// is waiting. (A notify_all() wake-up needs no forwarding: everyone waiting
// got one.)
//
// Rules: the notify must outlive every notified() awaitable. Awaiting the
// same awaitable twice throws std::logic_error.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/waker.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>

namespace aspen {

class notify;

// What notify::notified() returns; `co_await` it (no value).
class [[nodiscard]] notified_awaitable : public detail::sync::leaf_awaitable<notified_awaitable> {
public:
    static constexpr const char* awaited_what = "aspen::notify::notified";

    notified_awaitable(notify* n, std::uint64_t generation) noexcept : n_(n), generation_(generation) {}
    notified_awaitable(notified_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~notified_awaitable();
    void await_resume() {
        rethrow_if_error();
        phase_ = phase::done;
    }

private:
    friend class detail::sync::leaf_awaitable<notified_awaitable>;
    friend class notify;

    struct node : detail::sync::waiter_node {
        aspen::waker waker;
        bool notified_one = false;  // picked by notify_one
    };
    enum class phase : unsigned char { init, waiting, ready, done };  // owner-only

    bool poll(aspen::context& cx);

    notify* n_;
    std::uint64_t generation_;  // notify_all() calls seen when created
    node node_;
    phase phase_ = phase::init;
    bool took_one_ = false;  // completed by consuming the permit or a notify_one (owner-only)
};

class notify {
public:
    notify() = default;
    notify(const notify&) = delete;
    notify& operator=(const notify&) = delete;

    notified_awaitable notified() noexcept {
        // acquire: pairs with notify_all's release; an awaitable created after
        // a notify_all() records that generation and is not woken by it.
        return notified_awaitable(this, generation_.load(std::memory_order_acquire));
    }

    void notify_one() noexcept {
        aspen::waker w;
        {
            std::lock_guard g(state_);
            notify_one_locked(w);
        }
        w.wake();
    }

    void notify_all() noexcept {
        // The current waiters move to a list on this stack; each one removed
        // from it is woken with the lock released. A waiter cancelled in the
        // meantime unlinks itself from this list (under the lock), and one
        // re-polled sees the new generation and completes.
        detail::sync::waiter_list current;
        detail::sync::waker_batch wake;
        std::unique_lock g(state_);
        // Written only under state_ (so the relaxed read is exact); release:
        // pairs with notified()'s acquire.
        generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
        current.splice_back(waiters_);
        while (auto* n = static_cast<node*>(current.pop_front())) {
            wake.push(std::move(n->waker));
            if (wake.full() || current.empty()) {
                g.unlock();
                wake.wake_all();
                g.lock();
            }
        }
    }

    // Snapshot, for diagnostics and tests.
    std::size_t waiter_count() const {
        std::lock_guard g(state_);
        return waiters_.size();
    }

private:
    friend class notified_awaitable;
    using node = notified_awaitable::node;

    void notify_one_locked(aspen::waker& wake) noexcept {
        if (auto* n = static_cast<node*>(waiters_.pop_front())) {
            n->notified_one = true;
            wake = std::move(n->waker);
        } else {
            permit_ = true;
        }
    }

    mutable aspen::detail::spin_mutex state_;
    bool permit_ = false;
    std::atomic<std::uint64_t> generation_{0};  // notify_all() calls; written under state_
    detail::sync::waiter_list waiters_;
};

inline bool notified_awaitable::poll(aspen::context& cx) {
    switch (phase_) {
        case phase::init: {
            std::lock_guard g(n_->state_);
            // relaxed: generation_ is only written under state_, which we hold.
            if (n_->generation_.load(std::memory_order_relaxed) != generation_) {
                phase_ = phase::ready;  // a notify_all() after this awaitable was created
                return true;
            }
            if (n_->permit_) {
                n_->permit_ = false;
                took_one_ = true;
                phase_ = phase::ready;
                return true;
            }
            node_.waker = cx.waker();
            n_->waiters_.push_back(&node_);
            phase_ = phase::waiting;
            return false;
        }
        case phase::waiting: {
            std::lock_guard g(n_->state_);
            if (node_.notified_one) {
                took_one_ = true;
                phase_ = phase::ready;
                return true;
            }
            // relaxed: under state_, as above.
            if (n_->generation_.load(std::memory_order_relaxed) != generation_) {
                if (node_.linked()) node_.unlink();  // notify_all() has not reached it yet
                phase_ = phase::ready;
                return true;
            }
            detail::sync::store_waker(node_.waker, cx);
            return false;
        }
        case phase::ready:
        case phase::done:
            break;
    }
    throw std::logic_error("aspen::notify::notified: the awaitable was already awaited");
}

inline notified_awaitable::~notified_awaitable() {
    if (phase_ == phase::ready && took_one_) {
        n_->notify_one();  // ready but await_resume never ran: pass it on
        return;
    }
    if (phase_ != phase::waiting) return;
    aspen::waker w;
    {
        std::lock_guard g(n_->state_);
        if (node_.notified_one)
            n_->notify_one_locked(w);  // picked but never resumed: pass the notification on
        else if (node_.linked())
            node_.unlink();
    }
    w.wake();
}

}  // namespace aspen
