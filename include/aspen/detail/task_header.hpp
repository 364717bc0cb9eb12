// The header every task frame carries, and the one atomic word that says
// where a spawned task is in its life.
//
// Memory layout: each task<T> coroutine allocation is
//     [ task_header | coroutine frame ]
// so a spawned task costs one allocation, and the header (state, links,
// exception) can outlive a frame that is destroyed early by cancellation.
// Tasks that are only awaited inline never touch the header's atomics.
//
// ---------------------------------------------------------------------------
// State word (task_header::state): six flags and a reference count.
//
//   RUNNING        a thread is polling the task (owns its frame right now)
//   NOTIFIED       the task must be polled again: it sits in a run queue, or
//                  (with RUNNING) it was woken during its poll
//   COMPLETE       the frame finished or was destroyed; the outcome is final
//   CANCELLED      abort() was requested; the next poll destroys the frame
//   JOIN_INTEREST  a join_handle still exists and may read the result
//   JOIN_WAKER     join_waker holds the awaiter's waker; the field then
//                  belongs to the task side, which will consume it
//   REWOKEN        woken again while NOTIFIED and not RUNNING; matters only
//                  to a task run nested by a joiner (see below), which keeps
//                  NOTIFIED while it runs: its suspension then knows that a
//                  wake came. Cleared whenever RUNNING is taken.
//   refcount       (state >> REF_SHIFT): join handle, each waker clone, the
//                  task's own life while not complete (it keeps the frame for
//                  the registry / shutdown), the run queue / poller while
//                  NOTIFIED or RUNNING, each abort_handle (it only aborts
//                  and reads COMPLETE, as the join handle can, so it is a
//                  ref like a waker clone's: the exclusive paths below,
//                  which need exactly 3 refs, then take their CAS paths).
//                  The memory is freed at zero.
//
// Transition table (every change is one CAS or RMW on the word):
//
//   from                  event                 to                         side effect
//   --------------------  --------------------  -------------------------  --------------------------
//   (new)                 spawn                 NOTIFIED|JOIN_INTEREST     refs: handle+life+queue
//   NOTIFIED, !RUNNING    worker pops it        RUNNING (clear NOTIFIED,   queue ref becomes poll ref
//                                               REWOKEN)
//   idle (no R/N/C)       wake                  NOTIFIED, +1 ref           push to a run queue
//   RUNNING               wake                  RUNNING|NOTIFIED           none: re-queued after poll
//   NOTIFIED, !RUNNING    wake                  |REWOKEN (once)            none
//   COMPLETE              wake                  unchanged                  none
//   RUNNING, poll pending poll returns          idle (clear RUNNING)       drop poll ref
//   RUNNING|NOTIFIED      poll returns          NOTIFIED (clear RUNNING)   poll ref becomes queue ref
//   RUNNING               root coroutine ends   COMPLETE (clear RUNNING)   wake joiner; drop life+poll refs
//   any !COMPLETE         abort                 |CANCELLED                 idle: aborter takes RUNNING and
//                                                                          destroys the frame now; else the
//                                                                          poller does at its next turn
//   RUNNING|CANCELLED     poll starts/returns   COMPLETE                   destroy frame, wake joiner
//   any                   handle dropped        clear JOIN_INTEREST        report unobserved exception; -1 ref
//                                                                          (!COMPLETE: flag and ref in one
//                                                                          CAS; the completer reports. Never
//                                                                          polled and still in its spawner's
//                                                                          next slot: a plain store, as no
//                                                                          other thread knows the task)
//   !COMPLETE, !JOIN_WAKER join registers       |JOIN_WAKER                join_waker now task-owned
//   JOIN_WAKER            task completes        COMPLETE                   completer wakes join_waker
//   NOTIFIED, newest in   a joiner inlines it   unchanged (no CAS):        runs nested in the joiner's poll;
//   this worker's queue,  (its child, or help   NOTIFIED, taken out of     NOTIFIED keeps others off the frame
//   no leaf to poll       while waiting)        the queue, acts as RUNNING (a wake only adds REWOKEN, abort
//                                                                          only CANCELLED)
//   nested (NOTIFIED)     it suspends           RUNNING, NOTIFIED iff      then finish_poll as for any poll:
//                                               REWOKEN (clear REWOKEN)    idle, or re-queued if woken
//   inlined child of the  root coroutine ends   COMPLETE by a plain store  only if refs == 3 (handle, life,
//   joiner awaiting it                                                     poll) and no JOIN_WAKER: nobody else
//                                                                          can write the word but abort, whose
//                                                                          CANCELLED may be overwritten
//   COMPLETE, refs == 1   handle dropped after  (freed, no RMW)            the last ref is the handle's own
//                         taking the result
//   exactly NOTIFIED and  a worker pops it      RUNNING by a plain store   nobody else holds t: no handle,
//   2 refs (life, queue),                                                  waker clone, abort_handle or
//   not registered                                                         shutdown snapshot (a detached task)
//   RUNNING or NOTIFIED,  root coroutine ends   (freed, no RMW)            the same: nobody is left to read
//   2 refs, no other flag                                                  COMPLETE (try_complete_alone)
//   adopted (nested, the  root coroutine ends   (freed, no store) if       the frame's final suspend resumes
//   joiner's target, word                       refs == 3 and no           the joiner, which moves the outcome
//   NOTIFIED|JOIN_INTEREST                      JOIN_WAKER; else COMPLETE  out of the frame, then end_adopted
//   |3 refs when taken)                         by the CAS path            frees the block (the handle keeps
//                                                                          only the id) or completes it
//
// Adopted: a joiner that takes its own target out of this worker's queue
// (a nested run, as above) marks it `adopted`, and the target's final
// suspend transfers straight back to the joiner (resume_adopter), as an
// inline await of a task<T> does. The outcome then stays in the frame for
// the joiner to take (no result slot), and the end needs no on_root_final
// and no second pass through the join loop. Only a target nobody else can
// reach is adopted: its word is exactly NOTIFIED|JOIN_INTEREST with the
// refs of its handle, its life and the queue (no waker clone, no registry
// entry). A child whose frame still holds a parameter with a destructor
// at its end stops being adopted there and completes as any nested run
// (final_awaiter, task.hpp): that parameter must go when the child ends,
// and g++ 12 may run the joiner on, into a later co_await of the same
// expression, before the await_resume that takes the outcome.
// If the adopted run suspends, the task stops being adopted
// (unwind_inlined clears the flag) and finishes as any nested run does.
// At the adopted end (end_adopted), once the joiner took the outcome: if
// the word still shows only the handle's, the life's and the poll's refs
// and no JOIN_WAKER, nothing but the joiner's handle can reach the task, so
// the block is freed right there, the word never written again, and the
// handle keeps only the id ("Given back" in join_handle.hpp): no COMPLETE
// store, and no second visit at the handle's drop. A join_handle is not for
// concurrent use, so an abort() through it came before that await's end;
// an abort from elsewhere goes through an abort_handle, whose reference
// keeps the block. Otherwise the task completes through the CAS path and
// the handle keeps the block (the spin model's task-inline-* scenarios).
//
// Joined by a call. The same adoption usually starts earlier, in the
// handle's await_ready (join_by_call): the child is taken out of this
// worker's places as above and resumed by a plain call, so the joiner does
// not suspend at all and g++'s coroutine code skips an exit from the
// joiner's frame and the re-entry into it. The child's final suspend
// (resume_adopter, or on_root_final for a child that stopped being adopted)
// then only makes the joiner current again and returns to that call,
// which knows the child by the thread's `called_child`. The word goes
// through exactly the states of an adoption by symmetric transfer; only
// who resumes whom differs. A child that suspends instead returns from the
// call with itself (or a task it ran nested) current: join_by_call
// finishes those nested runs as unwind_inlined does, and the joiner then
// awaits as for any child that is not in its places (or takes the outcome
// at once, if the child completed meanwhile). await_ready tries the call
// before it reads whether the child is complete: a child it can call never
// ran, so that read is only needed when the call does not happen. An inline
// `co_await` of a task<T> starts its child the same way (task.hpp: the
// child's continuation is the noop coroutine until the child suspends,
// when await_suspend makes it the awaiter). At most max_nested_calls (64)
// such calls, both kinds together, are open on a thread's stack (skynet
// needs 6, fib(30) 30); a deeper await takes the symmetric-transfer
// path, whose stack does not grow. It pays
// far beyond the 3% of instructions it saves (skynet; timings in
// docs/performance.md, History, stop 50), most likely because a call and
// its return are predicted where the chain of indirect jumps of symmetric
// transfer is not (this VM has no hardware counters to show it).
//
// Invariants: RUNNING is held by at most one thread (the CAS that sets it
// fails for everyone else), and a NOTIFIED task is in at most one queue or
// run nested by the one thread that took it out of its queue, so a frame is
// never resumed concurrently; a
// task is in at most one run queue (only the idle->NOTIFIED CAS enqueues);
// COMPLETE is set once and never cleared; the coroutine frame is destroyed
// exactly once, by the thread holding RUNNING when the task completes or is
// cancelled (its result, if any, was moved to the result slot or, adopted,
// taken by the joiner first), so a
// task's parameters and resources are released when it finishes, not when
// its handle goes; the memory block itself lives until the last reference.
// Model: spec/task_state.pml follows these names (bash spec/run.sh).
// ---------------------------------------------------------------------------
#pragma once

