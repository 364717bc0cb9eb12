// Runtime configuration. Every field has a working default; validate() names
// the field and the value it rejects.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

namespace aspen {

// One worker per hardware thread, at least one.
std::size_t default_workers() noexcept;

struct config {
    // Worker threads of a multi-threaded runtime.
    std::size_t workers = default_workers();
    // Slots in each worker's ring; a power of two in [2, 2^20].
    std::uint32_t local_queue_capacity = 256;
    // Random victims a searching worker tries before it gives up and parks.
    std::uint32_t steal_attempts = 32;
    // Every this many ticks a worker checks the injector before its own
    // queue, so tasks spawned from outside cannot starve.
    std::uint32_t global_queue_interval = 61;
    // Operations (channel, socket, timer, consume_budget) a task may do in
    // one poll before they start returning pending to make it yield.
    std::uint32_t coop_budget = 128;
    // Every this many ticks a busy worker polls the I/O driver without
    // blocking, so sockets and timers are served while nobody parks.
    std::uint32_t event_interval = 61;
    // Start with the clock paused (for tests): time moves only through
    // aspen::advance(), or by itself to the next timer when every worker is
    // idle and no spawn_blocking function runs, so timeouts in tests run
    // instantly and deterministically.
    bool start_paused = false;
    // Time every poll into the workers' poll_time_histogram and
    // longest_poll_ns (metrics.hpp): two clock reads a poll, so off by
    // default. To find tasks that hold a worker too long between awaits.
    bool poll_time_histogram = false;
    // Consecutive runs from the next slot before its task must wait behind
    // other ready work (a ping-ponging pair cannot starve the rest).
    std::uint32_t max_next_slot_runs = 3;
    // Threads of the spawn_blocking pool: started on demand up to this many
    // (further blocking tasks queue), each ends after blocking_keep_alive
    // without work. block_in_place's stand-in threads (not limited: each
    // call needs one at once) are kept for as long.
    std::size_t max_blocking_threads = 512;
    std::chrono::nanoseconds blocking_keep_alive = std::chrono::seconds(10);
    // Name given to worker threads (the OS keeps the first 15 characters).
    std::string thread_name = "aspen-worker";
    // Called on each worker thread as it starts / before it exits, with the
    // worker's index.
    std::function<void(std::size_t)> on_thread_start;
    std::function<void(std::size_t)> on_thread_stop;
    // Called on a worker thread just before it sleeps for want of work (on
    // its futex or in epoll_wait) and just after it wakes, as Tokio's
    // Builder::on_thread_park / on_thread_unpark; on a current-thread
    // runtime, on the thread in block_on around its wait in the I/O driver.
    // One pair per metrics park (worker_metrics::parks / unparks), including
    // a park that ends at once because a wake was already pending. Only the
    // park path tests them. A hook that throws is reported on stderr (once
    // per runtime and hook) and ignored: it must not end the worker.
    std::function<void()> on_thread_park;
    std::function<void()> on_thread_unpark;
    // Receives the exception of a task nobody will observe (detached, or its
    // handle dropped unawaited). Default: one line on stderr.
    std::function<void(std::exception_ptr)> unhandled_exception_handler;

    // Throws std::invalid_argument naming the field and the value.
    void validate() const;
};

}  // namespace aspen
