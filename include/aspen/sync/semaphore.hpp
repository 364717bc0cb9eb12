// aspen::semaphore: an async counting semaphore for tasks.
//
//   aspen::semaphore s(4);
//   {
//       aspen::semaphore_permit p = co_await s.acquire(2);  // 2 permits, RAII
//       ...
//   }                                                       // returned here
//   if (auto p = s.try_acquire()) { ... }
//   s.release(3);        // adds permits (e.g. after permit.forget())
//   s.available();       // permits free right now
//   s.close();           // waiting and later acquires throw semaphore_closed
//
// Fairness: strictly FIFO. Waiters are served in the order they first
// polled acquire(); a large request at the head of the queue blocks smaller
// ones behind it even if enough permits for them are free (as Tokio's
// semaphore does), so big requests cannot starve. try_acquire fails while
// anyone is queued. acquire(0) is ready at once.
//
// Cancel safety: `co_await s.acquire(k)` is cancel-safe and permits are
// never lost. An awaitable destroyed while queued (its task aborted) leaves
// the queue; since it may have been the head that blocked others, the queue
// is re-examined and waiters that now fit are granted. One destroyed after
// its permits were assigned but before its task resumed gives them back
// (to the next waiters in line). A semaphore_permit gives its permits back
// when destroyed, unless forget() was called.
//
// Closing (Tokio's Semaphore::close), e.g. to stop admitting work at
// shutdown: every waiting acquire() and every later one throws
// aspen::semaphore_closed (acquire(0) too), try_acquire gives nullopt.
// Permits already granted stay valid and may be released; release() still
// counts them, but no acquire takes them any more. A waiter granted its
// permits just before close() keeps them. Closing twice is harmless.
//
// Rules: the semaphore must outlive every permit and acquire() awaitable.
// Awaiting the same acquire() awaitable twice throws std::logic_error.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/errors.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/waker.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

namespace aspen {

class semaphore;

// Permits taken from a semaphore; released on destruction. Move-only.
class [[nodiscard]] semaphore_permit {
public:
    semaphore_permit() noexcept = default;
    semaphore_permit(semaphore_permit&& other) noexcept
        : s_(std::exchange(other.s_, nullptr)), count_(std::exchange(other.count_, 0)) {}
    semaphore_permit& operator=(semaphore_permit&& other) noexcept {
        if (this != &other) {
            release();
            s_ = std::exchange(other.s_, nullptr);
            count_ = std::exchange(other.count_, 0);
        }
        return *this;
    }
    semaphore_permit(const semaphore_permit&) = delete;
    semaphore_permit& operator=(const semaphore_permit&) = delete;
    ~semaphore_permit() { release(); }

