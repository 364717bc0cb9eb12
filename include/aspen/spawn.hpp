// aspen::spawn: from inside a task, run another task in parallel on the same
// runtime. The new task goes to the current worker's next slot.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/task.hpp>

#include <stdexcept>

namespace aspen {

template <class T>
join_handle<T> spawn(task<T> t) {
    if (detail::polling_worker) [[likely]] {
        detail::task_header* h = detail::release_task(std::move(t));
        detail::spawn_on_worker(h);
        return join_handle<T>(h);
    }
    detail::scheduler* s = detail::current_scheduler();
    if (!s) throw std::logic_error("aspen::spawn: called outside a runtime; use runtime::spawn");
    detail::task_header* h = detail::release_task(std::move(t));
    detail::spawn_root(s, h);
    return join_handle<T>(h);
}

}  // namespace aspen
