// aspen::runtime_handle, as Tokio's runtime::Handle: a small copyable value
// that lets any thread spawn onto a runtime it does not own.
//
//   aspen::runtime_handle h = rt.handle();        // or, inside a task:
//   auto h2 = aspen::runtime_handle::current();
//   std::thread([h] { auto j = h.spawn(work()); }).detach();
//
// A handle may outlive its runtime. Once the runtime is shut down or
// destroyed, spawn / spawn_blocking / block_on throw runtime_shut_down and
// destroy what they were given (its destructors run); metrics() works until
// the runtime object is destroyed, then throws runtime_shut_down. Never a
// use-after-free: the runtime's destructor waits for the handle calls that
// are using it (they hold a shared lock on a control block the runtime
// clears before it goes).
//
// A default-constructed handle is empty: every call but valid() throws
// std::logic_error (spawn destroys its task first).
//
// Handles are not for the fork-join hot path: each call takes a shared lock.
// Inside a task, aspen::spawn is cheaper.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/metrics.hpp>
#include <aspen/spawn_blocking.hpp>
#include <aspen/task.hpp>

#include <memory>
#include <optional>
#include <shared_mutex>
#include <utility>

namespace aspen {

namespace detail {

class runtime_link;  // src/scheduler/scheduler.hpp
class runtime_base;

// Throws std::logic_error when called on a runtime's thread (blocking there
// would deadlock the worker).
void check_blocking_allowed(const char* what);
// The scheduler's run_until_complete (the type is private to the library).
void run_until_complete_on(scheduler* s, task_header* t);
void spawn_on_blocking_owner(task_header* t);  // aspen/spawn.hpp

// Starts t on s (spawn_root: refused once s shuts down).
template <class T>
join_handle<T> spawn_on(scheduler* s, task<T> t) {
    task_header* h = release_task(std::move(t));
    spawn_root(s, h);
    return join_handle<T>(h);
}

// block_on's wait, on the scheduler that runs h's task, known to live.
template <class T>
T finish_block_on(scheduler* s, join_handle<T>& h) {
    run_until_complete_on(s, h.header());
    return h.take_result();
}

// block_on's wait when the runtime went away after it accepted h's task:
// its shutdown destroyed the task (or it had finished), so h is complete
// and its join gives the outcome, task_cancelled if it was destroyed.
template <class T>
T finish_after_runtime_gone(join_handle<T>& h) {
    block_until_complete(h.header());  // returns at once
    return h.take_result();
}

}  // namespace detail

class runtime_handle {
public:
    // Empty: every call but valid() throws std::logic_error.
    runtime_handle() noexcept = default;

    // The runtime running the calling task (or whose worker / block_on
    // thread this is, or whose spawn_blocking function calls it, as Tokio's
    // Handle::current). Throws std::logic_error elsewhere (a plain thread:
    // pass a handle in).
    static runtime_handle current();

    bool valid() const noexcept { return static_cast<bool>(link_); }

    // Starts t on the runtime from any thread.
    template <class T>
    join_handle<T> spawn(task<T> t) const {
        return spawn_as(std::move(t), "aspen::runtime_handle::spawn");
    }

    // Runs f() on the runtime's blocking pool (see aspen/spawn_blocking.hpp).
    template <class F>
    join_handle<detail::blocking_result_t<F>> spawn_blocking(F&& f) const {
        detail::pinned_scheduler p = pin("aspen::runtime_handle::spawn_blocking");
        return detail::spawn_blocking_on(p.sched, std::forward<F>(f));
    }

    // As runtime::block_on: from ordinary code, never from inside a task.
    // The runtime's destructor waits until it returns (its shutdown cancels
    // t, so that is soon: t's join then throws task_cancelled). Spawned
    // before the wait pins the runtime, so that a refused t is destroyed
    // outside the lock, as spawn does. A runtime destroyed between the two
    // has destroyed t too: that also ends in task_cancelled (or t's outcome,
    // had it finished), not runtime_shut_down, which only a refused t gives.
    template <class T>
    T block_on(task<T> t) const {
        const char* what = "aspen::runtime_handle::block_on";
        detail::check_blocking_allowed(what);
        join_handle<T> h = spawn_as(std::move(t), what);
        std::optional<detail::pinned_scheduler> p = try_pin();
        if (!p) return detail::finish_after_runtime_gone(h);
        return detail::finish_block_on(p->sched, h);
    }

    runtime_metrics metrics() const;

private:
    friend class detail::runtime_base;
    friend void detail::spawn_on_blocking_owner(detail::task_header* t);
    friend detail::pinned_scheduler detail::pin_blocking_owner(const char* what);
    explicit runtime_handle(std::shared_ptr<detail::runtime_link> link) noexcept : link_(std::move(link)) {}

    // The scheduler under a shared lock; throws std::logic_error (empty
    // handle) or runtime_shut_down (runtime destroyed), naming `what`.
    detail::pinned_scheduler pin(const char* what) const;
    // As pin on a non-empty handle, but nullopt once the runtime is destroyed.
    std::optional<detail::pinned_scheduler> try_pin() const;
    template <class T>
    join_handle<T> spawn_as(task<T> t, const char* what) const {
        detail::task_header* h = detail::release_task(std::move(t));
        spawn_released(h, what);
        return join_handle<T>(h);
    }
    // spawn_root through the link; on refusal destroys t (outside the
    // lock: its destructors may use a handle too), then throws.
    void spawn_released(detail::task_header* t, const char* what) const;

    std::shared_ptr<detail::runtime_link> link_;
};

}  // namespace aspen
