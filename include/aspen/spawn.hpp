// aspen::spawn: from inside a task, run another task in parallel on the same
// runtime. The new task goes to the current worker's next slot. As Tokio's
// tokio::spawn it also works on a runtime's thread outside a task and inside
// a spawn_blocking or block_in_place function (then onto that function's
// runtime, through its injector; runtime_shut_down once it is shut down).
// Elsewhere it throws std::logic_error: use runtime::spawn or a handle.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/task.hpp>

#include <stdexcept>

namespace aspen {

namespace detail {
// aspen::spawn's last resort: onto the runtime of this thread's
// spawn_blocking or block_in_place function; otherwise t is destroyed and
// std::logic_error thrown. (src/runtime_handle.cpp)
void spawn_on_blocking_owner(task_header* t);
}  // namespace detail

template <class T>
join_handle<T> spawn(task<T> t) {
    if (detail::polling_worker) [[likely]] {
        detail::task_header* h = detail::release_task(std::move(t));
        detail::spawn_on_worker(h);
        return join_handle<T>(h);
    }
    detail::scheduler* s = detail::current_scheduler();
    detail::task_header* h = detail::release_task(std::move(t));
    if (s) detail::spawn_root(s, h);
    else detail::spawn_on_blocking_owner(h);
    return join_handle<T>(h);
}

}  // namespace aspen
