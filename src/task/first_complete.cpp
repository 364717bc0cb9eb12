// when_any's wait: one poll registers the task's waker as the join waker of
// every child, so whichever finishes first wakes it. A re-poll (any wake,
// spurious ones included) just re-checks and re-registers; a child's old
// registration is replaced, not duplicated (register_join_waker).
#include <aspen/detail/combinator.hpp>
#include <aspen/poll.hpp>

namespace aspen::detail {

task<std::size_t> first_complete(task_header* const* tasks, std::size_t n) {
    co_return co_await poll_fn([tasks, n](context& cx) -> poll<std::size_t> {
        for (std::size_t i = 0; i < n; ++i)
            if (!register_join_waker(tasks[i], cx.waker())) return ready(i);
        return pending;
    });
}

}  // namespace aspen::detail