#include <aspen/waker.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>

namespace aspen {
class context;
}

namespace aspen::detail {

class scheduler;
struct local_binding;  // aspen/task_local.hpp

namespace state {
inline constexpr std::uint64_t running = 1u << 0;
inline constexpr std::uint64_t notified = 1u << 1;
inline constexpr std::uint64_t complete = 1u << 2;
inline constexpr std::uint64_t cancelled = 1u << 3;
inline constexpr std::uint64_t join_interest = 1u << 4;
inline constexpr std::uint64_t join_waker = 1u << 5;
inline constexpr std::uint64_t rewoken = 1u << 6;
inline constexpr unsigned ref_shift = 7;
inline constexpr std::uint64_t ref_one = std::uint64_t{1} << ref_shift;
inline constexpr std::uint64_t flag_mask = ref_one - 1;
}  // namespace state

// A leaf awaitable's poll: true when ready (the coroutine may be resumed).
using leaf_poll_fn = bool (*)(void* leaf, aspen::context& cx);

// Built by build_spawned_header (scheduler.hpp) when the task is spawned.
// Four links have no initialiser: each is written before anyone reads it
// (queue_next when the task is linked into an injector list, join_target
// by the task's own await before a child's end compares against it,
// reg_prev and reg_next when the task enters the registry, and read only
// while it is in it), so the spawn skips their stores.
struct alignas(16) task_header {
    std::atomic<std::uint64_t> state{0};
    task_header* queue_next;  // injector / drain lists
    // Innermost coroutine of the task's await chain that is suspended on a
    // leaf, and that leaf: a wake re-polls the leaf and resumes the
    // coroutine only once the leaf is ready, so spurious wakes are harmless.
    std::coroutine_handle<> resume_point;
    void* leaf = nullptr;
    leaf_poll_fn leaf_poll = nullptr;
    scheduler* sched = nullptr;
    aspen::waker join_waker;            // see JOIN_WAKER above
    task_header* inline_parent = nullptr;  // joiner running this task nested in its poll
    task_header* join_target;    // the task this one is joining
    task_header* reg_prev;       // registry of live tasks (shutdown)
    task_header* reg_next;
    std::exception_ptr error;           // a root's exception (copied at completion)
    std::uint32_t alloc_size = 0;       // bytes of header + frame + result slot
    std::uint32_t result_offset = 0;    // where the result slot starts
    std::uint16_t reg_shard = 0;
    bool spawned = false;               // root of a spawned task (checked by an assert)
    bool registered = false;            // in the registry (see registry.hpp)
    // Coroutine frame already gone (done or cancelled), or finished with
    // nothing left in it to destroy (promise_base::nothing_to_destroy).
    bool frame_destroyed = false;
    bool cancelled_outcome = false;     // destroyed by abort/shutdown before finishing
    bool root_done = false;             // set by the root's final_suspend
    bool yield_requested = false;       // re-queue behind all ready work
    bool inline_notified = false;       // run nested under NOTIFIED (start_inline)
    // Run nested as the target of its joiner's await, which resumes straight
    // from its final suspend and takes the outcome from the frame (see
    // "Adopted" above). Stays set once that run finished.
    bool adopted = false;
    // Where the task was put in its worker's staged array (multi_thread.hpp,
    // "Staging"): a hint that lets a join find its child there without a
    // scan, trusted only when that slot of the joiner's own array holds the
    // task. relaxed, both ways: a task staged on another worker may have it
    // written while a joiner reads it, and a stale or foreign value only
    // fails that check. In the flags' padding: the header keeps its size.
    std::atomic<std::uint8_t> stage_slot{0};
    // A result with a destructor lives in the slot; its destructor is the
    // block's last pointer (result_dtor()). Why not a pointer field here:
    // most results (void, numbers) have none, and the field made the
    // header 160 bytes instead of 144 on every task's block.
    bool result_live = false;
    // How many aspen::unconstrained scopes of this task are open (nested
    // ones count each): while non-zero, a spent coop budget does not make
    // the task yield (aspen/coop.hpp). Only the task's own thread, which
    // runs it, touches it.
    std::uint32_t unconstrained = 0;
    // Last, in the padding the flags leave before the 16-byte size: the
    // hot fields keep their offsets.
    local_binding* locals = nullptr;    // task_local bindings, innermost first
    // The task's id (aspen/task_id.hpp), 0 until someone asks for it: ids
    // are handed out on first request (task_id_of), so a spawn pays for
    // this field only the zero its construction writes. After the hot
    // fields, which keep their offsets.
    std::atomic<std::uint64_t> id{0};

