// aspen::barrier: n tasks wait for each other, then all go on together, and
// the barrier is ready for the next round (like Tokio's Barrier).
//
//   aspen::barrier b(3);
//   aspen::barrier_wait_result r = co_await b.wait();   // in each of 3 tasks
//   if (r.is_leader()) { ... }                           // exactly one per round
//
// A round (generation) completes when the n-th task arrives: that task is the
// leader and continues at once; the n - 1 waiting are woken. A task arrives
// when its wait() is first polled.
//
// Cancel safety: `co_await b.wait()` is cancel-safe in the sense that an
// aborted waiter gives up its place: a task aborted (or a wait() awaitable
// destroyed) before its round completes withdraws its arrival, so the round
// still needs n live tasks and never completes short. One aborted after its
// round completed (woken but not yet resumed) changes nothing: the round
// stays complete for everyone else.
//
// Coop budget: the arrival that completes a round spends one unit; with none
// left, the task yields first and arrives on its next poll.
//
// Rules: n >= 1 (std::invalid_argument otherwise). The barrier must outlive
// every wait() awaitable. Awaiting the same awaitable twice throws
// std::logic_error.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/sync/wake_round.hpp>
#include <aspen/waker.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>

namespace aspen {

class barrier;

class barrier_wait_result {
public:
    explicit barrier_wait_result(bool leader) noexcept : leader_(leader) {}
    // True for the one task per round whose arrival completed it.
    bool is_leader() const noexcept { return leader_; }

private:
    bool leader_;
};

// What barrier::wait() returns; `co_await` it for a barrier_wait_result.
class [[nodiscard]] barrier_wait_awaitable : public detail::sync::leaf_awaitable<barrier_wait_awaitable> {
public:
    static constexpr const char* awaited_what = "aspen::barrier::wait";

    explicit barrier_wait_awaitable(barrier* b) noexcept : b_(b) {}
    barrier_wait_awaitable(barrier_wait_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~barrier_wait_awaitable();
    barrier_wait_result await_resume() {
        rethrow_if_error();
        phase_ = phase::done;
        return barrier_wait_result(leader_);
    }

private:
    friend class detail::sync::leaf_awaitable<barrier_wait_awaitable>;
    friend class barrier;

    using node = detail::sync::waker_node;
    enum class phase : unsigned char { init, waiting, ready, done };  // owner-only

    bool poll(aspen::context& cx);

    barrier* b_;
    node node_;
    std::uint64_t generation_ = 0;  // the round it arrived in (while waiting)
    phase phase_ = phase::init;
    bool leader_ = false;
};

class barrier {
public:
    explicit barrier(std::size_t n) : n_(n) {
        if (n == 0) throw std::invalid_argument("aspen::barrier: n must be at least 1");
    }
    barrier(const barrier&) = delete;
    barrier& operator=(const barrier&) = delete;

    // co_await b.wait() -> barrier_wait_result.
    barrier_wait_awaitable wait() noexcept { return barrier_wait_awaitable(this); }

    // Snapshots, for diagnostics and tests.
    std::size_t arrived() const {
        std::lock_guard g(state_);
        return arrived_;
    }
    std::uint64_t generation() const {
        std::lock_guard g(state_);
        return generation_;
    }

private:
    friend class barrier_wait_awaitable;

    mutable aspen::detail::spin_mutex state_;
    const std::size_t n_;
    std::size_t arrived_ = 0;      // in the current round
    std::uint64_t generation_ = 0;  // completed rounds
    detail::sync::waiter_list waiters_;
};

inline bool barrier_wait_awaitable::poll(aspen::context& cx) {
    std::unique_lock g(b_->state_);
    switch (phase_) {
        case phase::init:
            if (b_->arrived_ + 1 < b_->n_) {
                ++b_->arrived_;
                generation_ = b_->generation_;
                node_.waker = cx.waker();
                b_->waiters_.push_back(&node_);
                phase_ = phase::waiting;
                return false;
            }
            // The last arrival: a new round starts, every waiter of this one goes.
            b_->arrived_ = 0;
            ++b_->generation_;
            leader_ = true;
            phase_ = phase::ready;
            detail::sync::wake_all_locked(b_->waiters_, g);
            return true;
        case phase::waiting:
            // The round we arrived in is over once the generation moved on.
            if (b_->generation_ != generation_) {
                if (node_.linked()) node_.unlink();  // still in the tripping round's list
                phase_ = phase::ready;
                return true;
            }
            detail::sync::store_waker(node_.waker, cx);
            return false;
        case phase::ready:
        case phase::done:
            break;
    }
    throw std::logic_error("aspen::barrier::wait: the awaitable was already awaited");
}

inline barrier_wait_awaitable::~barrier_wait_awaitable() {
    if (phase_ != phase::waiting) return;
    std::lock_guard g(b_->state_);
    if (node_.linked()) node_.unlink();
    // Still in the open round: take the arrival back.
    if (b_->generation_ == generation_) --b_->arrived_;
}

}  // namespace aspen
