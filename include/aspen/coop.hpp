// Cooperative scheduling budget. Each poll of a task starts with
// config::coop_budget units; operations that may succeed again and again
// without waiting spend one: every await of the sync primitives and channels
// (aspen/sync/: lock, acquire, send, recv, notified, event and latch waits)
// and this call. When the budget is spent, the next such operation yields
// the task behind all ready work instead of completing at once, so one busy
// task cannot hog its worker. A sync await that has to wait spends nothing,
// and one that yields has done nothing yet (it takes no message, lock or
// permit until the task's next poll), so cancel safety is unchanged.
#pragma once

#include <aspen/detail/task_header.hpp>

#include <coroutine>

namespace aspen {

namespace detail {
// Spends one unit of the current poll's budget; false when none is left.
bool coop_try_consume() noexcept;
void yield_current(std::coroutine_handle<> h) noexcept;
// Suspends h on the leaf (as suspend_on_leaf) and re-queues the task behind
// all ready work: a leaf whose budget ran out is polled in the next poll.
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
}  // namespace detail

struct consume_budget_awaitable {
    bool await_ready() const {
        detail::require_current_task("aspen::consume_budget");
        return detail::coop_try_consume();
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        suspended_ = true;
        detail::yield_current(h);
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
