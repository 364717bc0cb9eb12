// task_id: names a spawned task, as Tokio's task::Id. For logs, traces and
// maps of running work: which task wrote this line, which one is stuck.
//
//   aspen::join_handle<void> h = aspen::spawn(serve(conn));
//   log("started", h.id());                    // or h.abort_handle().id()
//   ...                                         // inside serve():
//   log("serving", aspen::current_task_id());
//
// Every spawned task has one (block_on's task too), unique among all tasks
// of the process for as long as it runs and as long as a handle to it is
// held; value() is never 0. Code awaited inline (co_await child()) runs as
// part of the task that awaits it, so it sees that task's id.
//
// Ids are given out the first time one is asked for, so a spawn pays
// nothing for them, and their order tells nothing about when tasks were
// spawned. A handle's id() and the task's own current_task_id() agree,
// whoever asks first and from whatever thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>

namespace aspen {

class task_id {
public:
    constexpr std::uint64_t value() const noexcept { return v_; }
    friend constexpr bool operator==(task_id, task_id) noexcept = default;
    friend constexpr auto operator<=>(task_id, task_id) noexcept = default;
    friend std::ostream& operator<<(std::ostream& os, task_id id) { return os << id.v_; }

private:
    friend struct task_id_access;
    explicit constexpr task_id(std::uint64_t v) noexcept : v_(v) {}
    std::uint64_t v_;
};

// The id of the task this code runs in (inside a task, or a function it
// called). Throws std::logic_error elsewhere: on a thread of no runtime,
// or in a spawn_blocking function (no task runs there).
task_id current_task_id();
// The same, or nullopt outside a task.
std::optional<task_id> try_current_task_id() noexcept;

namespace detail {
struct task_header;
}
// How the handles build a task_id (not for users).
struct task_id_access {
    static task_id of(detail::task_header* t) noexcept;
    static constexpr task_id from_value(std::uint64_t v) noexcept { return task_id(v); }
};

}  // namespace aspen

template <>
struct std::hash<aspen::task_id> {
    std::size_t operator()(aspen::task_id id) const noexcept { return std::hash<std::uint64_t>{}(id.value()); }
};
