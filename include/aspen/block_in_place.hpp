// aspen::block_in_place: run blocking code from inside a task without
// holding up the tasks queued behind it, as Tokio's task::block_in_place.
//
//   std::string text = aspen::block_in_place([&] { return read_whole_file(path); });
//
// On a multi-threaded runtime's worker, during a task's poll, the worker
// first hands its place (its queue, next slot, the work-stealing loop) to a
// stand-in thread, which runs the other tasks meanwhile; `f` then runs on
// this thread, and when it returns the stand-in finishes the poll it is in
// and gives the place back, and the task goes on here. Nothing queued on
// the worker waits for `f`, also with one worker. Inside `f` the thread is
// no longer a runtime thread: blocking calls are allowed (`blocking_recv`,
// `runtime_handle::current().block_on(...)`), and `runtime_handle::current()`
// names the runtime, as in a spawn_blocking function; `aspen::spawn` and
// `aspen::spawn_blocking` go to that runtime. As in Tokio, `f` runs within
// the task's poll, so it sees the task's task_local values (a sync_scope
// inside `f` stacks on them and is gone when `f` returns).
//
// Elsewhere it just calls `f`: on a plain thread, in a spawn_blocking
// function, inside another block_in_place, or on a worker outside a poll.
// On a current_thread runtime, whose one thread runs every task, it throws
// std::logic_error (as Tokio panics there): use spawn_blocking.
//
// Costs and limits: the stand-in is a thread kept for the next call, as
// Tokio keeps its blocking threads (one is started when none is idle, and
// an idle one ends after config::blocking_keep_alive, or when the runtime
// shuts down). A function that returns before the stand-in has begun
// takes the hand-off back (about 0.2 us in all); past that, the hand-back
// costs a few thread wake-ups (tens of microseconds on a VM), so it is for
// calls that may block; the task itself stays on this thread and
// cannot be aborted while `f` runs (an abort takes effect at its next
// suspension, as always); `f`'s exception is rethrown to the task once the
// place is back. A runtime shut down or destroyed meanwhile first stops
// its workers and cancels every other task (so an `f` that waits on the
// runtime, through a handle's block_on or a channel a task holds the other
// end of, is released: task_cancelled, runtime_shut_down or a closed
// channel), then waits for `f` to return (`shutdown_timeout` too: `f` runs
// on a worker's thread, which shutdown joins); the calling task is
// cancelled at its next suspension. If the stand-in thread cannot be started, the
// std::system_error is thrown before `f` runs.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace aspen {

namespace detail {
// Runs fn(arg) as described above; fn's exception propagates.
void block_in_place_impl(void (*fn)(void*), void* arg);
}  // namespace detail

template <class F>
std::invoke_result_t<F&> block_in_place(F&& f) {
    using R = std::invoke_result_t<F&>;
    using Fn = std::remove_reference_t<F>;
    if constexpr (std::is_void_v<R>) {
        detail::block_in_place_impl([](void* p) { std::invoke(*static_cast<Fn*>(p)); }, std::addressof(f));
    } else {
        // A reference result is kept as a pointer (optional<T&> does not exist).
        using Slot = std::conditional_t<std::is_reference_v<R>, std::remove_reference_t<R>*, R>;
        struct call {
            Fn* f;
            std::optional<Slot> out;
        } c{std::addressof(f), std::nullopt};
        detail::block_in_place_impl(
            [](void* p) {
                call& c = *static_cast<call*>(p);
                if constexpr (std::is_reference_v<R>)
                    c.out.emplace(std::addressof(std::invoke(*c.f)));
                else
                    c.out.emplace(std::invoke(*c.f));
            },
            &c);
        if constexpr (std::is_reference_v<R>)
            return static_cast<R>(**c.out);
        else
            return std::move(*c.out);
    }
}

}  // namespace aspen
