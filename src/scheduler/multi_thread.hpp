// The multi-threaded work-stealing scheduler (see the project's design notes,
// DESIGN.md, "The scheduler"; kept outside this repository).
//
// Where a task goes:
//   spawn / wake from this worker -> the worker's next slot; the previous
//                                    occupant is staged, then published to
//                                    the local ring (see "Staging" below)
//   woken while running            -> local ring (after the poll)
//   yield_now / coop budget spent  -> the oldest end of the local ring
//                                    (behind all local work and a batch
//                                    pulled from the injector; the first a
//                                    thief takes), the injector when the
//                                    ring is full or a thief is copying
//   spawn / wake from elsewhere    -> injector, then wake a sleeper
// Where a worker looks (worker::next_task, poll_driver_when_dry, search):
//   every global_queue_interval ticks the injector first (fairness), then
//   the next slot (at most max_next_slot_runs in a row), the ring (newest
//   first), a batch from the injector, then the I/O driver without
//   blocking (if nobody else holds it and anything is registered or armed),
//   then as a searcher the oldest half of random victims' rings, then it
//   parks (idle.hpp has the protocol).
// Why the driver before the victims: in I/O-bound work (tcp_echo) a worker
// runs dry between two readiness batches of its sockets many thousand times
// a second. Stealing then takes tasks the victim was about to run (a CAS
// each side, the sockets' kernel state moves to the other CPU) and, when
// the victim has nothing either, ends in a futex park that the next wake
// must undo with a syscall (measured: ~1,100 parks per worker per run and
// ~28% of the polls on stolen tasks, against ~110 parks and ~1% with the
// dry poll). The dry poll is the same non-blocking poll busy workers make
// every event_interval ticks; it runs outside the search/park handshake
// (the worker is neither searching nor parked, and what it wakes goes
// through schedule() like any local wake), so the idle protocol and its
// model are unchanged.
// Sends. A completed stream write to a loopback peer (poll_after_send)
// makes the worker poll the reactor at once, without blocking: when the
// peer is a task of this runtime, the kernel has already queued the bytes
// and marked its socket readable, and the wake puts the peer task into this
// worker's next slot. A request/response pair then stays on one worker, its
// sockets' kernel state hot in that CPU's cache, instead of the reply being
// harvested by whichever worker polls next (tcp_echo at 2 workers: ~260 ms
// -> ~217 ms; before, half the pairs crossed CPUs on every message and a
// crossing costs ~1.5x the kernel time). One worker has no other CPU to
// lose, so a runtime with one worker skips it; a poll that finds nothing
// (the peer is another process) doubles a pause of up to 63 sends before
// the next one, so such streams pay at most one syscall in 64 sends.
// Parking: the first worker to park takes the I/O driver and sleeps in
// epoll_wait (until I/O, the next timer or an unpark through the eventfd);
// the others sleep on their futex. Busy workers poll the driver without
// blocking every event_interval ticks. (park.hpp has the token protocol.)
//
// Spawning from a worker. aspen::spawn inside a task's poll on a worker
// (nearly every spawn of fork-join code) calls spawn_on_worker, which
// finds the worker in one thread-local (polling_worker, set by run_task
// around the poll) and does what spawn_root and schedule(spawn) do for
// that case: build the header, refuse it if the registry is closed (as
// accept_spawn does; shutdown closes it only after joining the workers,
// so this guards that order), count it, next slot, stage the displaced
// task. spawn_root would first ask which scheduler this thread serves and
// whether this is its own thread, then make a virtual call that asks
// again. Instructions a spawn adds (callgrind, fib(22)): 268 -> 234;
// skynet -7.6% in all, nqueens(10) -3.1%. fib(30) and skynet at 1 worker
// 2% to 3% faster in three alternating benchmark runs, nqueens unchanged.
// Everything else (a spawn outside a poll, the single-threaded runtime,
// runtime::spawn) takes spawn_root.
//
// Staging. A task displaced from the next slot during a poll first goes to
// a small owner-only array (worker::staged, up to 64 tasks, at most half the
// ring's capacity) instead of the ring. Fork-join code joins most children
// on the same worker moments later; a staged child is taken back without
// any atomic operation, where a ring push and pop cost two lock-prefixed
// CASes, and from its recorded slot or the array's top 16 places (place_of), so a
// parent joining its children in spawn order adopts each one. Staged tasks
// are not stealable, like the next slot, so they are published to the ring
// (one seq_cst CAS for the batch, then the idle protocol's check):
//   * the oldest half when the array is full. The oldest are the children
//     a fork-join parent joins first, so a full array hands a thief exactly
//     the tasks its owner is about to want: with 16 places skynet
//     (ten children a node, six levels of nested helping) overflowed 11,111
//     times a run, and at 2 workers its median was 15.0 to 17.5 ms against
//     13.6 to 17.0 with 64 (eight alternating pairs, 64 faster in six);
//     128 was no better than 64;
//   * all of them as soon as some worker searches or sleeps (a relaxed
//     load of the idle word at each staging: a thief wants work now);
//   * all of them when the poll ends (run_task): between polls nothing is
//     staged, so the run loop, the idle protocol and its model see exactly
//     the next slot and the ring, as before. A task displaced between polls
//     (by the driver's wakers, or a completion waking its joiner) goes
//     straight to the ring (schedule() stages only while tls_context.current
//     names a running task).
// No task can be stranded by staging: it belongs to a worker that is awake
// and running a poll, which publishes it by the end of that poll at the
// latest. What staging can delay is parallelism, never progress: a worker
// that starts searching while a peer stages is served at the peer's next
// staging or poll end.
#pragma once

