// aspen::spawn: from inside a task, run another task in parallel on the same
// runtime. The new task goes to the current worker's next slot.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/task.hpp>

#include <stdexcept>

namespace aspen {

namespace detail {
// A spawn from outside a worker's poll: the single-threaded runtime, or a
// thread with no runtime at all (an error).
template <class T>
[[gnu::noinline]] join_handle<T> spawn_elsewhere(task<T> t) {
    scheduler* s = current_scheduler();
    if (!s) throw std::logic_error("aspen::spawn: called outside a runtime; use runtime::spawn");
    task_header* h = release_task(std::move(t));
    spawn_root(s, h);
    return join_handle<T>(h);
}
}  // namespace detail

// Always inline, its rare path out of line: as a call of its own, every
// spawn paid a call, a frame and a return on top of spawn_on_worker's
// (fib(22): 4 instructions a spawn; fib(30) at 1 worker 1.5% to 2.2%
// faster, best of 10, three alternating pairs).
template <class T>
[[gnu::always_inline]] inline join_handle<T> spawn(task<T> t) {
    if (detail::polling_worker) [[likely]] {
        detail::task_header* h = detail::release_task(std::move(t));
        detail::spawn_on_worker(h);
        return join_handle<T>(h);
    }
    return detail::spawn_elsewhere(std::move(t));
}

}  // namespace aspen
