// aspen::spawn_blocking: run a blocking function (file I/O, a C library that
// sleeps, heavy CPU work) on a separate thread pool, so it does not hold up
// the workers that run tasks.
//
//   aspen::join_handle<int> h = aspen::spawn_blocking([] { return read_config_file(); });
//   int v = co_await h;                    // its value, or its exception
//   auto h2 = rt.spawn_blocking(fn);       // the same from outside the runtime
//
// The pool starts a thread whenever a function is submitted and no pool
// thread is idle, up to config::max_blocking_threads (default 512); beyond
// that, functions queue (FIFO). A thread that finds no work for
// config::blocking_keep_alive (default 10 s) ends.
//
// The join_handle behaves like a spawned task's:
// * abort() before the function started: it never runs; awaiting the handle
//   throws task_cancelled.
// * abort() while it runs cannot interrupt it (as in Tokio): the function
//   runs to the end on its pool thread and its value or exception is thrown
//   away; awaiting the handle throws task_cancelled at once.
// * an exception the function throws goes to whoever awaits the handle, or
//   to the runtime's unhandled_exception_handler if the handle was detached.
//
// Shutdown: runtime::shutdown() (and the runtime's destructor) cancels the
// functions that have not started and waits for those that are running;
// runtime::shutdown_timeout(d) waits at most d and returns how many it left
// running. Those keep their pool thread until they return; they must not use
// the runtime after it is destroyed (rt.spawn from them throws
// runtime_shut_down while the runtime object still exists). A
// runtime_handle they hold stays safe: its calls throw runtime_shut_down
// then too.
//
// A blocking function runs on a plain thread, not in a task: aspen::spawn
// and co_await are not available there; use runtime::spawn / block_on on a
// runtime it can reach.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/detail/task_header.hpp>
#include <aspen/errors.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/task.hpp>
#include <aspen/waker.hpp>

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace aspen {

namespace detail {

// One blocking function, shared by the task that waits for it and the pool.
//
// phase: queued -> running -> done (the pool thread), or queued -> cancelled
// (abort, or the pool at shutdown); exactly one CAS out of `queued` wins, so
// the function runs at most once and never after a cancel.
// waker: the waiting task's, under `lock`. The pool thread sets `done`
// before it takes the lock to read the waker, and the waiter re-checks the
// phase under the lock after storing it, so the wake cannot be missed.
struct blocking_job {
    enum phase_t : std::uint8_t { queued, running, done, cancelled };

    std::atomic<std::uint8_t> phase{queued};
    std::atomic<std::uint32_t> refs{1};
    void (*run)(blocking_job*) noexcept = nullptr;      // calls the function, stores its outcome
    void (*destroy)(blocking_job*) noexcept = nullptr;  // deletes the concrete job
    aspen::detail::spin_mutex lock;
    aspen::waker waker;
    blocking_job* next = nullptr;  // the pool's queue

    std::uint8_t load_phase() const noexcept {
        // acquire: a task that sees `done` sees the outcome the pool stored.
        return phase.load(std::memory_order_acquire);
    }
    bool try_cancel() noexcept {
        std::uint8_t expected = queued;
        // acq_rel: the CAS decides between the pool thread and the canceller.
        return phase.compare_exchange_strong(expected, cancelled, std::memory_order_acq_rel);
    }
    void wake_waiter() noexcept {
        aspen::waker w;
        {
            std::lock_guard g(lock);
            w = std::move(waker);
        }
        w.wake();
    }
    void release() noexcept {
        // acq_rel: the last owner sees every write of the other before it deletes.
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(this);
    }
};

template <class F, class R>
struct blocking_job_of final : blocking_job {
    explicit blocking_job_of(F f) : fn(std::move(f)) {
        run = &run_fn;
        destroy = [](blocking_job* j) noexcept { delete static_cast<blocking_job_of*>(j); };
    }

    // The function is destroyed as soon as it returns, on the pool thread,
    // so what it captured is released then (as a finished task's frame is).
    static void run_fn(blocking_job* j) noexcept {
        auto* me = static_cast<blocking_job_of*>(j);
        try {
            if constexpr (std::is_void_v<R>) std::invoke(*me->fn);
            else me->value.emplace(std::invoke(*me->fn));
        } catch (...) {
            me->error = std::current_exception();
        }
        me->fn.reset();
    }

    std::optional<F> fn;
    std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
    std::exception_ptr error;
};

// Hands a job (holding a reference for the pool) to the scheduler's pool;
// throws runtime_shut_down once the pool no longer takes work
// (src/blocking/blocking_pool.cpp).
void submit_blocking(scheduler* s, blocking_job* j);

// The waiting task's reference. Dropping it (the task finished, or was
// aborted or destroyed by shutdown) cancels the job if it has not started.
class blocking_job_ref {
public:
    explicit blocking_job_ref(blocking_job* j) noexcept : j_(j) {}
    blocking_job_ref(blocking_job_ref&& other) noexcept : j_(std::exchange(other.j_, nullptr)) {}
    blocking_job_ref(const blocking_job_ref&) = delete;
    blocking_job_ref& operator=(const blocking_job_ref&) = delete;
    blocking_job_ref& operator=(blocking_job_ref&&) = delete;
    ~blocking_job_ref() {
        if (!j_) return;
        j_->try_cancel();
        aspen::waker stale;  // ours; dropped after the lock is released
        {
            std::lock_guard g(j_->lock);
            stale = std::move(j_->waker);
        }
        j_->release();
    }
    blocking_job* get() const noexcept { return j_; }

private:
    blocking_job* j_;
};

// The leaf the waiting task suspends on until the pool thread is done.
template <class F, class R>
class blocking_wait {
public:
    explicit blocking_wait(blocking_job* j) noexcept : j_(static_cast<blocking_job_of<F, R>*>(j)) {}
    blocking_wait(const blocking_wait&) = delete;
    blocking_wait& operator=(const blocking_wait&) = delete;

    bool await_ready() {
        auto& t = detail::require_current_task("aspen::spawn_blocking");
        return detail::poll_leaf_now(t, this, &poll);
    }
    void await_suspend(std::coroutine_handle<> h) noexcept { detail::suspend_on_leaf(h, this, &poll); }
    R await_resume() {
        if (j_->load_phase() == blocking_job::cancelled) throw task_cancelled();
        // Taken, not copied: the exception then dies on this side, never in
        // the pool thread's release (exception_ptr's count lives in the
        // uninstrumented libstdc++, so TSan cannot see that hand-over).
        if (j_->error) std::rethrow_exception(std::exchange(j_->error, nullptr));
        if constexpr (!std::is_void_v<R>) return std::move(*j_->value);
    }

private:
    static bool finished(std::uint8_t p) noexcept { return p == blocking_job::done || p == blocking_job::cancelled; }
    static bool poll(void* self, aspen::context& cx) noexcept {
        blocking_job* j = static_cast<blocking_wait*>(self)->j_;
        if (finished(j->load_phase())) return true;
        std::lock_guard g(j->lock);
        if (!j->waker.will_wake(cx.waker())) j->waker = cx.waker();
        return finished(j->load_phase());
    }

    blocking_job_of<F, R>* j_;
};

template <class F, class R>
task<R> await_blocking(blocking_job_ref job) {
    co_return co_await blocking_wait<F, R>(job.get());
}

template <class F>
using blocking_result_t = std::invoke_result_t<std::decay_t<F>&>;

template <class F>
join_handle<blocking_result_t<F>> spawn_blocking_on(scheduler* s, F&& f) {
    using Fn = std::decay_t<F>;
    using R = blocking_result_t<F>;
    static_assert(!std::is_reference_v<R>, "aspen::spawn_blocking: the function must return a value, not a reference");
    auto* job = new blocking_job_of<Fn, R>(Fn(std::forward<F>(f)));
    // The job's first reference goes to the task; the second is ours, for
    // the submit below, and taken before the spawn: once spawned, a worker
    // or a shutdown on another thread may end the task and drop its
    // reference at once (this was a use-after-free). relaxed: nobody else
    // sees the job yet; the pool's queue publishes it.
    job->refs.fetch_add(1, std::memory_order_relaxed);
    task_header* th = nullptr;
    try {
        // If spawning fails, destroying the frame drops the task's reference.
        th = release_task(await_blocking<Fn, R>(blocking_job_ref(job)));
        spawn_root(s, th);
    } catch (...) {
        job->release();
        throw;
    }
    join_handle<R> h(th);
    try {
        submit_blocking(s, job);
    } catch (...) {
        job->release();
        h.abort();
        throw;
    }
    return h;
}

// A runtime's scheduler, kept alive by the shared lock on its link.
struct pinned_scheduler {
    std::shared_lock<std::shared_mutex> lock;
    scheduler* sched;
};

// Off a runtime's threads, inside a spawn_blocking or block_in_place
// function: that runtime, pinned (runtime_shut_down once it is shut down).
// Elsewhere std::logic_error naming `what`. (src/runtime_handle.cpp)
pinned_scheduler pin_blocking_owner(const char* what);

}  // namespace detail

// Runs f() on the blocking pool of the runtime this code runs in: from a
// task, on a runtime's thread, or (as Tokio's) inside a spawn_blocking or
// block_in_place function, where it goes to that function's runtime.
// Elsewhere std::logic_error: use runtime::spawn_blocking or a handle.
template <class F>
join_handle<detail::blocking_result_t<F>> spawn_blocking(F&& f) {
    if (detail::scheduler* s = detail::current_scheduler()) return detail::spawn_blocking_on(s, std::forward<F>(f));
    detail::pinned_scheduler p = detail::pin_blocking_owner("aspen::spawn_blocking");
    return detail::spawn_blocking_on(p.sched, std::forward<F>(f));
}

}  // namespace aspen
