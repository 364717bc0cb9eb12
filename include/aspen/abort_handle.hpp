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
// always, and only the small block waits for the last reference. One taken
// from a join_handle that already gave its finished task's block back
// (join_handle.hpp, "Given back") holds only the id. It may
// outlive the runtime: the runtime's shutdown destroys every task, so a
// later abort() finds it finished and does nothing.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/task_id.hpp>

#include <cstdint>
#include <stdexcept>
#include <utility>

namespace aspen {

template <class T>
class join_handle;

class abort_handle {
public:
    abort_handle() noexcept = default;
    abort_handle(const abort_handle& other) noexcept : bits_(other.bits_) {
        if (holds_block()) detail::ref_inc(task());
    }
    abort_handle(abort_handle&& other) noexcept : bits_(std::exchange(other.bits_, 0)) {}
    abort_handle& operator=(abort_handle other) noexcept {
        std::swap(bits_, other.bits_);
        return *this;
    }
    ~abort_handle() {
        if (holds_block()) detail::ref_dec(task());
    }

    // Cancels the task (see above); does nothing on an empty handle.
    void abort() const noexcept {
        if (holds_block()) detail::abort_task(task());
    }
    // The task ran to its end or was destroyed; false on an empty handle.
    bool is_finished() const noexcept { return bits_ && (!holds_block() || detail::is_complete(task())); }
    bool valid() const noexcept { return bits_ != 0; }
    // The task's id (aspen/task_id.hpp), the same as its join_handle's.
    // Throws std::logic_error on an empty handle.
    task_id id() const {
        if (!bits_) throw std::logic_error("aspen::abort_handle::id: the handle is empty");
        if (!holds_block()) return task_id_access::from_value(bits_ >> id_shift);
        return task_id_access::of(task());
    }
    // Both name the same task (two empty handles are equal), e.g. to find a
    // handle in a list of running work.
    friend bool operator==(const abort_handle& a, const abort_handle& b) noexcept { return a.bits_ == b.bits_; }

private:
    template <class T>
    friend class join_handle;
    // Takes a new reference: the caller holds one already (its join_handle).
    explicit abort_handle(detail::task_header* t) noexcept : bits_(reinterpret_cast<std::uintptr_t>(t)) {
        detail::ref_inc(t);
    }
    // A task that finished and whose block is gone (a join_handle that gave
    // it back, see "Given back" in join_handle.hpp): only its id is left,
    // kept in the word instead of a pointer (id != 0). Every abort_handle
    // taken from such a join_handle carries the same id, so they compare
    // equal, and none of them can reach the task: is_finished() is true and
    // abort() does nothing, as for any finished task.
    static abort_handle of_finished(std::uint64_t id) noexcept {
        abort_handle h;
        h.bits_ = (static_cast<std::uintptr_t>(id) << id_shift) | finished_bit;
        return h;
    }

    // Task headers are 16-byte aligned: bit 1 of a pointer is free.
    static constexpr std::uintptr_t finished_bit = 2;
    static constexpr unsigned id_shift = 2;
    bool holds_block() const noexcept { return bits_ != 0 && !(bits_ & finished_bit); }
    detail::task_header* task() const noexcept { return reinterpret_cast<detail::task_header*>(bits_); }

    std::uintptr_t bits_ = 0;  // the task's header, or its id (of_finished)
};

}  // namespace aspen