    std::size_t count() const noexcept { return count_; }
    // Returns the permits to the semaphore now.
    void release() noexcept;
    // Keeps the permits out of the semaphore for good (semaphore::release
    // can add them back later).
    void forget() noexcept {
        s_ = nullptr;
        count_ = 0;
    }

private:
    friend class semaphore;
    friend class semaphore_acquire_awaitable;
    semaphore_permit(semaphore* s, std::size_t n) noexcept : s_(s), count_(n) {}
    semaphore* s_ = nullptr;
    std::size_t count_ = 0;
};

// What semaphore::acquire(k) returns; `co_await` it for a semaphore_permit.
class [[nodiscard]] semaphore_acquire_awaitable
    : public detail::sync::leaf_awaitable<semaphore_acquire_awaitable> {
public:
    static constexpr const char* awaited_what = "aspen::semaphore::acquire";

    semaphore_acquire_awaitable(semaphore* s, std::size_t n) noexcept : s_(s) { node_.needed = n; }
    semaphore_acquire_awaitable(semaphore_acquire_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~semaphore_acquire_awaitable();
    semaphore_permit await_resume();

private:
    friend class detail::sync::leaf_awaitable<semaphore_acquire_awaitable>;
    friend class semaphore;

    struct node : detail::sync::waiter_node {
        aspen::waker waker;
        std::size_t needed = 0;
        bool granted = false;  // the permits were taken for this waiter
    };
    enum class phase : unsigned char { init, waiting, owns, done };  // owner-only

    bool poll(aspen::context& cx);
    bool poll_first(aspen::context& cx);

    semaphore* s_;
    node node_;
    phase phase_ = phase::init;
};

class semaphore {
public:
    explicit semaphore(std::size_t permits) noexcept : permits_(permits) {}
    semaphore(const semaphore&) = delete;
    semaphore& operator=(const semaphore&) = delete;

    // co_await s.acquire(k) -> semaphore_permit holding k permits.
    semaphore_acquire_awaitable acquire(std::size_t k = 1) noexcept { return semaphore_acquire_awaitable(this, k); }

    // k permits if they are free and nobody is queued, else nullopt.
    std::optional<semaphore_permit> try_acquire(std::size_t k = 1) {
        std::lock_guard g(state_);
        if (closed_) return std::nullopt;
        if (k == 0) return semaphore_permit(this, 0);
        if (!waiters_.empty() || permits_ < k) return std::nullopt;
        permits_ -= k;
        return semaphore_permit(this, k);
    }

    // Adds k permits and wakes the waiters that now fit, in order.
    void release(std::size_t k = 1) noexcept {
        if (k == 0) return;
        detail::sync::waker_batch wake;
        std::unique_lock g(state_);
        permits_ += k;
        grant_locked(g, wake);
    }

    // Wakes every waiter, which then throws semaphore_closed, as every
    // later acquire does (see "Closing" above).
    void close() noexcept {
        detail::sync::waker_batch wake;
        std::unique_lock g(state_);
        closed_ = true;
        // Unlinked here, so a waiter's poll (and its destructor) knows it
        // was refused: linked() turns false without granted.
        while (auto* n = static_cast<node*>(waiters_.pop_front())) {
            wake.push(std::move(n->waker));
            if (wake.full()) {
                g.unlock();
                wake.wake_all();
                g.lock();
            }
        }
    }
    bool is_closed() const {
        std::lock_guard g(state_);
        return closed_;
    }

    // Snapshots, for diagnostics and tests.
    std::size_t available() const {
        std::lock_guard g(state_);
        return permits_;
    }
    std::size_t waiter_count() const {
        std::lock_guard g(state_);
        return waiters_.size();
    }

private:
    friend class semaphore_acquire_awaitable;
    using node = semaphore_acquire_awaitable::node;

    // Grants permits to the queue head while it fits. Whenever the batch is
    // full, wakes it with the lock released, then continues; a node is not
    // touched after it is granted.
    void grant_locked(std::unique_lock<aspen::detail::spin_mutex>& g, detail::sync::waker_batch& wake) noexcept {
        for (;;) {
            auto* n = static_cast<node*>(waiters_.front());
            if (!n || n->needed > permits_) return;
            permits_ -= n->needed;
            n->unlink();
            n->granted = true;
            wake.push(std::move(n->waker));
            if (wake.full()) {
                g.unlock();
                wake.wake_all();
                g.lock();
            }
        }
    }

    mutable aspen::detail::spin_mutex state_;
    std::size_t permits_;
    detail::sync::waiter_list waiters_;
    bool closed_ = false;
};

inline void semaphore_permit::release() noexcept {
    if (s_) {
        std::size_t n = std::exchange(count_, 0);
        std::exchange(s_, nullptr)->release(n);
    }
}

inline bool semaphore_acquire_awaitable::poll(aspen::context& cx) {
    switch (phase_) {
        case phase::init:
            if (poll_first(cx)) return phase_ == phase::owns;
            break;  // closed
        case phase::waiting: {
            std::lock_guard g(s_->state_);
            if (node_.granted) {
                phase_ = phase::owns;
                return true;
            }
            if (node_.linked()) {
                detail::sync::store_waker(node_.waker, cx);
                return false;
            }
            break;  // close() took it out of the queue
        }
        case phase::owns:
        case phase::done:
            throw std::logic_error("aspen::semaphore::acquire: the awaitable was already awaited");
    }
    // Thrown outside the semaphore's lock (it allocates).
    phase_ = phase::done;
    throw semaphore_closed();
}

// The first poll: takes the permits or queues; false if the semaphore is closed.
inline bool semaphore_acquire_awaitable::poll_first(aspen::context& cx) {
    std::lock_guard g(s_->state_);
    if (s_->closed_) return false;
    if (node_.needed == 0 || (s_->waiters_.empty() && s_->permits_ >= node_.needed)) {
        s_->permits_ -= node_.needed;
        phase_ = phase::owns;
        return true;
    }
    node_.waker = cx.waker();
    s_->waiters_.push_back(&node_);
    phase_ = phase::waiting;
    return true;
}

inline semaphore_permit semaphore_acquire_awaitable::await_resume() {
    rethrow_if_error();
    phase_ = phase::done;
    return semaphore_permit(s_, node_.needed);
}

inline semaphore_acquire_awaitable::~semaphore_acquire_awaitable() {
    switch (phase_) {
        case phase::waiting: {
            detail::sync::waker_batch wake;
            std::unique_lock g(s_->state_);
            if (node_.granted)
                s_->permits_ += node_.needed;  // assigned but never resumed: give them back
            else if (node_.linked())
                node_.unlink();  // it may have blocked the head: re-examine below
            s_->grant_locked(g, wake);
            break;
        }
        case phase::owns:
            if (node_.needed) s_->release(node_.needed);
            break;
        case phase::init:
        case phase::done:
            break;
    }
}

}  // namespace aspen