#include "scheduler/busy_time.hpp"
#include "scheduler/idle.hpp"
#include "scheduler/injector.hpp"
#include "scheduler/local_queue.hpp"
#include "scheduler/park.hpp"
#include "scheduler/scheduler.hpp"
#include "scheduler/thread_cache.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace aspen::detail {

struct worker_counters {
    counter polls, tasks_spawned, tasks_completed, next_slot_runs, inlined_joins, local_pushes, overflows, overflow_tasks, injector_pops,
        steal_operations, tasks_stolen, failed_steals, parks, unparks, send_polls, budget_forced_yields;
    std::array<counter, poll_time_buckets> poll_time;
    counter poll_time_ns, longest_poll_ns;
    busy_time busy;
    worker_metrics read() const noexcept;
    void record_poll_time(std::chrono::nanoseconds d) noexcept;
};

// poll_task(t), timed into c (config::poll_time_histogram). Out of line
// and cold, so that the untimed path, which every poll takes by default,
// keeps its code as it was: with the timing inline in the worker's poll
// loop, nqueens at 1 worker took 121 to 125 ms against 116 to 117 before,
// with the same instruction count (callgrind), in alternating runs.
poll_outcome timed_poll(task_header* t, worker_counters& c) noexcept;

// Polls t for a worker, counting the poll; with config::poll_time_histogram
// (`timed`) it also times it, so the clock is read only when asked for.
inline poll_outcome counted_poll(task_header* t, worker_counters& c, bool timed) noexcept {
    c.polls.add();
    if (timed) [[unlikely]]
        return timed_poll(t, c);
    return poll_task(t);
}

class multi_thread_scheduler final : public scheduler {
public:
    explicit multi_thread_scheduler(const config& cfg);
    ~multi_thread_scheduler() override;

    void schedule(task_header* t, schedule_kind kind) override;
    void run_until_complete(task_header* t) override;
    void shutdown() override;
    runtime_metrics metrics() const override;
    std::size_t registry_shard() const noexcept override;
    std::size_t parallelism() const noexcept override { return workers_.size(); }
    task_header* take_local(task_header* want) noexcept override;
    bool in_own_next_slot(const task_header* t) const noexcept override;
    void poll_after_send() override;
    void block_in_place(void (*fn)(void*), void* arg) override;
    // spawn_on_worker's body; `w` is the polling_worker (a worker*).
    static void spawn_from_poll(void* w, task_header* t);
    // detail::publish_local_spawns on a worker during a poll.
    static void publish_from_poll(void* w) noexcept;
    // in_own_next_slot for the polling_worker `w`, inline and without the
    // virtual call (drop_join_handle: `spawn(...).detach()` in a task).
    static bool in_next_slot_of(const void* w, const task_header* t) noexcept {
        return static_cast<const worker*>(w)->next == t;
    }
    // The join's fast path (suspend_on_join): if `want` is in the polling
    // worker's next slot or staged array (place_of; owner-only places: a
    // task there is this thread's, no other thread polls it, so ok() may
    // read its fields) and ok(want) holds, takes it out as take_local would and
    // returns true. Inline, defined below.
    template <class Ok>
    static bool take_target_if(void* w, task_header* want, Ok ok) noexcept;
    // take_local's body for the polling_worker, inline (defined below) for
    // the join loop's helping turns (continue_join).
    static task_header* take_local_from_poll(void* w, task_header* want) noexcept;

private:
    [[noreturn]] void stop_started_workers(const std::system_error& e, std::size_t failed);

