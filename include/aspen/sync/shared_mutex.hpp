// aspen::shared_mutex: an async readers-writer lock for tasks.
//
//   aspen::shared_mutex m;
//   {
//       aspen::shared_mutex_read_guard r = co_await m.lock_shared();   // many at once
//   }
//   {
//       aspen::shared_mutex_write_guard w = co_await m.lock();         // alone
//   }
//   if (auto w = m.try_lock()) { ... }
//   if (auto r = m.try_lock_shared()) { ... }
//
// Built like Tokio's RwLock: a FIFO semaphore holding max_readers permits; a
// reader takes one, a writer takes all of them. So the lock is fair in
// arrival order: a writer waiting at the head holds back the readers that
// came after it (writers cannot starve), and the readers queued behind a
// writer go in together once it is done. try_lock / try_lock_shared fail
// while anyone is queued.
//
// Cancel safety: `co_await m.lock()` and `co_await m.lock_shared()` are
// cancel-safe (they inherit the semaphore's guarantees): an aborted waiter
// leaves the queue, the waiters it held back are re-examined, and a lock
// granted to a task that never resumed is given back. No permit is lost.
//
// Rules: the shared_mutex must outlive every guard and awaitable. Guards
// may be moved to, and destroyed on, any thread. Awaiting the same awaitable
// twice throws std::logic_error.
#pragma once

#include <aspen/detail/thread_parker.hpp>
#include <aspen/sync/semaphore.hpp>

#include <coroutine>
#include <cstddef>
#include <optional>
#include <utility>

namespace aspen {

namespace detail::sync {

// A lock held through semaphore permits; unlocks on destruction. Move-only.
class shared_mutex_guard_base {
public:
    shared_mutex_guard_base() noexcept = default;
    explicit shared_mutex_guard_base(semaphore_permit p) noexcept : permit_(std::move(p)) {}

    bool owns_lock() const noexcept { return permit_.count() != 0; }
    // Unlocks early; the guard is empty afterwards.
    void unlock() noexcept { permit_.release(); }

private:
    semaphore_permit permit_;
};

// `co_await` it for a Guard; wraps the semaphore's acquire.
template <class Guard>
class [[nodiscard]] shared_mutex_awaitable {
public:
    shared_mutex_awaitable(semaphore& s, std::size_t permits) noexcept : inner_(s.acquire(permits)) {}
    bool await_ready() { return inner_.await_ready(); }
    void await_suspend(std::coroutine_handle<> h) noexcept { inner_.await_suspend(h); }
    Guard await_resume() { return Guard(inner_.await_resume()); }

private:
    semaphore_acquire_awaitable inner_;
};

}  // namespace detail::sync

// Shared (read) ownership of a shared_mutex.
class [[nodiscard]] shared_mutex_read_guard : public detail::sync::shared_mutex_guard_base {
    using shared_mutex_guard_base::shared_mutex_guard_base;
};

// Exclusive (write) ownership of a shared_mutex.
class [[nodiscard]] shared_mutex_write_guard : public detail::sync::shared_mutex_guard_base {
    using shared_mutex_guard_base::shared_mutex_guard_base;
};

class shared_mutex {
public:
    // Readers that may hold the lock at once (more wait their turn).
    static constexpr std::size_t max_readers = std::size_t{1} << 30;

    shared_mutex() noexcept : sem_(max_readers) {}
    shared_mutex(const shared_mutex&) = delete;
    shared_mutex& operator=(const shared_mutex&) = delete;

    // co_await m.lock() -> shared_mutex_write_guard.
    detail::sync::shared_mutex_awaitable<shared_mutex_write_guard> lock() noexcept { return {sem_, max_readers}; }
    // co_await m.lock_shared() -> shared_mutex_read_guard.
    detail::sync::shared_mutex_awaitable<shared_mutex_read_guard> lock_shared() noexcept { return {sem_, 1}; }

    // For code outside the runtime, as Tokio's RwLock::blocking_write and
    // blocking_read: lock() and lock_shared() sleeping this thread until the
    // lock is its turn (the same FIFO as the tasks). From a plain thread or a
    // spawn_blocking function; on a runtime's thread they throw
    // std::logic_error (it would block the worker).
    shared_mutex_write_guard blocking_lock() {
        return shared_mutex_write_guard(
            detail::wait_on_this_thread("aspen::shared_mutex::blocking_lock", sem_.acquire(max_readers)));
    }
    shared_mutex_read_guard blocking_lock_shared() {
        return shared_mutex_read_guard(
            detail::wait_on_this_thread("aspen::shared_mutex::blocking_lock_shared", sem_.acquire(1)));
    }

    std::optional<shared_mutex_write_guard> try_lock() { return try_take<shared_mutex_write_guard>(max_readers); }
    std::optional<shared_mutex_read_guard> try_lock_shared() { return try_take<shared_mutex_read_guard>(1); }

    // Snapshots, for diagnostics and tests: tasks holding it shared (0 also
    // while a writer holds it) and tasks queued.
    std::size_t readers() const {
        std::size_t free = sem_.available();
        return free == 0 ? 0 : max_readers - free;
    }
    // (Also true with max_readers readers: the two cannot be told apart.)
    bool is_write_locked() const { return sem_.available() == 0; }
    std::size_t waiter_count() const { return sem_.waiter_count(); }

private:
    template <class Guard>
    std::optional<Guard> try_take(std::size_t permits) {
        if (auto p = sem_.try_acquire(permits)) return Guard(std::move(*p));
        return std::nullopt;
    }

    semaphore sem_;
};

}  // namespace aspen
