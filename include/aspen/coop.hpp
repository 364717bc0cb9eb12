// Cooperative scheduling budget. Each poll of a task starts with
// config::coop_budget units; operations that may succeed again and again
// without waiting (channel, socket and timer operations, and this call)
// spend one. When the budget is spent, the next such operation yields the
// task behind all ready work instead of completing at once, so one busy
// task cannot hog its worker.
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
