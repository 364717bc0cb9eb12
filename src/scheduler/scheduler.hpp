// The interface every scheduler (multi-threaded, current-thread) gives the
// task machinery, plus what they share: the registry of live tasks and the
// handler for exceptions nobody will observe.
#pragma once

#include "blocking/blocking_pool.hpp"
#include "io/driver.hpp"
#include "scheduler/registry.hpp"

#include <aspen/config.hpp>
#include <aspen/detail/task_header.hpp>
#include <aspen/metrics.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <vector>

namespace aspen::detail {

struct worker_counters;  // multi_thread.hpp

// A statistic written only by its worker thread (so no RMW), read by anyone.
class counter {
public:
    void add(std::uint64_t n = 1) noexcept {
        // relaxed: a statistic; single writer, so load+store loses nothing.
        v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }
    // relaxed: as add.
    void raise_to(std::uint64_t n) noexcept {
        if (n > get()) v_.store(n, std::memory_order_relaxed);
    }

private:
    std::atomic<std::uint64_t> v_{0};
};

// Shared by a scheduler and the runtime_handles that reach it: the one
// thing a handle may touch after its runtime is gone. The runtime clears
// sched under the exclusive lock before it destroys the scheduler; a handle
// holds the shared lock for the length of a call (runtime_handle.cpp).
class runtime_link {
public:
    explicit runtime_link(scheduler* s) noexcept : sched_(s) {}
    std::shared_mutex& mutex() noexcept { return mutex_; }
    // Null once the runtime is destroyed. Read under mutex().
    scheduler* sched() const noexcept { return sched_; }
    // Waits for every handle call in flight, then cuts the handles off.
    void close() noexcept {
        std::unique_lock lock(mutex_);
        sched_ = nullptr;
    }

private:
    std::shared_mutex mutex_;
    scheduler* sched_;
};

enum class schedule_kind {
    spawn,    // new task from a task: next slot of this worker
    wake,     // woken by a waker: next slot if woken from this worker
    requeue,  // woken while it was running: back into the local queue
    yield,    // yield_now / budget exhausted: behind all ready work
};

class scheduler {
public:
    explicit scheduler(const config& cfg, std::size_t registry_shards);
    virtual ~scheduler();
    scheduler(const scheduler&) = delete;
    scheduler& operator=(const scheduler&) = delete;

    // t carries one reference for the queue it is put in.
    virtual void schedule(task_header* t, schedule_kind kind) = 0;
    // Blocks (or, single-threaded, drives the loop) until t is complete.
    virtual void run_until_complete(task_header* t) = 0;
    virtual void shutdown() = 0;
    virtual runtime_metrics metrics() const = 0;
    // Shard of the registry the calling thread should use.
    virtual std::size_t registry_shard() const noexcept { return 0; }
    // How many threads run this scheduler's tasks (parallel algorithms size
    // their chunks by it).
    virtual std::size_t parallelism() const noexcept { return 1; }
    // True on this scheduler's own worker / driver thread (both schedulers
    // set tls_context's sched and worker there). Not virtual: spawn asks.
    bool on_own_thread() const noexcept;
    // Counts a completed task for tasks_alive (spawned - completed): in the
    // statistic of the thread's own worker, else as a remote completion.
    // Not virtual: every completion asks.
    void count_completion() noexcept;
    // Takes a task of the calling thread's own queue that can start without
    // a leaf poll (it never ran, or only yielded): `want` if it is in the
    // next slot, at its stage_slot or among the newest join_scan_depth staged tasks
    // (current_thread: of its queue) or the ring's newest entry, else the newest
    // entry of all if the poll's coop budget has a unit left, which it then
    // spends (helping while waiting must not keep the worker from its
    // fairness checks for long). One call serves a joiner's whole choice.
    // The caller then holds the queue's reference and runs the task nested
    // in its poll. A task's fields other than sched belong to its poller:
    // read only once it is taken.
    virtual task_header* take_local(task_header* want) noexcept = 0;
    // True when t sits in the calling thread's own next slot, which no other
    // thread reads (see drop_join_handle).
    virtual bool in_own_next_slot(const task_header*) const noexcept { return false; }
    // A stream write just completed on this scheduler's thread: harvest the
    // readiness it may have caused here (multi_thread.hpp, "Sends").
    virtual void poll_after_send() {}
    // aspen::block_in_place from this scheduler's own thread (tls sched is
    // this): runs fn(arg) without holding up the tasks queued here, or
    // throws std::logic_error where that cannot be (this default: the
    // current-thread scheduler, whose one thread runs every task).
    virtual void block_in_place(void (*fn)(void*), void* arg);
    task_registry& registry() noexcept { return registry_; }
    // The runtime's I/O and time driver (timers, sockets).
    driver& io_driver() noexcept { return driver_; }
    const driver& io_driver() const noexcept { return driver_; }
    // Accepts a new task or refuses it once shutdown began. A task spawned
    // from outside is registered now (under the registry lock, so it is
    // either swept by shutdown or refused); one spawned by this scheduler's
    // own thread is found in its queue, which shutdown drains after joining.
    bool accept_spawn(task_header* t) noexcept;
    // Registers t before it may go idle; false once shutdown began.
    bool register_task(task_header* t) noexcept;
    void report_unhandled(std::exception_ptr e) noexcept;
    std::uint64_t remote_completions() const noexcept {
        // relaxed: a statistic.
        return remote_completions_.load(std::memory_order_relaxed);
    }
    std::uint32_t coop_budget() const noexcept { return coop_budget_; }
    // The spawn_blocking pool; runtime_base shuts it down after the scheduler.
    blocking_pool& blocking() noexcept { return blocking_; }
    const std::shared_ptr<runtime_link>& link() const noexcept { return link_; }
    // config::on_thread_park / on_thread_unpark, called by the schedulers
    // around a sleep (the park path only, so a test of an empty function
    // costs nothing while busy).
    void before_park() noexcept {
        if (on_park_) call_hook(on_park_, park_hook_threw_, "on_thread_park");
    }
    void after_unpark() noexcept {
        if (on_unpark_) call_hook(on_unpark_, unpark_hook_threw_, "on_thread_unpark");
    }