    void* frame() noexcept { return this + 1; }
    void* result_slot() noexcept { return reinterpret_cast<char*>(this) + result_offset; }
    // Where a result type with a destructor keeps it: the block's last
    // pointer-sized word (result_layout in task.hpp reserves it).
    using result_dtor_fn = void (*)(void*) noexcept;
    void* result_dtor_place() noexcept { return reinterpret_cast<char*>(this) + alloc_size - sizeof(result_dtor_fn); }
    void set_result_dtor(result_dtor_fn f) noexcept { ::new (result_dtor_place()) result_dtor_fn(f); }
    result_dtor_fn result_dtor() noexcept { return *std::launder(static_cast<result_dtor_fn*>(result_dtor_place())); }
    static task_header* of_frame(void* frame) noexcept {
        return static_cast<task_header*>(frame) - 1;
    }
};

static_assert(sizeof(task_header) % alignof(std::max_align_t) == 0,
              "the frame that follows the header must stay max-aligned");
static_assert(sizeof(task_header) == 144, "every task's block carries the header: keep it small");

// ---- allocation (aspen/detail/frame_pool.hpp) -------------------------------
// Where a block's result slot starts, and the block's bytes, for a frame of
// frame_size bytes (as allocate_frame lays it out). Alignments are powers
// of two: rounded up with a mask (a division cost more than the rest of the
// allocation).
constexpr std::size_t result_offset_of(std::size_t frame_size, std::size_t result_align) noexcept {
    return (sizeof(task_header) + frame_size + result_align - 1) & ~(result_align - 1);
}
constexpr std::size_t block_size_of(std::size_t frame_size, std::size_t result_size,
                                    std::size_t result_align) noexcept {
    return result_offset_of(frame_size, result_align) + result_size;
}
// Destroys a spawned task's frame (its coroutine's locals and parameters)
// and keeps its block: the one way a spawned frame is destroyed, since
// deallocate_frame frees every other frame at once.
void destroy_root_frame(task_header* t) noexcept;

// ---- task life (src/task/task_core.cpp) -------------------------------------
task_header* current_task() noexcept;
scheduler* current_scheduler() noexcept;

// Records where the current task is suspended; called by leaf awaitables.
void suspend_on_leaf(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll) noexcept;
// A leaf's first poll runs inside await_ready; this builds its context.
// Throws std::logic_error when not called from inside a task.
task_header& require_current_task(const char* what);
bool poll_leaf_now(task_header& t, void* leaf, leaf_poll_fn poll);

// Hands a freshly created root frame to a scheduler. Throws
// runtime_shut_down if the scheduler no longer accepts tasks.
void spawn_root(scheduler* s, task_header* t);
// The worker of a multi-threaded runtime whose thread this is, while it
// polls a task (opaque here; set and cleared around each poll by
// src/scheduler/multi_thread.cpp), else null. aspen::spawn then calls
// spawn_on_worker: spawn_root's work for that one case, without asking
// which scheduler and which thread it is (see "Spawning from a worker" in
// multi_thread.hpp).
extern thread_local constinit void* polling_worker;
// How many coroutines this thread runs now by a plain call from an
// await_ready instead of by symmetric transfer (task<T>'s await, and
// join_by_call): each such call keeps a frame on the thread's stack, so at
// most max_nested_calls are open; past that the awaits transfer, whose
// stack does not grow.
extern thread_local constinit std::uint32_t nested_calls;
inline constexpr std::uint32_t max_nested_calls = 64;
void spawn_on_worker(task_header* t);
// The root coroutine of t finished; returns what to resume next (the joiner
// that ran t inline, or nothing).
std::coroutine_handle<> on_root_final(task_header* t) noexcept;
// A task suspends on the join leaf of `child` (join_handle's awaiter) from
// coroutine h. Instead of suspending at once it runs local work nested in
// its own poll: the child if it has not started and is among the newest
// entries of this worker's queue (join inlining, see take_local), else the
// newest startable task there (help while waiting), one coop-budget unit
// each, until the child is complete; it really suspends only when no local
// work is left or the budget is spent. A child taken as
// the target is adopted (see the state table). Returns the handle to
// transfer to.
std::coroutine_handle<> suspend_on_join(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll,
                                        task_header* child) noexcept;
// The adopted `child` reached its final suspend with its outcome still in
// its frame: its joiner becomes the current task again (and stops waiting
// on its join leaf); returns the joiner's handle to resume. That has to
// happen there, not in the await_resume that takes the outcome: g++ 12 runs
// the await_suspend of each co_await in `co_await a + co_await b` before
// either await_resume, so the joiner runs on, and may join again or spawn,
// between the child's end and that await_resume.
std::coroutine_handle<> resume_adopter(task_header* child) noexcept;
// A joiner's await_ready on the handle of `child`: when child never ran,
// sits in this worker's own places and nobody else can reach it (as
// suspend_on_join adopts it), runs it adopted by a plain call, so the
// joiner does not suspend at all; true when child ended so (its outcome
// waits as an adopted one's, or it completed). false: not run, or it
// suspended (then it is an ordinary task again) and the joiner waits.
// `worker` is the thread's polling_worker, not null (the caller has read it).
bool join_by_call(void* worker, task_header* child) noexcept;
// The joiner has moved the adopted child's outcome out of its frame: the
// child completes, its frame destroyed unless `nothing_to_destroy`
// (promise_base). The handle keeps the block.
void finish_adopted(task_header* child, bool nothing_to_destroy) noexcept;
// finish_adopted for the joiner that took the outcome (nothing left in the
// frame). When nothing but that joiner's handle can reach the child (the
// refs of the handle, the life and the poll, no JOIN_WAKER: as
// try_complete_exclusive), it does not complete the word at all but frees
// the block at once and returns the child's id for the handle, 0 if it
// was never given one (the handle then gives one when asked); see "Given
// back" in join_handle.hpp. Otherwise it is finish_adopted(child, true),
// the handle keeps the block, and it returns block_kept.
inline constexpr std::uint64_t block_kept = ~std::uint64_t{0};  // never an id
std::uint64_t end_adopted(task_header* child) noexcept;

void ref_inc(task_header* t) noexcept;
void ref_dec(task_header* t) noexcept;

inline bool is_complete(const task_header* t) noexcept {
    // acquire: a true answer lets the caller read the result.
    return t->state.load(std::memory_order_acquire) & state::complete;
}
// Read only once the task is complete (after is_complete's acquire).
inline bool is_cancelled_outcome(const task_header* t) noexcept { return t->cancelled_outcome; }
void abort_task(task_header* t) noexcept;
// t's id (aspen/task_id.hpp), given out now if it has none yet; never 0.
std::uint64_t task_id_of(task_header* t) noexcept;
// One id nobody has, from this thread's batch of ids (a given-back
// handle's first id(), see join_handle.hpp); never 0.
std::uint64_t fresh_task_id() noexcept;
// Called by a frame's unhandled_exception: true (and the exception went to
// the runtime's unhandled_exception_handler) when this thread is destroying
// a cancelled task's frame, i.e. a destructor threw during abort/shutdown.
bool report_if_destroying(std::exception_ptr e) noexcept;
// Registers the joiner's waker; false when the task is already complete.
bool register_join_waker(task_header* t, const aspen::waker& w);
// The join handle goes away: clears JOIN_INTEREST and drops its ref;
// `observed` says whether the result was taken.
void drop_join_handle(task_header* t, bool observed) noexcept;
// Blocks an ordinary (non-worker) thread until the task completes.
void block_until_complete(task_header* t);

}  // namespace aspen::detail
