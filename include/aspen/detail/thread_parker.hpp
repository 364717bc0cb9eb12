// Waiting for one aspen operation on a plain thread: the blocking_* calls of
// the channels and locks (as Tokio's blocking_send, blocking_recv,
// blocking_lock), for code outside any task that hands work to tasks or
// takes their results.
//
// The operation is polled as select polls a branch, with a waker that
// unparks this thread: pending, the thread sleeps on a futex until the
// waker fires, then polls again. The waker's target lives on the heap,
// reference-counted as a task's: a copy the operation stored (in a waiter
// list, a waker batch on another thread) may be woken after the call
// returned, and then wakes nobody instead of touching a dead stack frame.
//
// On a runtime's worker thread (inside a task, or in block_on of a
// current_thread runtime) waiting would stop the worker from running the
// very tasks that could end the wait, so the call throws std::logic_error
// instead. spawn_blocking functions and plain threads may wait.
#pragma once

#include <aspen/waker.hpp>

#include <utility>

namespace aspen::detail {

// Throws std::logic_error naming `what` when called on a runtime's thread
// (src/sync/thread_parker.cpp).
void check_may_block(const char* what);

struct parker_target;  // src/sync/thread_parker.cpp

// The waker of the thread that created it, and the sleep it wakes. Owned by
// that thread; the waker (and its copies) may be used from any thread.
class thread_parker {
public:
    thread_parker();
    thread_parker(const thread_parker&) = delete;
    thread_parker& operator=(const thread_parker&) = delete;
    ~thread_parker() = default;  // waker_'s drop frees the target with the last copy

    const aspen::waker& waker() const noexcept { return waker_; }
    // Returns once the waker fired since the last park (at once if it did
    // already); a wake before the park is never lost.
    void park() noexcept;

private:
    parker_target* target_;
    aspen::waker waker_;  // holds this thread's reference on *target_
};

// Runs op (a leaf operation: an mpsc send or receive, a lock, ...) to its
// end on this thread and gives its result, as co_await would.
template <class Op>
decltype(auto) wait_on_this_thread(const char* what, Op op) {
    check_may_block(what);
    thread_parker parker;
    aspen::context cx(parker.waker());
    while (!op.poll_as_branch(cx)) parker.park();
    return op.await_resume();
}

}  // namespace aspen::detail
