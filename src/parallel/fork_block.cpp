// The fork_block protocol (aspen/detail/fork_block.hpp, where its
// invariants are numbered).
#include <aspen/detail/fork_block.hpp>

#include "scheduler/scheduler.hpp"

#include <stdexcept>

namespace aspen::detail {

std::size_t current_parallelism() {
    scheduler* s = current_scheduler();
    if (!s) throw std::logic_error("aspen: a parallel algorithm was awaited outside a runtime");
    return s->parallelism();
}

void fork_block::finish_piece() noexcept {
    // relaxed: only the CAS's first guess; the CAS orders.
    std::uint64_t w = word_.load(std::memory_order_relaxed);
    while (units_of(w) > 1) {
        // release: this piece's results and error reach the root (invariant
        // 5). No acquire needed: by invariant 2 this never deletes.
        if (word_.compare_exchange_weak(w, w - unit - ref, std::memory_order_release,
                                        std::memory_order_relaxed))
            return;
    }
    drop_last_unit();
    drop_ref();
}

// Invariant 3: this holder had the last unit, and still has its ref.
void fork_block::drop_last_unit() noexcept {
    // acq_rel: release as in finish_piece; acquire sees the root's waker
    // (invariant 4).
    word_.fetch_sub(unit, std::memory_order_acq_rel);
    root_.wake_by_ref();  // a no-op if the root never stored one (it left)
}

void fork_block::drop_ref() noexcept {
    // acq_rel: the deleter must see every other holder's last writes (the
    // waker's drop, results) before destroying them; each drop releases.
    if ((word_.fetch_sub(ref, std::memory_order_acq_rel) >> 32) == 1) delete this;
}

void fork_block::fail(std::exception_ptr e) noexcept {
    // relaxed: the exchange alone elects one writer of error_; invariant 5
    // publishes the write, and a loser never reads it.
    if (!failed_.exchange(true, std::memory_order_relaxed)) error_ = std::move(e);
    request_stop();
}

bool fork_block::root_poll(context& cx) noexcept {
    if (root_has_unit_) {
        root_ = cx.waker();  // invariant 4: before the unit's drop below
        root_has_unit_ = false;
        // acq_rel: release publishes the waker (invariant 4); acquire takes
        // the pieces' results if the root's unit was the last (invariant 5).
        // The root's ref stays: root_leave drops it.
        return units_of(word_.fetch_sub(unit, std::memory_order_acq_rel)) == 1;
    }
    // acquire: invariant 5.
    return units_of(word_.load(std::memory_order_acquire)) == 0;
}

void fork_block::root_leave() noexcept {
    // Pieces not started yet (if any are left) skip their work: the caller
    // is gone, or has its answer already.
    request_stop();
    if (root_has_unit_) {
        root_has_unit_ = false;
        // release: the root's writes to the block come before its deletion.
        // No waker was stored, so if this unit was the last there is no one
        // to wake.
        word_.fetch_sub(unit, std::memory_order_release);
    }
    drop_ref();
}

}  // namespace aspen::detail
