// Cooperative scheduling budget. Each poll of a task starts with
// config::coop_budget units; operations that may succeed again and again
// without waiting spend one: every await of the sync primitives and channels
// (aspen/sync/: lock, acquire, send, recv, notified, event and latch waits)
// and this call. When the budget is spent, the next such operation yields
// the task behind all ready work instead of completing at once, so one busy
// task cannot hog its worker. A sync await that has to wait spends nothing,
// and one that yields has done nothing yet (it takes no message, lock or
// permit until the task's next poll), so cancel safety is unchanged.
//
// Opting out, as Tokio's task::unconstrained:
//
//   co_await aspen::unconstrained(drain_all(rx));  // never yields for budget
//
// unconstrained(body) gives a task that runs body in the task that awaits it
// (or spawns it) with the budget switched off: body, and every task it
// awaits inline, never yields because the budget is spent, however many
// sync awaits, channel or socket operations, sleeps and consume_budget()
// calls it makes. It still waits when an operation has to wait, and
// yield_now() still yields. The opt-out holds across body's suspensions (it
// belongs to the task, not to one poll) and ends with body: normally, by an
// exception, or when body's frame is destroyed mid-way (abort, shutdown).
// Scopes nest: the task is constrained again when the outermost one ends.
//
// Caveat: the budget is what keeps one busy task from hogging its worker.
// A loop in an unconstrained body that always finds work (a channel that is
// never empty, a socket that always has bytes) runs until that work stops,
// and every other task of the worker waits meanwhile, as do its timers and
// sockets on a current_thread runtime. Use it for a bounded burst that is
// cheaper done in one go, or for a task that must not be delayed, never
// around an open-ended loop.
//
// What the enclosing task gets back when body ends: the budget is per
// poll, so it depends on where body ends.
//   - In the same stretch of the poll it began in (body did not suspend,
//     and the task ran nothing nested meanwhile): the budget left when body
//     began. Body's spending is not charged, as in Tokio.
//   - In a later poll of the task (body suspended, and the task is not run
//     nested in a joiner's poll): a full budget (config::coop_budget), as
//     that poll began with one and ran nothing but body. Tasks run nested in
//     that poll while body was joining are not charged either.
//   - Otherwise (the task runs nested in a joiner's poll, whose budget it
//     shares, or body's stretch ran other tasks nested): the budget as it
//     is, which body may have spent (down to zero, never below and never
//     above). Giving more back could hand that poll more than its budget.
// Body never adds budget: once its spending reached zero the rest is free,
// so tasks run nested meanwhile (help while joining, see
// detail/task_header.hpp) still get no more than the poll's budget, and a
// join's help still stops when the budget is spent.
//
// has_budget_remaining(), as Tokio's task::coop::has_budget_remaining: true
// while an operation that spends budget would complete without yielding:
// the current poll has a unit left, or the task is inside unconstrained.
// Outside a task (a plain thread, a blocking-pool job, a runtime hook) it
// is true: nothing there spends budget or yields for it (Tokio says the
// same there). For a loop that does its own work between awaits, to yield
// or hand work off before the budget forces it.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/task.hpp>

#include <coroutine>
#include <cstdint>
#include <utility>

namespace aspen {

namespace detail {
// Spends one unit of the current poll's budget; false when none is left.
bool coop_try_consume() noexcept;
void yield_current(std::coroutine_handle<> h) noexcept;  // yield_now
// Counts a yield forced by a spent budget in the worker's
// budget_forced_yields (yield_on_leaf does; the C API's polls call it).
void note_budget_forced_yield() noexcept;
// The budget is spent: suspends h on the leaf (as suspend_on_leaf; none:
// resumes h) and re-queues the task behind all ready work, so the leaf is
// polled in the task's next poll. Counted in the worker's
// budget_forced_yields.
void yield_on_leaf(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll) noexcept;

// The first poll of a leaf that spends budget (sync::leaf_awaitable): with
// budget left it spends one unit and polls the leaf; true when the leaf is
// ready. False when the leaf has to wait (the unit is given back) or when no
// budget was left (the leaf was not polled at all); either way the caller
// then suspends with suspend_budgeted_leaf. Throws std::logic_error outside
// a task (`what` names the operation).
bool poll_budgeted_leaf(const char* what, void* leaf, leaf_poll_fn poll);
// Right after poll_budgeted_leaf returned false: suspends on the leaf to wait
// (re-polled with `poll`), or, if it found no budget, yields behind all ready
// work with the leaf not polled yet; the task's next poll polls it first,
// with `poll_after_yield`, which spends a unit of that poll's budget when
// the leaf completes.
void suspend_budgeted_leaf(std::coroutine_handle<> h, void* leaf, leaf_poll_fn poll,
                           leaf_poll_fn poll_after_yield) noexcept;

// The current task is inside aspen::unconstrained for this object's
// lifetime. Built inside body's wrapper frame, so it ends exactly when body
// does, on every path; the destructor runs with no current task when the
// frame is destroyed by abort or shutdown, hence the task is kept.
class unconstrained_scope {
public:
    unconstrained_scope();  // throws std::logic_error outside a task
    ~unconstrained_scope();
    unconstrained_scope(const unconstrained_scope&) = delete;
    unconstrained_scope& operator=(const unconstrained_scope&) = delete;

private:
    task_header* task_;
    // Where in which poll the scope began (see the .cpp), and the budget
    // left then.
    const void* counters_;
    std::uint64_t polls_;
    std::uint64_t nested_runs_;
    std::uint32_t budget_;
};

template <class T>
task<T> run_unconstrained(task<T> body) {
    // Opened before body moves into a local, so that a frame destroyed
    // mid-way destroys body's frame (and the scopes inside it) first.
    unconstrained_scope scope;
    task<T> inner = std::move(body);
    co_return co_await std::move(inner);
}
}  // namespace detail

// Runs body, in the awaiting task, with the coop budget switched off (see
// above). Lazy like any task: nothing runs until it is awaited or spawned.
template <class T>
task<T> unconstrained(task<T> body) {
    return detail::run_unconstrained(std::move(body));
}

// True while an operation that spends budget would not yield (see above).
bool has_budget_remaining() noexcept;

struct consume_budget_awaitable {
    bool await_ready() const {
        detail::require_current_task("aspen::consume_budget");
        return detail::coop_try_consume();
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        suspended_ = true;
        detail::yield_on_leaf(h, nullptr, nullptr);  // the budget is spent
    }
    // After a yield the operation happens in the next poll and spends a unit
    // of that poll's fresh budget (after a ready await_ready it was spent).
    void await_resume() noexcept {
        if (suspended_) detail::coop_try_consume();
    }
    bool suspended_ = false;
};

// Spends one unit of budget; yields once the budget of this poll is spent.
// Call it in loops that would otherwise never suspend.
inline consume_budget_awaitable consume_budget() noexcept { return {}; }

}  // namespace aspen