    // Held by a thread that is not one of this scheduler's own while it
    // queues a task (a wake or a spawn from outside) and notifies a worker.
    // From the push on, a worker or shutdown may run the task to its end and
    // the runtime may be destroyed, while that thread still has the notify,
    // which reads this scheduler, ahead of it: shutdown ends with
    // wait_for_remote_pushes. The scheduler is alive when the scope begins:
    // a woken task is registered and not yet queued, so shutdown's sweep
    // waits for it; a spawn from outside comes through the runtime or a
    // handle that keeps it alive.
    class remote_push_scope {
    public:
        explicit remote_push_scope(scheduler& s) noexcept : s_(s) {
            // relaxed: the push that follows (a release) carries it to
            // whoever takes the task; shutdown's join of the workers or its
            // own drain of the queues then orders it before the final load.
            s_.remote_pushes_.fetch_add(1, std::memory_order_relaxed);
        }
        ~remote_push_scope() {
            // release: our reads of the scheduler happen before shutdown's
            // acquire load that sees the count at zero, and the free after it.
            s_.remote_pushes_.fetch_sub(1, std::memory_order_release);
        }
        remote_push_scope(const remote_push_scope&) = delete;
        remote_push_scope& operator=(const remote_push_scope&) = delete;

    private:
        scheduler& s_;
    };

protected:
    // metrics(): the fields both schedulers fill alike (timers, I/O, the
    // blocking pool).
    void add_driver_and_pool_metrics(runtime_metrics& m) const;
    // The last step of both schedulers' shutdown, once no worker runs any
    // more: cancels every registered task and destroys what the queues
    // still hold (through drain_queues) until both are empty, then waits
    // until no thread is inside a remote_push_scope, so that the scheduler
    // may be freed.
    void finish_shutdown() {
        cancel_tasks_not_held({});
        wait_for_remote_pushes();
    }
    // finish_shutdown's cancellation, while some threads are still inside
    // polls (a multi-threaded runtime's block_in_place functions): `held`
    // lists the tasks of those polls (run or run nested there), which are
    // only marked cancelled; returns once every task left is one of them.
    void cancel_tasks_not_held(const std::vector<task_header*>& held);
    virtual bool drain_queues() = 0;  // true if it destroyed anything
    // Destroys a task taken out of a run queue (holding the queue's ref).
    static void destroy_queued(task_header* t) noexcept;
    // Destroys every task of an injector list (shutdown); true if any.
    template <class Injector>
    static bool destroy_all(Injector& inj) noexcept {
        std::size_t n = 0;
        for (task_header* t = inj.take_all(n); t;) {
            task_header* next = t->queue_next;
            destroy_queued(t);
            t = next;
        }
        return n != 0;
    }

private:
    static void call_hook(const std::function<void()>& hook, std::atomic<bool>& threw, const char* name) noexcept;
    // finish_shutdown's wait: no thread may still be inside a
    // remote_push_scope when the scheduler is freed.
    void wait_for_remote_pushes() const noexcept;