    struct alignas(128) worker {
        worker(multi_thread_scheduler& s, std::size_t i, std::uint32_t capacity);
        multi_thread_scheduler& owner;
        std::size_t index;
        local_queue<task_header> queue;
        task_header* next = nullptr;  // owner-only: never stolen
        // Owner-only, oldest first; see "Staging" above.
        std::array<task_header*, 64> staged{};
        std::uint32_t num_staged = 0;
        std::uint32_t staged_cap;
        parker park;
        std::uint64_t rng;            // xorshift state, per worker
        std::uint32_t ticks_to_injector;  // next injector-first check
        std::uint32_t ticks_to_event;     // next non-blocking driver poll
        std::uint32_t next_runs = 0;
        // poll_after_send: sends to skip before the next look, and the
        // current length of that pause (doubled after each empty look).
        std::uint32_t send_polls_to_skip = 0;
        std::uint32_t send_poll_backoff = 0;
        bool searching = false;
        // Set while a stand-in thread runs this worker (block_in_place): the
        // flag that asks it to give the worker back. Read and written only
        // by the thread that runs the worker.
        const std::atomic<bool>* handback = nullptr;
        std::vector<task_header*> batch;  // injector batch buffer
        worker_counters counters;
        std::thread thread;
    };

    void run(worker& w);
    void start_thread(worker& w);
    void run_loop(worker& w);
    void stop_thread(worker& w);
    void stand_in(worker& w, const std::atomic<bool>& handback, bool& let_go);
    struct stand_in_args {
        multi_thread_scheduler* self;
        worker* w;
        const std::atomic<bool>* handback;
        bool* let_go;
    };
    static void run_stand_in(void* args);  // a thread_cache job
    // block_in_place after fn, when B has begun: asks B for w and waits.
    void take_place_back(worker& w, std::atomic<bool>& handback, thread_cache::job& stand_in_job,
                         const bool& let_go);
    void leave_place();
    void unhold(task_header* current, std::size_t num_held);
    static bool handback_requested(const worker& w) noexcept;
    task_header* next_task(worker& w);
    task_header* pop_injector_batch(worker& w);
    task_header* search(worker& w);
    void found_work(worker& w);
    void run_task(worker& w, task_header* t);
    void park(worker& w);
    bool park_on_driver(worker& w);
    bool poll_driver();
    task_header* poll_driver_when_dry(worker& w);
    bool try_take_driver() noexcept;
    void release_driver() noexcept;
    void push_local(worker& w, task_header* t);
    void enqueue_local(worker& w, task_header* t);
    void stage(worker& w, task_header* t);
    void push_yielded(worker& w, task_header* t);
    std::size_t take_injector_batch(worker& w, std::size_t room);
    void publish_staged(worker& w, std::uint32_t n);
    bool futex_will_do() const noexcept;
    void push_local_batch(worker& w, task_header* const* ts, std::uint32_t n);
    task_header* take_ring_top(worker& w, task_header* want) noexcept;
    // Where a worker's own places hold a task: the next slot, or the staged
    // array at `index` (place_of: the task's stage_slot, else join_scan_depth
    // places down).
    struct place {
        enum { none, next, staged } where;
        std::uint32_t index;
    };
    static place place_of(const worker& w, const task_header* want) noexcept;
    static void take_from(worker& w, place p) noexcept;
    void notify_one();
    void notify_if_work_pending();
    bool drain_queues() override;
    worker* this_worker() const noexcept;
    // acquire: pairs with shutdown()'s release store, so a worker that sees
    // the flag also sees what shutdown did before it.
    bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }

    config cfg_;
    std::vector<std::unique_ptr<worker>> workers_;
    injector<task_header> injector_;
    idle_state idle_;
    std::atomic<bool> stopping_{false};
    // Held by the one worker that parks on or polls the driver (a try-lock:
    // nobody ever waits for it).
    std::atomic<bool> driver_taken_{false};
    std::atomic<std::uint64_t> remote_spawns_{0};
    // block_in_place calls whose function runs: the paused clock must not
    // jump ahead meanwhile (that function is work the runtime waits for).
    std::atomic<std::uint32_t> in_place_{0};
    // The stand-ins' threads, kept blocking_keep_alive for the next call.
    thread_cache stand_ins_;
    // Shutdown while block_in_place functions run (multi_thread.cpp,
    // "block_in_place and shutdown"), all guarded by places_mutex_: the
    // worker places a thread runs (its loop, or its poll after a hand-back),
    // the tasks held in those functions' polls,
    // whether a stand-in let go of its place for shutdown while its lender's
    // function ran, and whether shutdown has since cancelled the tasks (a
    // lender may then run its place again). places_cv_ signals all three.
    std::mutex places_mutex_;
    std::condition_variable places_cv_;
    std::size_t places_run_ = 0;
    // The tasks whose polls are inside block_in_place functions now (each
    // call's task and the joiners it runs nested in).
    std::vector<task_header*> held_;
    bool place_let_go_ = false;
    bool tasks_cancelled_early_ = false;
    std::mutex shutdown_mutex_;
    bool shut_down_ = false;
};

