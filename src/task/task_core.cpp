// The task state machine: spawn, poll, wake, abort, join, completion and
// reference counting. The transition table is in
// include/aspen/detail/task_header.hpp; each function below is one row (or a
// few) of it. Every state change is a CAS or RMW on task_header::state.
// Model: spec/task_state.pml checks these transitions with spin (one poller
// at a time, frame destroyed once, freed once at refcount 0, no lost wake,
// joiner woken iff registered); `bash spec/run.sh` runs it.
#include "scheduler/multi_thread.hpp"  // the join's fast path (suspend_on_join)
#include "scheduler/scheduler.hpp"
#include "sync/futex.hpp"

#include <aspen/coop.hpp>
#include <aspen/detail/frame_pool.hpp>
#include <aspen/errors.hpp>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>

namespace aspen::detail {

namespace {

std::uint64_t refs(std::uint64_t s) noexcept { return s >> state::ref_shift; }

// The last reference is gone. The frame went at completion (the life ref
// is only dropped by complete(), after it destroyed the frame or found
// nothing in it to destroy), so only the block with the header and the
// result slot is left.
void on_last_ref(task_header* t) noexcept {
    assert(t->frame_destroyed);
    free_task_memory(t);
}

// ---- wakers of tasks ---------------------------------------------------------
void waker_clone(void* p) noexcept { ref_inc(static_cast<task_header*>(p)); }
void waker_wake_by_ref(void* p) noexcept;
void waker_wake(void* p) noexcept {
    waker_wake_by_ref(p);
    ref_dec(static_cast<task_header*>(p));
}
void waker_drop(void* p) noexcept { ref_dec(static_cast<task_header*>(p)); }

constexpr waker_vtable task_waker_vtable{waker_clone, waker_wake, waker_wake_by_ref, waker_drop};

// A waker that borrows the poller's reference instead of taking one.
struct borrowed_waker {
    aspen::waker w;
    explicit borrowed_waker(task_header* t) noexcept : w(&task_waker_vtable, t) {}
    ~borrowed_waker() { w.release_borrowed(); }
};

void waker_wake_by_ref(void* p) noexcept {
    auto* t = static_cast<task_header*>(p);
    // acquire on failure: retry with fresh flags. acq_rel on success: release
    // publishes what the waker's caller wrote (the data that makes the leaf
    // ready) to the poller, who acquires the word before polling.
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    for (;;) {
        if (s & state::complete) return;
        if (s & state::notified) {
            // Queued (or run nested, see start_inline): already due for a
            // poll. Record the wake once for a nested run's suspension.
            if ((s & (state::running | state::rewoken)) ||
                t->state.compare_exchange_weak(s, s | state::rewoken, std::memory_order_acq_rel,
                                               std::memory_order_acquire))
                return;
            continue;
        }
        if (s & state::running) {
            if (t->state.compare_exchange_weak(s, s | state::notified, std::memory_order_acq_rel,
                                               std::memory_order_acquire))
                return;  // the poller re-queues it after its poll
            continue;
        }
        std::uint64_t next = (s | state::notified) + state::ref_one;  // the queue's ref
        if (t->state.compare_exchange_weak(s, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
            t->sched->schedule(t, schedule_kind::wake);
            return;
        }
    }
}

// Process-wide set of schedulers still alive, so a join handle dropped after
// its runtime is gone can still report an unobserved exception.
std::mutex live_schedulers_mutex;
std::unordered_set<const scheduler*>& live_schedulers() {
    static std::unordered_set<const scheduler*> set;
    return set;
}

// One line on stderr: the last resort for an exception nobody observes.
void print_unobserved(std::exception_ptr e, const char* where) noexcept {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "aspen: unobserved exception in %s: %s\n", where, ex.what());
    } catch (...) {
        std::fprintf(stderr, "aspen: unobserved non-standard exception in %s\n", where);
    }
}

void report(scheduler* s, std::exception_ptr e) noexcept {
    std::lock_guard lock(live_schedulers_mutex);
    if (live_schedulers().count(s)) s->report_unhandled(e);
    else print_unobserved(e, "a task whose runtime is gone");
}
void report(task_header* t) noexcept { report(t->sched, t->error); }

// The task whose frame cancel_running is destroying on this thread.
thread_local task_header* destroying = nullptr;

// join_by_call: the child it runs now (innermost).
thread_local constinit task_header* called_child = nullptr;

// The word once t completes: COMPLETE set, the poller's flags cleared,
// `dropped` references (life, poll) gone.
std::uint64_t completed_word(std::uint64_t s, std::uint64_t dropped) noexcept {
    return ((s | state::complete) & ~(state::running | state::notified | state::rewoken)) -
           dropped * state::ref_one;
}

// The word of a task run nested by the joiner that awaits its handle shows
// nobody else: the refs of that handle, the life and the poll (no waker
// clone, abort_handle or shutdown snapshot), no JOIN_WAKER, not COMPLETE.
bool only_the_joiner_holds(std::uint64_t s) noexcept {
    return refs(s) == 3 && !(s & (state::join_waker | state::complete)) && (s & state::join_interest);
}

// The fast end of an inlined join (see on_root_final): t ran nested in the
// poll of the joiner that awaits its handle, so that handle cannot go away
// or register a waker meanwhile. If the refcount shows nothing but the
// handle, the life and the poll ref (no waker clone, no shutdown snapshot),
// nobody else can touch the word except abort(), whose CAS only adds
// CANCELLED: a plain store may overwrite that bit, which is the same as an
// abort that came after completion. Saves the lock-prefixed CAS.
[[gnu::hot]] bool try_complete_exclusive(task_header* t) noexcept {
    // acquire: as complete()'s load.
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    if (!only_the_joiner_holds(s)) return false;
    std::uint64_t next = completed_word(s, 2) & ~state::cancelled;
    // release: publishes the result and frame_destroyed to the handle's
    // acquire (is_complete / drop_join_handle), as complete()'s CAS does.
    t->state.store(next, std::memory_order_release);
    return true;
}

// The end of a task nobody else holds: the word shows only its life ref
// and this poller's ref (RUNNING, or NOTIFIED for a nested run; no handle,
// waker clone, abort_handle or shutdown snapshot). Whoever could change
// the word would hold a ref, and a ref is only had from another one, so
// nobody will: no RMW, no COMPLETE to publish (nobody is left to read it),
// and the memory is freed here. Detached tasks that finish without waiting
// on anything (spawn_many, chained_spawn) end so.
[[gnu::hot]] bool try_complete_alone(task_header* t) noexcept {
    // acquire: a waker clone dropped by another thread (its release RMW)
    // happens before the free below.
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    if ((s & ~(state::running | state::notified)) != 2 * state::ref_one) return false;
    if (t->error && !t->cancelled_outcome) report(t);
    on_last_ref(t);
    return true;
}

// complete()'s second half, once the frame is gone and the completion
// counted: COMPLETE goes into the word, the joiner is woken, refs dropped.
// `handle_is_ours`: the caller runs t nested in its awaiter's poll.
[[gnu::always_inline]] inline void publish_completion(task_header* t, bool handle_is_ours) noexcept {
    if (handle_is_ours ? try_complete_exclusive(t) : try_complete_alone(t)) return;
    bool report_error = t->error && !t->cancelled_outcome;
    // acq_rel: release publishes the result / frame_destroyed to whoever
    // acquires COMPLETE (joiner, last ref); acquire pairs with a joiner's
    // release of join_waker. When there is nothing left to do with t
    // afterwards, the same CAS drops both refs; otherwise we keep the poll
    // ref until we are done reading t.
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    bool work_after;
    for (;;) {
        work_after = (s & state::join_waker) || (report_error && !(s & state::join_interest));
        std::uint64_t next = completed_word(s, work_after ? 1 : 2);
        if (t->state.compare_exchange_weak(s, next, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    if (!work_after) {
        if (refs(s) == 2) on_last_ref(t);
        return;
    }
    if (s & state::join_waker) {
        aspen::waker w = std::move(t->join_waker);
        w.wake();
    }
    // Nobody will read an exception the handle side no longer wants.
    if (report_error && !(s & state::join_interest)) report(t);
    ref_dec(t);
}

// RUNNING is ours; the root finished or the frame was destroyed by cancel.
// Publishes the outcome, wakes the joiner, drops the life and poll refs.
[[gnu::hot]] void complete(task_header* t, bool handle_is_ours = false) noexcept {
    // Finished normally: its outcome is in the header and the result slot,
    // so the frame goes now, releasing the task's parameters and resources
    // before anyone learns it completed. (A root whose frame holds nothing
    // to release marked it destroyed at its final suspend: see task.hpp.)
    if (!t->frame_destroyed) {
        t->frame_destroyed = true;
        destroy_root_frame(t);
    }
    // Both before the joiner is woken: then the task must no longer count
    // as alive. The count first: on a foreign thread (an abort) leaving the
    // registry may let shutdown finish and free the scheduler, whose
    // remote-completion counter the count writes. We hold RUNNING, so no
    // shutdown sweep needs the task meanwhile.
    t->sched->count_completion();
    if (t->registered) t->sched->registry().remove(t);
    publish_completion(t, handle_is_ours);
}

// RUNNING and CANCELLED are ours: destroy the frame at this suspension
// point (running every local's destructor), then complete.
[[gnu::noinline]] void cancel_running(task_header* t) noexcept {
    t->frame_destroyed = true;
    t->cancelled_outcome = true;
    task_header* saved = tls_context.current;
    tls_context.current = nullptr;
    // A destructor's exception is caught by the frame: report_if_destroying.
    // (A destructor may abort another task: nested, so restore.)
    task_header* outer = std::exchange(destroying, t);
    destroy_root_frame(t);
    destroying = outer;
    tls_context.current = saved;
    complete(t);
}

}  // namespace

thread_local constinit std::uint32_t nested_calls = 0;

task_header* current_task() noexcept { return tls_context.current; }
scheduler* current_scheduler() noexcept { return tls_context.sched; }

// Out of line and cold, so the hot callers stay small.
[[noreturn, gnu::cold, gnu::noinline]] void throw_outside_task(const char* what) {
    throw std::logic_error(std::string(what) + ": awaited outside a task running on an aspen runtime");
}

[[gnu::hot]] task_header& require_current_task(const char* what) {
    if (!tls_context.current) throw_outside_task(what);
    return *tls_context.current;
}

void suspend_on_leaf(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll) noexcept {
    task_header* t = tls_context.current;
    t->resume_point = h;
    t->leaf = leaf;
    t->leaf_poll = poll;
}

bool poll_leaf_now(task_header& t, void* leaf, leaf_poll_fn poll) {
    borrowed_waker bw(&t);
    context cx(bw.w);
    return poll(leaf, cx);
}

namespace {
// The poll's budget is spent: go on only inside aspen::unconstrained. Only
// a spent budget asks, so the hot path is as before and an unconstrained
// task pays this call per operation only once its budget is at zero. The
// budget is never refilled: tasks run nested meanwhile share it, and must
// still find it spent.
[[gnu::cold, gnu::noinline]] bool unconstrained_now() noexcept {
    task_header* t = tls_context.current;
    return t && t->unconstrained != 0;
}
}  // namespace

bool coop_try_consume() noexcept {
    if (tls_context.budget == 0) return unconstrained_now();
    --tls_context.budget;
    return true;
}

// Where the scope began is told by the worker's metrics, which count every
// poll (polls) and every task run nested in one (inlined_joins). Equal
// counts on the same worker when it ends: the task neither suspended nor
// ran another task nested since, so it is in the same stretch of the same
// poll, and the budget left when the scope began is still its own. The
// counters are this thread's own (only their worker writes them), so their
// relaxed loads (counter::get) read what this thread wrote last. (A
// block_in_place inside the stretch lends the worker to a stand-in, whose
// polls move the counts: the scope then ends as in a later poll, giving
// back a full budget; the join that took the worker back ordered those
// writes before these loads.)
unconstrained_scope::unconstrained_scope()
    : task_(&require_current_task("aspen::unconstrained")),
      counters_(tls_context.counters),
      polls_(tls_context.counters ? tls_context.counters->polls.get() : 0),
      nested_runs_(tls_context.counters ? tls_context.counters->inlined_joins.get() : 0),
      budget_(tls_context.budget) {
    ++task_->unconstrained;
}

unconstrained_scope::~unconstrained_scope() {
    --task_->unconstrained;
    // Destroyed by abort or shutdown: no poll of the task to give back to.
    if (tls_context.current != task_) return;
    const worker_counters* c = tls_context.counters;
    bool same_worker = c && c == counters_;
    if (same_worker && c->polls.get() == polls_ && c->inlined_joins.get() == nested_runs_) {
        tls_context.budget = budget_;  // the same stretch: body is not charged
    } else if (!task_->inline_parent && !(same_worker && c->polls.get() == polls_)) {
        // A later poll of the task's own (not nested in a joiner's), which
        // began with a full budget: nothing but body ran in it (and what
        // body ran nested while joining).
        tls_context.budget = task_->sched->coop_budget();
    }
    // Else the budget as it is, which body only lowered: the task runs
    // nested in a joiner's poll, whose budget it shares, or body ran other
    // tasks nested in this stretch, whose spending is the poll's.
}

namespace {
// Suspends the current task behind all ready work on `leaf` (none: resume
// the coroutine), which its next poll polls first.
void requeue_behind_ready_work(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll) noexcept {
    task_header* t = tls_context.current;
    suspend_on_leaf(h, leaf, poll);
    t->yield_requested = true;
    waker_wake_by_ref(t);  // RUNNING: sets NOTIFIED, re-queued after the poll
}
}  // namespace

void note_budget_forced_yield() noexcept {
    // The counters are this thread's worker's, written only by the thread
    // that runs the worker, which is this one.
    if (worker_counters* c = tls_context.counters) c->budget_forced_yields.add();
}

void yield_on_leaf(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll) noexcept {
    note_budget_forced_yield();  // every caller yields for a spent budget (yield_now does not come here)
    requeue_behind_ready_work(h, leaf, poll);
}

bool poll_budgeted_leaf(const char* what, void* leaf, leaf_poll_fn poll) {
    task_header& t = require_current_task(what);
    thread_context& c = tls_context;
    if (c.budget == 0) {
        if (!unconstrained_now()) return false;  // out of budget: suspend_budgeted_leaf yields
        return poll_leaf_now(t, leaf, poll);  // unconstrained: nothing to spend
    }
    --c.budget;  // spent up front: most of these operations complete at once
    if (poll_leaf_now(t, leaf, poll)) return true;
    ++c.budget;  // waiting is not hogging the worker: the unit comes back
    return false;
}

void suspend_budgeted_leaf(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll,
                           leaf_poll_fn poll_after_yield) noexcept {
    // Nothing ran since poll_budgeted_leaf returned false, and a leaf that
    // has to wait gets its unit back, so a budget of zero here means the
    // leaf was not polled for lack of budget, unless the task is
    // unconstrained (then it was polled, and waits).
    if (tls_context.budget != 0 || unconstrained_now()) return suspend_on_leaf(h, leaf, poll);
    yield_on_leaf(h, leaf, poll_after_yield);
}

void yield_current(std::coroutine_handle<> h) noexcept { requeue_behind_ready_work(h, nullptr, nullptr); }

void ref_inc(task_header* t) noexcept {
    // relaxed: taking a ref needs no ordering, we already hold one.
    t->state.fetch_add(state::ref_one, std::memory_order_relaxed);
}

void ref_dec(task_header* t) noexcept {
    // acq_rel: see complete(); the last owner frees.
    std::uint64_t prev = t->state.fetch_sub(state::ref_one, std::memory_order_acq_rel);
    if (refs(prev) == 1) on_last_ref(t);
}

bool report_if_destroying(std::exception_ptr e) noexcept {
    if (destroying == nullptr) return false;
    report(destroying->sched, std::move(e));
    return true;
}

[[gnu::cold]] void discard_unspawned(task_header* t) noexcept {
    // Nothing else knows it: free it with its frame. The header holds
    // nothing (if built: an empty waker, no exception), so the block is
    // freed without running its destructor, as for an inline frame.
    t->spawned = false;
    std::coroutine_handle<>::from_address(t->frame()).destroy();
}

[[gnu::cold]] void rethrow_error(const std::exception_ptr& e) { std::rethrow_exception(e); }

[[gnu::cold]] void refuse_release(bool empty) {
    if (empty) throw std::logic_error("aspen::spawn: the task is empty (moved-from or already spawned)");
    throw std::logic_error("aspen::spawn: the task has already run");
}

[[gnu::cold]] void refuse_spawn(task_header* t) {
    discard_unspawned(t);
    throw runtime_shut_down();
}

[[gnu::hot]] void spawn_root(scheduler* s, task_header* t) {
    if (!try_spawn_root(s, t)) refuse_spawn(t);
}

void abort_task(task_header* t) noexcept {
    // acq_rel on success: acquire takes ownership of the frame when we claim
    // an idle task (the last poller released it).
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    for (;;) {
        if (s & (state::complete | state::cancelled)) return;
        if (s & (state::running | state::notified)) {
            // The poller destroys the frame at its next turn.
            if (t->state.compare_exchange_weak(s, s | state::cancelled, std::memory_order_acq_rel,
                                               std::memory_order_acquire))
                return;
            continue;
        }
        std::uint64_t next = s | state::cancelled | state::running;
        if (t->state.compare_exchange_weak(s, next + state::ref_one, std::memory_order_acq_rel,
                                           std::memory_order_acquire))
            break;
    }
    cancel_running(t);  // idle: destroy it right away on this thread
}

bool register_join_waker(task_header* t, const aspen::waker& w) {
    // acquire: COMPLETE lets the joiner read the result.
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    if (s & state::complete) return false;
    // Registered before (a re-poll, or a new awaiter after the old one was
    // dropped): while JOIN_WAKER is set the field belongs to the task side,
    // which may be moving it out right now, so take it back with the
    // clearing CAS before even looking at it (spec/task_state.pml).
    if ((s & state::join_waker) && !unregister_join_waker(t)) return false;
    t->join_waker = w;  // ours while JOIN_WAKER is clear (same waker: harmless)
    s = t->state.load(std::memory_order_acquire);
    for (;;) {
        if (s & state::complete) {
            t->join_waker.reset();
            return false;
        }
        // release: the completer reads join_waker after seeing JOIN_WAKER.
        if (t->state.compare_exchange_weak(s, s | state::join_waker, std::memory_order_acq_rel,
                                           std::memory_order_acquire))
            return true;
    }
}

bool unregister_join_waker(task_header* t) noexcept {
    // acq_rel: acquire the completer's view; release nothing yet. Once
    // JOIN_WAKER is clear the field is the handle side's again; COMPLETE
    // first means the completer took the waker and wakes it.
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    while (!(s & state::complete)) {
        if (t->state.compare_exchange_weak(s, s & ~state::join_waker, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
            if (s & state::join_waker) t->join_waker.reset();
            return true;
        }
    }
    return false;
}

[[gnu::hot]] void drop_join_handle(task_header* t, bool observed) noexcept {
    if (observed) {
        // The outcome was taken (so t is COMPLETE). With one reference left,
        // it is ours and nobody else can reach t: free without an RMW.
        // acquire: every earlier owner's writes happen before the free.
        if (refs(t->state.load(std::memory_order_acquire)) == 1) return on_last_ref(t);
        // Nothing of t is read after this RMW.
        // JOIN_INTEREST is set for as long as the handle lives and only the
        // handle clears it, so subtracting it clears the bit: flag and ref in
        // one RMW. acq_rel: the last owner must see every earlier write.
        std::uint64_t prev = t->state.fetch_sub(state::join_interest + state::ref_one, std::memory_order_acq_rel);
        if (refs(prev) == 1) on_last_ref(t);
        return;
    }
    // Unobserved, the task not complete: its life ref keeps t alive, and
    // the completer will report an exception once it sees JOIN_INTEREST
    // gone, so flag and ref go together, as above. acquire: the outcome,
    // should t turn out complete (the path at the end reads it).
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    // spawn(...).detach(): the task never ran and still sits in this
    // thread's next slot. Then no other thread knows it: the next slot is
    // owner-only, an own-thread spawn is not in the registry (!registered),
    // no waker exists before a first poll (refs: handle, life, queue), and
    // the handle is this one. Nobody can change the word, so a plain store
    // does. relaxed: whoever polls t later is this thread, or a thief that
    // takes it from the ring after this thread's seq_cst push.
    // The polling worker's own next slot is checked inline: a task there
    // is one of its scheduler's. Outside a worker's poll (the current-thread
    // runtime, a worker's thread between polls) the scheduler answers.
    constexpr std::uint64_t unstarted = state::notified | state::join_interest | 3 * state::ref_one;
    if (s == unstarted && !t->registered &&
        (polling_worker ? multi_thread_scheduler::in_next_slot_of(polling_worker, t) : t->sched->in_own_next_slot(t))) {
        t->state.store(s - state::join_interest - state::ref_one, std::memory_order_relaxed);
        return;
    }
    // Elsewhere: one CAS, retried while t stays incomplete. acq_rel: as
    // below; failure acquire: re-decide on fresh flags.
    while (!(s & state::complete)) {
        if (t->state.compare_exchange_weak(s, s - state::join_interest - state::ref_one, std::memory_order_acq_rel,
                                           std::memory_order_acquire))
            return;
    }
    // Complete: we may have to report its exception, so keep our ref while
    // reading t (another holder could free it the moment we dropped it;
    // spec/task_state.pml found that use-after-free). acq_rel: acquire the
    // outcome.
    std::uint64_t prev = t->state.fetch_and(~state::join_interest, std::memory_order_acq_rel);
    if ((prev & state::complete) && t->error && !t->cancelled_outcome) report(t);
    ref_dec(t);
}

// ---- thread blocked in block_on ---------------------------------------------
namespace {
// The waiter lives on the blocked thread's stack, which that thread may
// leave before the completer's wake: hence the raw futex (sync/futex.hpp).
struct thread_waiter {
    std::atomic<std::uint32_t> done{0};
};
void tw_nop(void*) noexcept {}
void tw_wake(void* p) noexcept {
    auto* done = &static_cast<thread_waiter*>(p)->done;
    // release: the task's completion (set before this wake) to the waiter's
    // acquire load.
    done->store(1, std::memory_order_release);
    futex_wake_one(done);
}
constexpr waker_vtable thread_waker_vtable{tw_nop, tw_wake, tw_wake, tw_nop};
}  // namespace

void block_until_complete(task_header* t) {
    thread_waiter waiter;
    // The waker points at this stack frame: its clone/drop are no-ops, the
    // one copy in the join slot is woken exactly once by the completer, and
    // this function returns only after that wake has stored done = 1.
    aspen::waker w(&thread_waker_vtable, &waiter);
    bool registered = register_join_waker(t, w);
    w.release_borrowed();
    if (!registered) return;
    // acquire: pairs with tw_wake's release, which comes after COMPLETE, so
    // the result is visible too.
    while (waiter.done.load(std::memory_order_acquire) == 0) futex_wait(&waiter.done, 0);
}

// ---- polling ------------------------------------------------------------------
namespace {

// RUNNING -> idle (dropping the poll ref) or -> NOTIFIED (the poll ref
// becomes the queue's), or destroy the frame if an abort arrived during the
// poll. acq_rel: release our frame writes to the next poller; acquire a
// waker's data when NOTIFIED was set during the poll.
poll_outcome finish_poll(task_header* t) noexcept {
    bool yielded = std::exchange(t->yield_requested, false);
    // Register before the task may go idle, while we still own it. Refused
    // only once shutdown began: then it must not become an idle task nobody
    // can find, so it is cancelled right here instead.
    // relaxed: we hold RUNNING; the loop below reads the flag back.
    if (!t->registered && !t->sched->register_task(t)) t->state.fetch_or(state::cancelled, std::memory_order_relaxed);
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    for (;;) {
        if (s & state::cancelled) {
            cancel_running(t);
            return poll_outcome::complete;
        }
        std::uint64_t next = s & ~state::running;
        if (!(s & state::notified)) next -= state::ref_one;
        if (t->state.compare_exchange_weak(s, next, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    if (s & state::notified) return yielded ? poll_outcome::yield : poll_outcome::requeue;
    return poll_outcome::idle;
}

// NOTIFIED -> RUNNING; false if the task was cancelled (then it is destroyed
// and completed here). acq_rel: acquire the previous poller's frame writes.
bool start_poll(task_header* t) noexcept {
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    // Nobody else holds t: only its life ref and the queue's (ours now),
    // no handle, not in the registry (whose shutdown sweep takes refs
    // without holding one). Nobody can change the word meanwhile, so a
    // plain store takes RUNNING. relaxed: only this thread reads it next.
    constexpr std::uint64_t only_life_and_queue = state::notified | 2 * state::ref_one;
    if (s == only_life_and_queue && !t->registered) {
        t->state.store(state::running | 2 * state::ref_one, std::memory_order_relaxed);
        return true;
    }
    while (!t->state.compare_exchange_weak(s, (s & ~(state::notified | state::rewoken)) | state::running,
                                           std::memory_order_acq_rel, std::memory_order_acquire)) {
    }
    if (!(s & state::cancelled)) return true;
    cancel_running(t);
    return false;
}

// A task taken from this worker's own queue to run nested in a joiner's
// poll keeps NOTIFIED instead of trading it for RUNNING (no CAS). That is
// safe because NOTIFIED already keeps every other thread off the frame: a
// wake sees NOTIFIED and only adds REWOKEN, abort only adds CANCELLED, and
// no queue holds the task any more, so nobody else polls it. Most nested
// runs end with the task complete (try_complete_exclusive); one that
// suspends goes through settle_inlined first.
// false: cancelled while queued, destroyed and completed here.
[[gnu::hot]] bool start_inline(task_header* t) noexcept {
    // acquire: the previous poller's frame writes (a task that yielded).
    if (t->state.load(std::memory_order_acquire) & state::cancelled) {
        cancel_running(t);
        return false;
    }
    t->inline_notified = true;  // unwind_inlined settles it if it suspends
    return true;
}

// A task run nested under NOTIFIED suspends: it takes RUNNING, as any
// poller holds, and keeps NOTIFIED only if a wake came during the nested
// run (REWOKEN), so finish_poll re-queues it then and leaves it idle
// otherwise (idle matters: abort destroys an idle task at once).
// acq_rel: acquire the waker's data, as finish_poll's CAS does.
void settle_inlined(task_header* t) noexcept {
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    for (;;) {
        std::uint64_t next = (s & ~(state::notified | state::rewoken)) | state::running;
        if (s & state::rewoken) next |= state::notified;
        if (t->state.compare_exchange_weak(s, next, std::memory_order_acq_rel, std::memory_order_acquire)) return;
    }
}

// One nested run suspended: finish its poll as an ordinary one and make
// its joiner the current task again; returns the joiner.
task_header* end_nested_run(task_header* child) noexcept {
    task_header* joiner = std::exchange(child->inline_parent, nullptr);
    // An adopted child that suspends is an ordinary nested run from now
    // on: its completion must go through on_root_final, not back into
    // the joiner's frame.
    child->adopted = false;
    if (std::exchange(child->inline_notified, false)) settle_inlined(child);
    poll_outcome o = finish_poll(child);
    if (o == poll_outcome::requeue || o == poll_outcome::yield)
        child->sched->schedule(child, o == poll_outcome::yield ? schedule_kind::yield : schedule_kind::requeue);
    tls_context.current = joiner;
    return joiner;
}

// A chain of inlined joins suspended inside `top`: finish each inlined
// task's poll like an ordinary one, then let its joiner register its join
// waker (or be re-queued at once if the child already completed).
void unwind_inlined(task_header* bottom) noexcept {
    while (tls_context.current != bottom) {
        task_header* joiner = end_nested_run(tls_context.current);
        // The joiner is RUNNING (a ready leaf marks it NOTIFIED) or itself
        // runs nested (the wake adds REWOKEN, which its settle_inlined
        // turns into NOTIFIED): either way it is re-queued when its own
        // poll finishes.
        if (poll_leaf_now(*joiner, joiner->leaf, joiner->leaf_poll)) waker_wake_by_ref(joiner);
    }
}

}  // namespace

namespace {

std::coroutine_handle<> resume_joiner(task_header* joiner) noexcept {
    joiner->leaf = nullptr;
    joiner->leaf_poll = nullptr;
    return joiner->resume_point;
}

// No local work left: register the join waker (the leaf's poll), unless
// the target completed meanwhile. Out of line: continue_join's common case
// is running a task nested, and then needs fewer registers.
[[gnu::noinline]] std::coroutine_handle<> suspend_joiner(task_header* joiner) noexcept {
    if (poll_leaf_now(*joiner, joiner->leaf, joiner->leaf_poll)) return resume_joiner(joiner);
    return std::noop_coroutine();
}

// Nobody but its joiner can reach t (see "Adopted" in task_header.hpp).
// t is ours (taken from our queue), so only a waker's drop or abort's
// CANCELLED could change the word meanwhile; relaxed suffices, as the
// queue that handed t over ordered everything before.
bool adoptable(task_header* t) noexcept {
    constexpr std::uint64_t alone = state::notified | state::join_interest | 3 * state::ref_one;
    return !t->registered && t->state.load(std::memory_order_relaxed) == alone;
}

// The current task (joiner) waits for joiner->join_target. Run local work
// nested in its poll until the target is complete: the target itself when
// it tops a place of this worker's queue (see take_local), else the newest
// startable task (help while waiting) at one coop-budget unit each, so
// helping cannot keep the worker from its fairness checks for long. Suspend
// for real (register the join waker) only when there is no local work or
// no budget left.
[[gnu::hot]] std::coroutine_handle<> continue_join(task_header* joiner) noexcept {
    task_header* target = joiner->join_target;
    scheduler* s = joiner->sched;
    for (;;) {
        if (is_complete(target)) return resume_joiner(joiner);
        // Running the target itself is like awaiting a task inline: free.
        // Helping with other work spends budget (take_local).
        task_header* next = polling_worker ? multi_thread_scheduler::take_local_from_poll(polling_worker, target)
                                           : s->take_local(target);
        if (!next) return suspend_joiner(joiner);
        if (!start_inline(next)) continue;  // cancelled while queued: complete now
        next->inline_parent = joiner;
        tls_context.current = next;
        if (next == target && adoptable(target)) target->adopted = true;
        return next->resume_point;
    }
}

// Fork-join's common case, continue_join's first turn in one step: the
// child never ran, is in this worker's next slot or staged array, and
// nobody else can reach it, so it becomes the current task, adopted by
// joiner (the caller then resumes it). The same steps and state as through
// take_local, start_inline and adoptable, without their calls and
// repeated checks: fib(22) 234 -> 196 instructions a spawn, fib(30) at 1
// worker 47.4-47.8 -> 43.0-44.2 ms (four alternating benchmark runs).
// `worker`: the thread's polling_worker, not null.
[[gnu::always_inline]] inline bool adopt_from_own_places(void* worker, task_header* joiner, task_header* child) noexcept {
    if (!multi_thread_scheduler::take_target_if(worker, child,
                                                [](task_header* t) { return !t->leaf_poll && adoptable(t); }))
        return false;
    child->inline_notified = true;  // as start_inline (adoptable: not CANCELLED)
    child->inline_parent = joiner;
    child->adopted = true;  // its final suspend goes back to joiner (resume_adopter)
    tls_context.current = child;
    return true;
}

}  // namespace

[[gnu::hot]] std::coroutine_handle<> on_root_final(task_header* t) noexcept {
    task_header* joiner = std::exchange(t->inline_parent, nullptr);
    if (!joiner) {
        t->root_done = true;  // the poller completes it after resume() returns
        return std::noop_coroutine();
    }
    if (t == called_child) [[unlikely]] {
        // Its joiner is not suspended but waits in join_by_call's resume():
        // complete, and return there.
        complete(t, true);
        tls_context.current = joiner;
        return std::noop_coroutine();
    }
    // Ran nested in a joiner's poll: complete now, then the joiner goes on
    // waiting (or resumes, if this was what it waited for).
    complete(t, joiner->join_target == t);
    tls_context.current = joiner;
    return continue_join(joiner);
}

namespace {
// Someone else holds a reference (a waker clone): the CAS path. Out of line
// so that finish_adopted's common case stays small.
[[gnu::noinline]] void publish_shared_completion(task_header* t) noexcept { publish_completion(t, false); }
}  // namespace

[[gnu::hot]] std::coroutine_handle<> resume_adopter(task_header* t) noexcept {
    task_header* joiner = std::exchange(t->inline_parent, nullptr);
    t->inline_notified = false;
    tls_context.current = joiner;
    // Run by join_by_call: its joiner never suspended.
    if (t == called_child) return std::noop_coroutine();
    return resume_joiner(joiner);
}

[[gnu::hot]] bool join_by_call(void* worker, task_header* child) noexcept {
    if (nested_calls == max_nested_calls) return false;
    task_header* joiner = tls_context.current;
    // joiner->join_target is not set: only continue_join and the generic
    // path of on_root_final read it, for tasks the joiner runs nested
    // through them, and during this call the joiner runs none (its child
    // ends through the called_child paths). If the child suspends, the
    // joiner waits through suspend_on_join, which sets it.
    if (!adopt_from_own_places(worker, joiner, child)) return false;
    task_header* outer = std::exchange(called_child, child);
    ++nested_calls;
    child->resume_point.resume();
    --nested_calls;
    called_child = outer;
    // Ended (resume_adopter or on_root_final made the joiner current).
    if (tls_context.current == joiner) [[likely]]
        return true;
    // It suspended, maybe inside tasks it ran nested itself: those and then
    // the child finish their polls as ordinary nested runs.
    unwind_inlined(child);
    end_nested_run(child);
    return false;
}

[[gnu::hot]] void finish_adopted(task_header* t, bool nothing_to_destroy) noexcept {
    // The outcome is out of the frame: complete as a nested run does (never
    // registered, no exception in the header). The block stays with the
    // handle, which frees it when dropped, so an abort() through the handle
    // that races with this end still touches live memory.
    if (!nothing_to_destroy) destroy_root_frame(t);
    t->frame_destroyed = true;
    t->sched->count_completion();
    if (!try_complete_exclusive(t)) publish_shared_completion(t);
}

[[gnu::hot]] std::uint64_t end_adopted(task_header* t) noexcept {
    // count_completion without its test: the child ran nested in its
    // joiner's poll on this thread, which serves the child's scheduler (a
    // child spawned elsewhere is never in this thread's own places, so
    // never adopted).
    assert(tls_context.sched == t->sched && tls_context.completions);
    tls_context.completions->add();
    // acquire: a waker clone dropped on another thread just before (4 refs
    // -> 3) touched the block first. With exactly the handle's, the life's
    // and the poll's refs, no JOIN_WAKER and not COMPLETE, only that
    // handle can reach t, and the handle is ours (a join_handle is not for
    // concurrent use: an abort() through it came before this await's end).
    // A CANCELLED from such an abort, or a REWOKEN from a wake during the
    // run, came too late to matter: the task ran to its end. Not
    // registered: adoption requires that, and a nested run never
    // registers. So the word needs no store: nobody reads it again.
    std::uint64_t s = t->state.load(std::memory_order_acquire);
    if (only_the_joiner_holds(s)) [[likely]] {
        assert(!t->registered);
        // The id the task was given while it ran (current_task_id), or 0:
        // nobody has seen one, so the handle gives out a fresh one when
        // first asked (join_handle::given_back_id). relaxed: as
        // task_id_of; an id given out earlier came from this thread (the
        // task ran nested here) or from its handle, which is ours.
        std::uint64_t id = t->id.load(std::memory_order_relaxed);
        free_bare_task_memory(t);
        return id;
    }
    t->frame_destroyed = true;
    publish_shared_completion(t);
    return block_kept;
}

[[gnu::hot]] std::coroutine_handle<> suspend_on_join(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll,
                                                     task_header* child) noexcept {
    task_header* joiner = tls_context.current;
    suspend_on_leaf(h, leaf, poll);
    joiner->join_target = child;
    if (polling_worker && adopt_from_own_places(polling_worker, joiner, child)) return child->resume_point;
    return continue_join(joiner);
}

poll_outcome poll_task(task_header* t) noexcept {
    if (!start_poll(t)) return poll_outcome::complete;
    tls_context.current = t;
    tls_context.budget = t->sched->coop_budget();
    bool resume = true;
    if (t->leaf_poll) {
        borrowed_waker bw(t);
        context cx(bw.w);
        resume = t->leaf_poll(t->leaf, cx);
    }
    if (resume) {
        t->leaf = nullptr;
        t->leaf_poll = nullptr;
        t->resume_point.resume();
        unwind_inlined(t);
    }
    tls_context.current = nullptr;
    if (t->root_done) {
        complete(t);
        return poll_outcome::complete;
    }
    return finish_poll(t);
}

// ---- scheduler base -----------------------------------------------------------
scheduler::scheduler(const config& cfg, std::size_t registry_shards)
    : registry_(registry_shards),
      handler_(cfg.unhandled_exception_handler),
      coop_budget_(cfg.coop_budget),
      blocking_(cfg.max_blocking_threads, cfg.blocking_keep_alive),
      on_park_(cfg.on_thread_park),
      on_unpark_(cfg.on_thread_unpark),
      link_(std::make_shared<runtime_link>(this)) {
    blocking_.set_owner(link_);
    if (cfg.start_paused) driver_.pause();
    // A parked worker skips the paused clock's jump while blocking functions
    // run; when the last one ends, it must look again.
    blocking_.on_drained(
        [](void* d) noexcept {
            auto* drv = static_cast<driver*>(d);
            if (drv->is_paused()) drv->unpark();
        },
        &driver_);
    std::lock_guard lock(live_schedulers_mutex);
    live_schedulers().insert(this);
}

scheduler::~scheduler() {
    std::lock_guard lock(live_schedulers_mutex);
    live_schedulers().erase(this);
}

void scheduler::wait_for_remote_pushes() const noexcept {
    // acquire: pairs with remote_push_scope's release (see there). A pusher
    // has only its notify left, so this wait is short.
    while (remote_pushes_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void scheduler::add_driver_and_pool_metrics(runtime_metrics& m) const {
    m.timers_armed = io_driver().timers_armed();
    m.io_registrations = io_driver().io().registered();
    m.io_would_block = io_driver().io().would_blocks();
    m.io_ready_events = io_driver().io().ready_events();
    blocking_pool::load b = blocking_.current_load();
    m.blocking_threads = b.threads;
    m.idle_blocking_threads = b.idle_threads;
    m.blocking_queue_depth = b.queued_jobs;
}

bool scheduler::register_task(task_header* t) noexcept {
    if (!registry_.insert(t, registry_shard())) return false;
    t->registered = true;
    return true;
}

bool scheduler::accept_spawn(task_header* t) noexcept {
    if (on_own_thread()) return !registry_.closed();
    return register_task(t);
}

void scheduler::report_unhandled(std::exception_ptr e) noexcept {
    if (handler_) {
        try {
            handler_(e);
            return;
        } catch (...) {
            std::fprintf(stderr, "aspen: the unhandled_exception_handler threw; falling back to stderr\n");
        }
    }
    print_unobserved(e, "a detached task");
}

namespace {
[[gnu::cold]] void report_hook_throw(std::atomic<bool>& threw, const char* name, const char* what) noexcept {
    // relaxed: only picks the one caller that reports; publishes nothing.
    if (threw.exchange(true, std::memory_order_relaxed)) return;
    std::fprintf(stderr, "aspen: config::%s threw (%s); ignored, as is every later throw of it on this runtime\n",
                 name, what);
}
}  // namespace

// Tokio aborts the process when a hook panics. Here the hook runs inside
// the idle protocol, between counting the worker as parked and its sleep:
// unwinding from there would leave the idle counts wrong and end the worker
// thread through std::terminate. A hook is instrumentation, so its failure
// must not take the runtime down: one line on stderr, the first time each
// hook throws on this runtime (a hook that always throws would otherwise
// write a line per park), and the park goes on.
// The hook runs as a foreign thread would (no worker in the context): a
// task it spawns or wakes goes through the injector and a notify, never
// into this worker's own next slot, where it would sleep with the worker.
// runtime_handle::current() still names the runtime.
[[gnu::cold]] void scheduler::call_hook(const std::function<void()>& hook, std::atomic<bool>& threw, const char* name) noexcept {
    void* worker = std::exchange(tls_context.worker, nullptr);
    try {
        hook();
    } catch (const std::exception& e) {
        report_hook_throw(threw, name, e.what());
    } catch (...) {
        report_hook_throw(threw, name, "not a std::exception");
    }
    tls_context.worker = worker;
}

void scheduler::destroy_queued(task_header* t) noexcept {
    abort_task(t);  // queued: only marks CANCELLED
    poll_task(t);   // sees CANCELLED: destroys the frame, completes
}

void scheduler::cancel_tasks_not_held(const std::vector<task_header*>& held) {
    registry_.close();
    for (;;) {
        bool destroyed = drain_queues();
        bool waiting = false;
        for (task_header* t : registry_.snapshot()) {
            abort_task(t);  // idle: destroyed now; queued: the drain below does it; held: marked
            // Any other task left is on its way into a queue (a spawn
            // between registering and pushing), out of the registry, being
            // destroyed by another thread's abort, or RUNNING on a foreign
            // thread: look again.
            if (std::find(held.begin(), held.end(), t) == held.end()) waiting = true;
            ref_dec(t);
        }
        destroyed = drain_queues() || destroyed;
        if (!destroyed && !waiting) return;
        if (!destroyed) std::this_thread::yield();  // nothing moved: let the others go on
    }
}

}  // namespace aspen::detail

namespace aspen {

bool has_budget_remaining() noexcept {
    using detail::tls_context;
    return tls_context.budget != 0 || !tls_context.current || detail::unconstrained_now();
}

}  // namespace aspen
