// aspen::mutex: an async, FIFO-fair mutual-exclusion lock for tasks.
//
//   aspen::mutex m;
//   {
//       aspen::mutex_guard g = co_await m.lock();   // suspends, never blocks the worker
//       ... critical section (may itself co_await) ...
//   }                                               // unlocked here
//   if (auto g = m.try_lock()) { ... }
//
// Fairness: waiters are served strictly in the order they first polled
// lock(). Unlocking with waiters queued does not release the lock: it hands
// it directly to the first waiter, so a task that keeps re-locking cannot
// overtake the queue (and try_lock fails while anyone is queued).
//
// Cancel safety: `co_await m.lock()` is cancel-safe. The awaitable lives in
// the awaiting coroutine's frame; if the task is aborted (or the awaitable is
// destroyed for any other reason) while it waits, its destructor removes it
// from the queue. If the lock was already handed to it but the task had not
// resumed yet, the destructor passes the lock on to the next waiter (or
// releases it). So an aborted waiter never leaves the mutex locked, and no
// other waiter is skipped.
//
// Rules: the mutex must outlive every guard and every lock() awaitable.
// A guard may be moved to, and destroyed on, any thread. Awaiting the same
// lock() awaitable twice throws std::logic_error.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/detail/thread_parker.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/waker.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

namespace aspen {

class mutex;

// Owns the lock of a mutex; unlocks on destruction. Move-only.
class [[nodiscard]] mutex_guard {
public:
    mutex_guard() noexcept = default;
    mutex_guard(mutex_guard&& other) noexcept : m_(std::exchange(other.m_, nullptr)) {}
    mutex_guard& operator=(mutex_guard&& other) noexcept {
        if (this != &other) {
            unlock();
            m_ = std::exchange(other.m_, nullptr);
        }
        return *this;
    }
    mutex_guard(const mutex_guard&) = delete;
    mutex_guard& operator=(const mutex_guard&) = delete;
    ~mutex_guard() { unlock(); }

    // Unlocks early; the guard is empty afterwards.
    void unlock() noexcept;
    bool owns_lock() const noexcept { return m_ != nullptr; }
    explicit operator bool() const noexcept { return owns_lock(); }
    aspen::mutex* mutex() const noexcept { return m_; }

private:
    friend class aspen::mutex;
    friend class mutex_lock_awaitable;
    explicit mutex_guard(aspen::mutex* m) noexcept : m_(m) {}
    aspen::mutex* m_ = nullptr;
};

// What mutex::lock() returns; `co_await` it for a mutex_guard.
class [[nodiscard]] mutex_lock_awaitable : public detail::sync::leaf_awaitable<mutex_lock_awaitable> {
public:
    static constexpr const char* awaited_what = "aspen::mutex::lock";

    explicit mutex_lock_awaitable(aspen::mutex* m) noexcept : m_(m) {}
    mutex_lock_awaitable(mutex_lock_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~mutex_lock_awaitable();
    mutex_guard await_resume();

private:
    friend class detail::sync::leaf_awaitable<mutex_lock_awaitable>;
    friend class aspen::mutex;

    struct node : detail::sync::waiter_node {
        aspen::waker waker;
        bool granted = false;  // the unlocker handed the lock to this waiter
    };
    // Only the awaiting task reads or writes phase_ (polls and the destructor
    // never run concurrently); node_ is shared and guarded by the mutex's lock.
    enum class phase : unsigned char { init, waiting, owns, done };

    bool poll(aspen::context& cx);

    aspen::mutex* m_;
    node node_;
    phase phase_ = phase::init;
};

class mutex {
public:
    mutex() = default;
    mutex(const mutex&) = delete;
    mutex& operator=(const mutex&) = delete;

    // co_await m.lock() -> mutex_guard.
    mutex_lock_awaitable lock() noexcept { return mutex_lock_awaitable(this); }
    // For code outside the runtime, as Tokio's blocking_lock: lock()
    // sleeping this thread until the lock is its turn (in the same FIFO as
    // the tasks). From a plain thread or a spawn_blocking function; on a
    // runtime's thread it throws std::logic_error (it would block the worker).
    mutex_guard blocking_lock() { return detail::wait_on_this_thread("aspen::mutex::blocking_lock", lock()); }

    // The guard if the mutex was free and nobody is queued, else nullopt.
    std::optional<mutex_guard> try_lock() {
        std::lock_guard g(state_);
        if (locked_) return std::nullopt;
        locked_ = true;
        return std::optional<mutex_guard>(mutex_guard(this));
    }

    // Snapshots, for diagnostics and tests.
    bool is_locked() const {
        std::lock_guard g(state_);
        return locked_;
    }
    std::size_t waiter_count() const {
        std::lock_guard g(state_);
        return waiters_.size();
    }

private:
    friend class mutex_guard;
    friend class mutex_lock_awaitable;
    using node = mutex_lock_awaitable::node;

    // Releases the lock, or hands it to the first waiter; state_ is held.
    // The waiter's waker goes to `wake` (woken after the caller unlocks).
    void release_locked(aspen::waker& wake) noexcept {
        if (auto* n = static_cast<node*>(waiters_.pop_front())) {
            n->granted = true;
            wake = std::move(n->waker);
        } else {
            locked_ = false;
        }
    }
    void unlock() noexcept {
        aspen::waker w;
        {
            std::lock_guard g(state_);
            release_locked(w);
        }
        w.wake();
    }

    mutable aspen::detail::spin_mutex state_;
    // True from the moment someone owns the lock until it is released with
    // nobody queued; while waiters exist it stays true (direct hand-off).
    bool locked_ = false;
    detail::sync::waiter_list waiters_;
};

inline void mutex_guard::unlock() noexcept {
    if (m_) std::exchange(m_, nullptr)->unlock();
}

inline bool mutex_lock_awaitable::poll(aspen::context& cx) {
    std::lock_guard g(m_->state_);
    switch (phase_) {
        case phase::init:
            if (!m_->locked_) {
                m_->locked_ = true;  // free implies nobody queued
                phase_ = phase::owns;
                return true;
            }
            node_.waker = cx.waker();
            m_->waiters_.push_back(&node_);
            phase_ = phase::waiting;
            return false;
        case phase::waiting:
            if (node_.granted) {
                phase_ = phase::owns;
                return true;
            }
            detail::sync::store_waker(node_.waker, cx);  // a spurious poll: still queued
            return false;
        case phase::owns:
        case phase::done:
            break;
    }
    throw std::logic_error("aspen::mutex::lock: the awaitable was already awaited");
}

inline mutex_guard mutex_lock_awaitable::await_resume() {
    rethrow_if_error();
    phase_ = phase::done;
    return mutex_guard(m_);
}

inline mutex_lock_awaitable::~mutex_lock_awaitable() {
    switch (phase_) {
        case phase::waiting: {
            aspen::waker w;
            {
                std::lock_guard g(m_->state_);
                if (node_.granted)
                    m_->release_locked(w);  // handed the lock but never resumed: pass it on
                else
                    node_.unlink();  // still queued: just leave
            }
            w.wake();
            break;
        }
        case phase::owns:  // ready but await_resume never ran
            m_->unlock();
            break;
        case phase::init:
        case phase::done:
            break;
    }
}

}  // namespace aspen
