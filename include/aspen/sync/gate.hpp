// gate: the shared core of event and latch (not a public API). A gate is
// open or closed; awaiting it completes once it is open. Opening releases
// every task waiting at that moment, and a waiter released that way stays
// released even if the gate closes again before it is polled, so an open
// followed at once by a close is never missed by the waiters it found.
//
// Cancel safety: a waiter destroyed while queued (its task aborted, or it
// lost a race) unlinks itself under the lock; nothing is handed on, since
// the gate's state does not change by being observed.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/waker.hpp>

#include <atomic>
#include <mutex>
#include <vector>

namespace aspen::detail::sync {

class gate {
public:
    gate() = default;
    explicit gate(bool open) noexcept : open_(open) {}
    gate(const gate&) = delete;
    gate& operator=(const gate&) = delete;

    bool is_open() const noexcept {
        // acquire: a task that sees the gate open sees what the opener
        // wrote before opening it.
        return open_.load(std::memory_order_acquire);
    }

    void open() {
        std::vector<aspen::waker> to_wake;  // woken after the lock is dropped
        {
            std::lock_guard lock(mutex_);
            // release: pairs with is_open(); the lock orders it for waiters.
            open_.store(true, std::memory_order_release);
            while (waiter_node* n = waiters_.pop_front()) {
                auto* w = static_cast<node*>(n);
                w->released = true;
                to_wake.push_back(std::move(w->waker));
            }
        }
        for (auto& w : to_wake) w.wake();
    }

    void close() {
        std::lock_guard lock(mutex_);
        // relaxed: ordered by the lock for waiters; a racing is_open() may
        // still see it open, which is what a close that races a wait means.
        open_.store(false, std::memory_order_relaxed);
    }

    class awaitable : public leaf_awaitable<awaitable> {
    public:
        static constexpr const char* awaited_what = "aspen::event/latch wait";
        explicit awaitable(gate& g) noexcept : g_(&g) {}
        awaitable(awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
        ~awaitable() {
            std::lock_guard lock(g_->mutex_);
            if (node_.linked()) node_.unlink();
        }
        bool poll(aspen::context& cx) {
            std::lock_guard lock(g_->mutex_);
            // relaxed: open_ is only written under mutex_, which we hold.
            if (node_.released || g_->open_.load(std::memory_order_relaxed)) {
                if (node_.linked()) node_.unlink();
                return true;
            }
            store_waker(node_.waker, cx);
            if (!node_.linked()) g_->waiters_.push_back(&node_);
            return false;
        }
        void await_resume() { rethrow_if_error(); }

    private:
        gate* g_;
        struct node : waiter_node {
            aspen::waker waker;
            bool released = false;
        };
        friend class gate;
        node node_;
    };

    // A fresh awaitable per wait; it must not outlive the gate.
    awaitable wait() noexcept { return awaitable(*this); }

    std::size_t waiter_count() const {
        std::lock_guard lock(mutex_);
        return waiters_.size();
    }

private:
    using node = awaitable::node;
    std::atomic<bool> open_{false};
    mutable aspen::detail::spin_mutex mutex_;
    waiter_list waiters_;
};

}  // namespace aspen::detail::sync