// Where `want` is among the worker's own places: the next slot, or the
// staged array: at the slot it was staged in (task_header::stage_slot,
// kept true when take_from moves a task; publish_staged's shift makes it
// stale), else looked for from the top down to join_scan_depth places.
// Not only the top: a parent that spawned k children and awaits them in
// spawn order (skynet, nqueens, a loop over handles) wants the oldest of
// them, k - 1 places down; taken from there it runs adopted (no RMW at its
// end) instead of after its k - 1 siblings, each run as help (a CAS at each
// end, a budget unit each). Shared by take_local_from_poll and
// take_target_if.
inline multi_thread_scheduler::place multi_thread_scheduler::place_of(const worker& w,
                                                                      const task_header* want) noexcept {
    if (w.next == want) return {place::next, 0};
    // relaxed: a hint (task_header::stage_slot), checked against the array.
    std::uint32_t slot = want->stage_slot.load(std::memory_order_relaxed);
    if (slot < w.num_staged && w.staged[slot] == want) return {place::staged, slot};
    std::uint32_t low = w.num_staged > join_scan_depth ? w.num_staged - join_scan_depth : 0;
    for (std::uint32_t i = w.num_staged; i > low; --i)
        if (w.staged[i - 1] == want) return {place::staged, i - 1};
    return {place::none, 0};
}

// Takes the task at place p (not none) out, a staged one by moving the top
// task into its place (the array's order only decides which tasks reach the
// ring first when it fills): the caller then runs it nested in its poll, an
// inlined join.
inline void multi_thread_scheduler::take_from(worker& w, place p) noexcept {
    if (p.where == place::next) {
        w.next = nullptr;
    } else {
        task_header* top = w.staged[--w.num_staged];
        w.staged[p.index] = top;
        top->stage_slot.store(static_cast<std::uint8_t>(p.index), std::memory_order_relaxed);  // a hint
    }
    w.counters.inlined_joins.add();
}

inline task_header* multi_thread_scheduler::take_local_from_poll(void* opaque, task_header* want) noexcept {
    worker& w = *static_cast<worker*>(opaque);
    // The next slot and the staged array are the worker's own: `want` from
    // either (place_of), else (helping) the newest of them. Only when both
    // are empty, the ring's newest entry.
    place p = place_of(w, want);
    // A target that waits on a leaf (woken, queued) needs a real poll.
    if (p.where != place::none && want->leaf_poll) p.where = place::none;
    if (p.where == place::none) {
        if (w.next && may_help()) p = {place::next, 0};
        else if (w.num_staged && may_help()) p = {place::staged, w.num_staged - 1};
        else return w.owner.take_ring_top(w, want);
    }
    task_header* taken = p.where == place::next ? w.next : w.staged[p.index];
    if (taken->leaf_poll) return nullptr;  // waits on a leaf: needs a real poll
    take_from(w, p);
    if (taken != want) spend_help_unit();
    return taken;
}

template <class Ok>
inline bool multi_thread_scheduler::take_target_if(void* opaque, task_header* want, Ok ok) noexcept {
    worker& w = *static_cast<worker*>(opaque);
    place p = place_of(w, want);
    if (p.where == place::none || !ok(want)) return false;
    take_from(w, p);
    return true;
}

}  // namespace aspen::detail
