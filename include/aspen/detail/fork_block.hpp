// fork_block: the state one call of a parallel algorithm (aspen/parallel.hpp)
// shares between its root (the task awaiting the call) and its pieces
// (detached tasks it spawns, which spawn more). Not a public API.
//
// Protocol. One 64-bit word holds two counts:
//   * units (low 32 bits): work not finished. The root holds one for its own
//     share until its wait begins; each piece holds one until it ends. The
//     root's wait is over when units reaches 0.
//   * refs (high 32 bits): holders that may still touch the block: the root
//     until its task leaves the call (normally, by an exception, or aborted),
//     each piece until it ends. Whoever drops the last ref deletes the block.
// Invariants:
//   1. Only a holder of a unit adds units (add_piece, before the piece's
//      task exists), so units never rises from 0: once the root sees 0, no
//      piece is left and none can appear.
//   2. A unit's holder also holds a ref, so while units > 1 a second holder
//      keeps refs >= 2: a piece that is not the last unit drops its unit and
//      ref in one CAS and can never be the one to delete.
//   3. The piece that ends the last unit drops the unit first, wakes the
//      root while its ref keeps the block (and the stored waker) alive, then
//      drops its ref.
//   4. The root stores its waker before it gives up its own unit; the piece
//      that ends the last unit comes later in the word's modification order,
//      so its acquire sees the waker. The waker is never written again.
//   5. A piece's results (a partial sum, an error) are written before it
//      drops its unit with release; the root reads them after an acquire
//      load that sees units == 0, at the end of the release sequence of
//      every piece's drop.
// spec/fork_block.pml model-checks this protocol (spin), with broken
// variants of invariants 3 and 4 that it must catch.
// A piece never waits for another: pieces are plain detached tasks, so the
// only join is the root's, and an aborted root loses nothing but time
// (pieces not started see `stopping` and skip their work; the block lives
// until the last of them ends).
#pragma once

#include <aspen/poll.hpp>
#include <aspen/spawn.hpp>
#include <aspen/task.hpp>
#include <aspen/waker.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <utility>

namespace aspen::detail {

// Makes the tasks the calling worker spawned during this poll stealable now
// (its next slot and staged array are its own until the poll ends): a
// piece about to run a long chunk must not hide its siblings from idle
// workers meanwhile. No effect outside a multi-threaded runtime's poll.
void publish_local_spawns() noexcept;

// The worker count of the runtime whose task calls it (1 for a
// current_thread_runtime); std::logic_error outside a runtime.
std::size_t current_parallelism();

class fork_block {
public:
    fork_block() = default;
    fork_block(const fork_block&) = delete;
    fork_block& operator=(const fork_block&) = delete;
    virtual ~fork_block() = default;

    // A unit holder is about to create one piece: its unit and ref.
    void add_piece() noexcept {
        // relaxed: invariant 1 keeps the count from reaching 0 meanwhile, and
        // the spawn that follows publishes the piece with release, so its
        // eventual drop comes after this add in the word's order.
        word_.fetch_add(unit + ref, std::memory_order_relaxed);
    }
    // A piece ends (or its task is destroyed unrun): invariants 2 and 3.
    void finish_piece() noexcept;
    // Keeps the first exception (for the root to rethrow) and asks every
    // piece not yet started to skip its work.
    void fail(std::exception_ptr e) noexcept;
    void request_stop() noexcept {
        // relaxed: a hint; a piece that misses it just does its work.
        stop_.store(true, std::memory_order_relaxed);
    }
    bool stopping() const noexcept {
        // relaxed: see request_stop.
        return stop_.load(std::memory_order_relaxed);
    }

    // ---- the root's side ---------------------------------------------------
    // The root's wait, as a poll: true once every unit has ended.
    bool root_poll(context& cx) noexcept;
    // The root leaves the call: asks any piece not started to stop, gives
    // up its unit if it still has it (an abort before the wait), then its
    // ref.
    void root_leave() noexcept;
    // After root_poll returned true: the first failure, if any.
    std::exception_ptr error() const noexcept { return error_; }

private:
    static constexpr std::uint64_t unit = 1;
    static constexpr std::uint64_t ref = std::uint64_t{1} << 32;
    static std::uint64_t units_of(std::uint64_t w) noexcept { return w & (ref - 1); }

    void drop_last_unit() noexcept;
    void drop_ref() noexcept;

    // Starts with the root's unit and ref.
    std::atomic<std::uint64_t> word_{unit + ref};
    std::atomic<bool> stop_{false};
    std::atomic<bool> failed_{false};
    std::exception_ptr error_;  // written once, by the winner of failed_
    waker root_;                // written once, before the root's unit drop
    bool root_has_unit_ = true;  // the root's own
};

// One unit and one ref of a block, owned by a piece's frame: whether the
// piece runs, throws or is destroyed unrun (shutdown, a refused spawn),
// the frame's destruction gives them back.
class piece_ref {
public:
    explicit piece_ref(fork_block* b) noexcept : b_(b) {}
    piece_ref(piece_ref&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
    piece_ref& operator=(piece_ref&&) = delete;
    ~piece_ref() {
        if (b_) b_->finish_piece();
    }
    fork_block* get() const noexcept { return b_; }

private:
    fork_block* b_;
};

// A piece's task: the job's run, or its run_async for work that awaits
// (each catches what its work throws).
template <class Job, class Arg>
task<void> run_piece(piece_ref ref, Arg arg) {
    Job* job = static_cast<Job*>(ref.get());
    if constexpr (requires { job->run_async(arg); })
        co_await job->run_async(std::move(arg));
    else
        job->run(std::move(arg));
}

// Starts a piece of `job` on `arg` as a detached task. Called by a unit
// holder (the root, or a piece inside its run).
template <class Job, class Arg>
void spawn_piece(Job& job, Arg arg) {
    job.add_piece();
    aspen::spawn(run_piece<Job, Arg>(piece_ref(&job), std::move(arg))).detach();
}

// The root's hold on a block: created right after the block, destroyed
// when the root's frame leaves the call by any path.
class root_guard {
public:
    explicit root_guard(fork_block* b) noexcept : b_(b) {}
    root_guard(const root_guard&) = delete;
    root_guard& operator=(const root_guard&) = delete;
    ~root_guard() { b_->root_leave(); }

    // Awaits the end of every piece, then rethrows the first failure.
    auto wait() {
        return aspen::poll_fn([b = b_](context& cx) -> aspen::poll<void> {
            if (!b->root_poll(cx)) return aspen::pending;
            if (std::exception_ptr e = b->error()) std::rethrow_exception(e);
            return aspen::ready();
        });
    }

private:
    fork_block* b_;
};

}  // namespace aspen::detail
