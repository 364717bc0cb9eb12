// Runtime metrics: counters each worker keeps for itself, read from any
// thread without stopping the runtime (each value is exact for its worker,
// the set is not one atomic snapshot).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace aspen {

// Buckets of worker_metrics::poll_time_histogram: bucket 0 counts polls
// shorter than 1 us, bucket i (1 <= i < 15) those of [2^(i-1), 2^i) us,
// bucket 15 those of 2^14 us (16.4 ms) and longer.
inline constexpr std::size_t poll_time_buckets = 16;

struct worker_metrics {
    std::uint64_t polls = 0;              // task polls (runs) on this worker
    std::uint64_t tasks_spawned = 0;      // spawns made from tasks on this worker
    std::uint64_t tasks_completed = 0;    // tasks that finished (or were cancelled) here
    std::uint64_t next_slot_runs = 0;     // tasks taken from the next slot
    std::uint64_t inlined_joins = 0;      // tasks run nested in a joiner's poll (the joined
                                          // task itself, or local work it helped with)
    std::uint64_t local_pushes = 0;       // tasks pushed into the local ring
    std::uint64_t overflows = 0;          // times half the ring moved to the injector
    std::uint64_t overflow_tasks = 0;     // tasks moved by those overflows
    std::uint64_t injector_pops = 0;      // tasks taken from the injector
    std::uint64_t steal_operations = 0;   // successful steals (each takes a batch)
    std::uint64_t tasks_stolen = 0;       // tasks taken by those steals
    std::uint64_t failed_steals = 0;      // victims tried that gave nothing
    std::uint64_t parks = 0;              // times the worker went to sleep
    std::uint64_t unparks = 0;            // times it woke up
    std::uint64_t send_polls = 0;         // reactor polls right after a TCP write to a
                                          // loopback peer (fewer when they find nothing)
    std::uint64_t budget_forced_yields = 0;  // times a task here yielded because its coop
                                             // budget was spent (not yield_now)
    // Now, not a count: tasks waiting in this worker's ring (a
    // current_thread runtime: in its run queue). The task a multi-thread
    // worker's next slot holds, and the up to 64 it has just spawned and
    // not yet published (see README's "How it works"), are not in it. The
    // workers' rings are read one after the other, so a sum over workers
    // may count a task that a thief moved meanwhile twice, or not at all.
    std::uint64_t local_queue_depth = 0;
    // Only with config::poll_time_histogram (else zero). A poll's time
    // includes the tasks it ran nested (a join that ran its child inline).
    std::array<std::uint64_t, poll_time_buckets> poll_time_histogram{};
    std::uint64_t poll_time_ns = 0;       // all polls together
    std::uint64_t longest_poll_ns = 0;    // the longest single poll
    // Time the worker was not parked (running tasks, polling the reactor,
    // searching for work), as Tokio's worker_total_busy_duration; the spell
    // it is in now included. A current_thread runtime counts only while a
    // block_on drives it. Totals add the workers' times.
    std::uint64_t busy_ns = 0;

    worker_metrics& operator+=(const worker_metrics& o) noexcept;
};

struct runtime_metrics {
    std::vector<worker_metrics> workers;  // one entry per worker
    std::uint64_t remote_spawns = 0;      // spawns from outside the runtime
    std::uint64_t remote_completions = 0; // tasks completed off the workers (abort, shutdown)
    std::uint64_t tasks_alive = 0;        // spawned and not yet complete
    std::uint64_t injector_depth = 0;     // tasks waiting in the injector now
    std::uint64_t timers_armed = 0;       // timers waiting in the timing wheel now
    std::uint64_t io_registrations = 0;   // sockets registered with the reactor now
    std::uint64_t io_would_block = 0;     // socket syscalls that found nothing to do (EAGAIN,
                                          // a connect in progress) before waiting for readiness
    std::uint64_t io_ready_events = 0;    // readiness events the reactor delivered to sockets
                                          // and fds (as Tokio's io_driver_ready_count)
    // The blocking pool (spawn_blocking), now. block_in_place's stand-in
    // threads are not in it.
    std::uint64_t blocking_threads = 0;       // threads started and not yet ended
    std::uint64_t idle_blocking_threads = 0;  // of those, waiting for a job
    std::uint64_t blocking_queue_depth = 0;   // jobs waiting for a thread

    worker_metrics total() const noexcept;
};

}  // namespace aspen
