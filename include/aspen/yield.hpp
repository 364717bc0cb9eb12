// yield_now(): the task steps back behind all work that is ready now.
#pragma once

#include <aspen/detail/task_header.hpp>

#include <coroutine>

namespace aspen {

namespace detail {
void yield_current(std::coroutine_handle<> h) noexcept;
}

struct yield_awaitable {
    bool await_ready() const {
        detail::require_current_task("aspen::yield_now");
        return false;
    }
    void await_suspend(std::coroutine_handle<> h) const noexcept { detail::yield_current(h); }
    void await_resume() const noexcept {}
};

inline yield_awaitable yield_now() noexcept { return {}; }

}  // namespace aspen
