// Exceptions aspen throws to tell the caller what went wrong.
#pragma once

#include <stdexcept>

namespace aspen {

// Thrown by awaiting a join_handle whose task was aborted (or destroyed by
// shutdown) before it produced a value.
class task_cancelled : public std::runtime_error {
public:
    task_cancelled() : std::runtime_error("aspen: the task was cancelled before it finished") {}
};

// Thrown by aspen::timeout when the deadline passed first; the operation
// it guarded was cancelled.
class timed_out : public std::runtime_error {
public:
    timed_out() : std::runtime_error("aspen: the operation timed out") {}
};

// Thrown by spawn/block_on on a runtime that has been shut down: the task is
// not accepted, so nothing runs it and nothing is lost silently.
class runtime_shut_down : public std::runtime_error {
public:
    runtime_shut_down() : std::runtime_error("aspen: the runtime has been shut down; spawn refused") {}
};

// Thrown by awaiting semaphore::acquire on a semaphore that was closed
// (before or while the task waited), as Tokio's AcquireError.
class semaphore_closed : public std::runtime_error {
public:
    semaphore_closed() : std::runtime_error("aspen: the semaphore was closed; no permit granted") {}
};

}  // namespace aspen
