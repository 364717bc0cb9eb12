// abort_handle: cancels a spawned task without owning its join_handle, as
// Tokio's AbortHandle. Get one from `h.abort_handle()` or from
// `join_set::spawn`; copy it to any thread, keep it in a map of running
// requests, call abort() from wherever the decision is made.
//
//   aspen::join_handle<void> h = aspen::spawn(serve(conn));
//   aspen::abort_handle stop = h.abort_handle();
//   ...                      // on another thread, or after h was awaited
//   stop.abort();            // as h.abort(): the awaiter of h then gets task_cancelled
//
// abort() does what join_handle::abort() does: the task's frame is
// destroyed at its next suspension point, or at once if it is waiting; no
// effect once it has finished. is_finished() is true once the task ran to
// its end or was destroyed. Neither reads the result, so an abort_handle
// never competes with the join_handle (or join_set) that takes it.
//
// An abort_handle holds a reference to the task's block (the header, not
// the frame): the task's frame and resources go when the task ends, as
// always, and only the small block waits for the last reference. It may
// outlive the runtime: the runtime's shutdown destroys every task, so a
// later abort() finds it finished and does nothing.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/task_id.hpp>

#include <stdexcept>

#include <utility>

namespace aspen {

template <class T>
class join_handle;

class abort_handle {
public:
    abort_handle() noexcept = default;
    abort_handle(const abort_handle& other) noexcept : t_(other.t_) {
        if (t_) detail::ref_inc(t_);
    }
    abort_handle(abort_handle&& other) noexcept : t_(std::exchange(other.t_, nullptr)) {}
    abort_handle& operator=(abort_handle other) noexcept {
        std::swap(t_, other.t_);
        return *this;
    }
    ~abort_handle() {
        if (t_) detail::ref_dec(t_);
    }

    // Cancels the task (see above); does nothing on an empty handle.
    void abort() const noexcept {
        if (t_) detail::abort_task(t_);
    }
    // The task ran to its end or was destroyed; false on an empty handle.
    bool is_finished() const noexcept { return t_ && detail::is_complete(t_); }
    bool valid() const noexcept { return t_ != nullptr; }
    // The task's id (aspen/task_id.hpp), the same as its join_handle's.
    // Throws std::logic_error on an empty handle.
    task_id id() const {
        if (!t_) throw std::logic_error("aspen::abort_handle::id: the handle is empty");
        return task_id_access::of(t_);
    }
    // Both name the same task (two empty handles are equal), e.g. to find a
    // handle in a list of running work.
    friend bool operator==(const abort_handle& a, const abort_handle& b) noexcept { return a.t_ == b.t_; }

private:
    template <class T>
    friend class join_handle;
    // Takes a new reference: the caller holds one already (its join_handle).
    explicit abort_handle(detail::task_header* t) noexcept : t_(t) { detail::ref_inc(t_); }

    detail::task_header* t_ = nullptr;
};

}  // namespace aspen
