// The thread pool behind spawn_blocking. Not on the hot path: one mutex and
// two condition variables guard everything.
//
// Threads: a submit wakes an idle thread if there is one that nobody has
// claimed yet, else starts a new thread while fewer than max_threads run;
// otherwise the job waits in the FIFO queue for the next free thread. A
// thread with nothing to do for keep_alive ends.
//
// Claims (why `idle` and `notified` are counted separately): a submit that
// wakes an idle thread takes it out of `idle` at once and adds a token to
// `notified`, so two submits in a row never count on the same sleeper (the
// second starts a thread instead). A woken thread consumes a token; a thread
// whose wait timed out exits only if no token is left for it, since a token
// means a submit counted on it.
//
// Lifetime: the state is reference-counted and every thread holds a
// reference, so a thread that outlives shutdown_timeout (and the runtime)
// still finds its mutex and queue when its function returns. A running job
// never touches the runtime: it only completes its own blocking_job.
#pragma once

#include <aspen/spawn_blocking.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>

namespace aspen::detail {

class runtime_link;  // scheduler/scheduler.hpp

class blocking_pool {
public:
    blocking_pool(std::size_t max_threads, std::chrono::nanoseconds keep_alive);
    ~blocking_pool();
    blocking_pool(const blocking_pool&) = delete;
    blocking_pool& operator=(const blocking_pool&) = delete;

    // Takes the job's pool reference; false (and the reference stays with
    // the caller) once the pool is shut down.
    bool submit(blocking_job* j);

    // No job queued or running (a paused clock must not jump ahead of a
    // blocking function: it is work the runtime is waiting for).
    bool idle() const;
    // For runtime_metrics: threads started and not yet ended, those of them
    // waiting for a job (not yet claimed by a submit), jobs queued.
    struct load {
        std::size_t threads, idle_threads, queued_jobs;
    };
    load current_load() const;
    // fn(ctx) runs (on a pool thread, under the pool's lock: keep it short)
    // each time the last job in flight finishes, until shutdown.
    void on_drained(void (*fn)(void*) noexcept, void* ctx);
    // The runtime the pool works for, which runtime_handle::current() gives
    // on its threads (as Tokio's Handle::current inside spawn_blocking). Set
    // once, before the first submit.
    void set_owner(std::shared_ptr<runtime_link> owner);

    // Cancels the queued jobs and waits for the running ones: for ever
    // without a timeout, else at most `timeout`. Returns how many were still
    // running when it stopped waiting. Later calls return 0 at once: threads
    // left behind by a timeout are not waited for again.
    std::size_t shutdown(std::optional<std::chrono::nanoseconds> timeout);

    struct state;

private:
    std::shared_ptr<state> s_;
};

// Pool threads alive in this process, across all runtimes (a thread counts
// until its last instruction touching pool state): lets tests wait until
// the threads a shutdown_timeout left behind are gone.
std::size_t blocking_threads_alive() noexcept;

// On a pool thread, its pool's owner; elsewhere null.
std::shared_ptr<runtime_link> blocking_thread_owner();
// Makes the calling thread count as a pool thread of `owner` (null: of
// none) for blocking_thread_owner, and returns the previous setting for the
// caller to restore: block_in_place runs its function so. `owner` must
// outlive the setting.
const std::shared_ptr<runtime_link>* exchange_blocking_owner(const std::shared_ptr<runtime_link>* owner) noexcept;

}  // namespace aspen::detail