    // First member: destroyed last, after shutdown destroyed every task
    // (whose timers and sockets deregister from it).
    driver driver_;
    task_registry registry_;
    std::function<void(std::exception_ptr)> handler_;
    std::uint32_t coop_budget_;
    blocking_pool blocking_;
    std::atomic<std::uint64_t> remote_completions_{0};
    std::atomic<std::uint32_t> remote_pushes_{0};  // remote_push_scopes open
    std::function<void()> on_park_;
    std::function<void()> on_unpark_;
    std::atomic<bool> park_hook_threw_{false};
    std::atomic<bool> unpark_hook_threw_{false};
    std::shared_ptr<runtime_link> link_;
};

// Test seam: when set, called by a thread outside the scheduler between
// queuing a task and notifying a worker, so a test can hold that thread in
// the window remote_push_scope covers (tests/scheduler_test.cpp). Null
// otherwise: one relaxed load on the remote path only.
inline std::atomic<void (*)()> after_remote_push_hook{nullptr};
inline void after_remote_push() {
    // relaxed: set by a test before the threads it concerns start.
    if (auto hook = after_remote_push_hook.load(std::memory_order_relaxed)) hook();
}

// ---- shared by the schedulers (src/task/task_core.cpp) ----------------------
// Takes back the join waker register_join_waker left in t, so nothing
// will call it; false when t completed first (its completer calls it, or
// has).
bool unregister_join_waker(task_header* t) noexcept;
// Builds the header of a root frame about to be spawned on s: NOTIFIED,
// JOIN_INTEREST and the refs of its handle, its life and the queue.
// Inline: both spawn paths (spawn_root, spawn_on_worker) run it.
inline void build_spawned_header(task_header* t, scheduler* s) noexcept {
    // allocate_frame set only the block's size and layout: build the rest.
    std::uint32_t size = t->alloc_size;
    std::uint32_t result_offset = t->result_offset;
    new (t) task_header;
    t->alloc_size = size;
    t->result_offset = result_offset;
    t->spawned = true;
    t->sched = s;
    t->resume_point = std::coroutine_handle<>::from_address(t->frame());
    // relaxed: the queue push that follows publishes the header.
    t->state.store(state::notified | state::join_interest | 3 * state::ref_one, std::memory_order_relaxed);
}
// A spawn the scheduler refused (it is shutting down): frees the task, then
// throws runtime_shut_down.
[[noreturn]] void refuse_spawn(task_header* t);
// Frees a released task that was never spawned (its header need not be
// built), running its frame's destructors.
void discard_unspawned(task_header* t) noexcept;
// spawn_root without the refusal: false once s shuts down, and t is then
// still the caller's to discard.
inline bool try_spawn_root(scheduler* s, task_header* t) {
    build_spawned_header(t, s);
    if (!s->accept_spawn(t)) return false;
    s->schedule(t, schedule_kind::spawn);
    return true;
}
// Sets this thread's task_local list head (used outside tasks) and returns
// the old one: block_in_place's function sees its task's bindings.
local_binding* exchange_thread_bindings(local_binding* head) noexcept;
enum class poll_outcome { idle, requeue, yield, complete };
// Polls a task taken from a run queue (the caller holds the queue's ref).
poll_outcome poll_task(task_header* t) noexcept;

// Per-thread scheduling context. Constant-initialised and trivially
// destructible, so access is a plain thread-pointer offset (no init guard).
struct thread_context {
    scheduler* sched = nullptr;   // runtime this thread works for
    void* worker = nullptr;       // the scheduler's per-thread state
    task_header* current = nullptr;
    counter* completions = nullptr;  // the worker's tasks_completed
    // The worker's metrics. Their counts of polls and of nested runs tell an
    // aspen::unconstrained scope whether it ends in the stretch of a poll it
    // began in (see unconstrained_scope in task_core.cpp), at no cost to
    // the poll.
    worker_counters* counters = nullptr;
    std::uint32_t budget = 0;     // coop budget left in this poll
};
inline thread_local thread_context tls_context{};
inline thread_context& tls() noexcept { return tls_context; }

// Helping while waiting (take_local) costs one unit of the poll's coop
// budget; the budget is this thread's own.
inline bool may_help() noexcept { return tls_context.budget != 0; }
inline void spend_help_unit() noexcept { --tls_context.budget; }
// How far below the newest entry of its thread's own queue a join looks for
// its target (take_local): deep enough for a parent awaiting a dozen
// children in spawn order, short enough that a target that is elsewhere
// (stolen, in the ring) costs little to miss.
inline constexpr std::uint32_t join_scan_depth = 16;

inline bool scheduler::on_own_thread() const noexcept {
    return tls_context.sched == this && tls_context.worker != nullptr;
}

inline void scheduler::count_completion() noexcept {
    if (tls_context.sched == this && tls_context.completions) tls_context.completions->add();
    // relaxed: a statistic; ordered for readers by the COMPLETE CAS after it.
    else remote_completions_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace aspen::detail
