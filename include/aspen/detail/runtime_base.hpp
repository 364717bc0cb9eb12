// What both runtimes (multi-threaded and current-thread) share: block_on and
// spawn from outside a task, shutdown, metrics. The scheduler behind it
// decides how a task runs.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/metrics.hpp>
#include <aspen/runtime_handle.hpp>
#include <aspen/spawn_blocking.hpp>
#include <aspen/task.hpp>

#include <chrono>
#include <cstddef>
#include <memory>

namespace aspen::detail {

class runtime_base {
public:
    // Runs t to completion and returns its value (or rethrows its
    // exception). Call from ordinary code, never from inside a task.
    template <class T>
    T block_on(task<T> t) {
        check_blocking_allowed("aspen::block_on");
        join_handle<T> h = spawn(std::move(t));
        return finish_block_on(sched_, h);
    }

    // Starts t on this runtime from any thread.
    template <class T>
    join_handle<T> spawn(task<T> t) {
        return spawn_on(sched_, std::move(t));
    }

    // Runs f() on this runtime's blocking pool, from any thread (see
    // aspen/spawn_blocking.hpp).
    template <class F>
    join_handle<blocking_result_t<F>> spawn_blocking(F&& f) {
        return spawn_blocking_on(sched_, std::forward<F>(f));
    }

    // Stops the workers and destroys every task that has not finished,
    // running its destructors; cancels the blocking functions that have not
    // started and waits for the running ones. Later spawns throw
    // runtime_shut_down. Once shut down, later calls do nothing.
    void shutdown();
    // The same, but waits at most d for running blocking functions; returns
    // how many it left running (they finish on their own threads).
    std::size_t shutdown_timeout(std::chrono::nanoseconds d);
    runtime_metrics metrics() const;
    // A handle that spawns onto this runtime from anywhere and may outlive
    // it (see aspen/runtime_handle.hpp).
    runtime_handle handle() const;

protected:
    explicit runtime_base(scheduler* s) noexcept : sched_(s) {}
    ~runtime_base();
    runtime_base(const runtime_base&) = delete;
    runtime_base& operator=(const runtime_base&) = delete;

private:
    scheduler* sched_;
};

}  // namespace aspen::detail
