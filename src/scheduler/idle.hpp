// The idle protocol: who searches for work, who sleeps, who gets woken.
// (This is where lost wakeups live; model: spec/idle.pml, run by
// `bash spec/run.sh` and ctest's spin_models.)
//
// State: one atomic word packing (parked << 32 | searching), and a locked
// list of sleeping workers. Parked, not unparked: then "some worker
// searches or sleeps" (wants_work, which every staging asks) is the word
// being non-zero, one test (skynet about 3 instructions a spawn fewer).
// spec/idle.pml models the same pair as (unparked, searching), with
// unparked = workers - parked.
//
// * A worker out of local work becomes *searching* unless half the workers
//   already search (bounded contention on victims).
// * A searcher that finds work stops searching; if it was the last
//   searcher it wakes one sleeper (the chain wake: awake workers ramp up
//   with the load, one at a time, no thundering herd).
// * A producer that made work visible wakes a sleeper only when nobody
//   searches and someone sleeps; the woken worker starts as a searcher.
// * A worker going to sleep decrements the counts; if it was the last
//   searcher it re-checks every queue and wakes a sleeper if any holds work.
//
// Why no wakeup is lost: the producer's publish (a seq_cst RMW on a queue)
// is followed by a seq_cst load of this word; the last searcher's seq_cst
// decrement is followed by seq_cst loads of every queue. In the single total
// order either the producer sees searching == 0 (and wakes someone), or the
// searcher's re-check sees the work. A non-last searcher need not re-check:
// the last one still will. This needs one more rule, which the scheduler
// keeps: a worker parks without having been a searcher only when
// try_become_searching failed, i.e. while others search. (A lone worker that
// parked without searching lost a wakeup; spec/idle.pml keeps that bug as a
// variant spin must catch.)
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace aspen::detail {

class idle_state {
public:
    explicit idle_state(std::size_t workers) : num_workers_(workers) {
        // relaxed: the constructor runs before any worker thread exists;
        // starting the threads publishes it. Every worker starts unparked.
        state_.store(pack(0, 0), std::memory_order_relaxed);
        sleepers_.reserve(workers);
    }

    // Producer side: the index of a sleeper to wake, already counted as
    // unparked and searching, or nothing.
    std::optional<std::size_t> worker_to_notify() {
        if (!should_wake()) return std::nullopt;
        std::lock_guard lock(mutex_);
        if (!should_wake() || sleepers_.empty()) return std::nullopt;
        // seq_cst: the new searcher must be in the total order before any
        // producer's check that could otherwise wake a second worker.
        state_.fetch_add(one_unparked_searcher, std::memory_order_seq_cst);
        std::size_t w = sleepers_.back();
        sleepers_.pop_back();
        return w;
    }

    bool try_become_searching() {
        // seq_cst: part of the handshake with producers (see top).
        std::uint64_t s = state_.load(std::memory_order_seq_cst);
        if (2 * searching(s) >= num_workers_) return false;
        state_.fetch_add(pack(0, 1), std::memory_order_seq_cst);
        return true;
    }

    // True if the caller was the last searcher.
    bool stop_searching() {
        // seq_cst: see top.
        return searching(state_.fetch_sub(pack(0, 1), std::memory_order_seq_cst)) == 1;
    }

    // True if the caller was the last searcher (it must re-check queues).
    bool to_parked(std::size_t worker, bool was_searching) {
        std::lock_guard lock(mutex_);
        // seq_cst: this decrement must precede the re-check loads in the
        // total order (see top).
        std::uint64_t prev = state_.fetch_add(pack(1, 0) - pack(0, was_searching ? 1 : 0), std::memory_order_seq_cst);
        sleepers_.push_back(worker);
        return was_searching && searching(prev) == 1;
    }

    // A parked worker woke by itself (its driver park returned on I/O or a
    // timer): if it is still listed as a sleeper it takes itself off the
    // list and counts itself unparked and searching, as worker_to_notify
    // would have, and returns true. False: a notifier already took it off
    // and counted it, and its unpark is on the way; the caller must consume
    // that unpark (park once more), or it would later end a park that nobody
    // counted. block_in_place's hand-back calls it too, for the worker it
    // wants back from a stand-in thread (true: it then unparks that worker,
    // as a notifier does).
    bool unpark_self(std::size_t worker) {
        std::lock_guard lock(mutex_);
        auto it = std::find(sleepers_.begin(), sleepers_.end(), worker);
        if (it == sleepers_.end()) return false;
        sleepers_.erase(it);
        // seq_cst: as in worker_to_notify (a searcher joins the total order).
        state_.fetch_add(one_unparked_searcher, std::memory_order_seq_cst);
        return true;
    }

    // Some worker searches or sleeps: a hint for a busy worker to make its
    // private work (staged tasks) stealable. relaxed: only a hint; nothing
    // waits on it (staged work is published by the end of the poll anyway).
    bool wants_work() const noexcept { return state_.load(std::memory_order_relaxed) != 0; }

    // Every worker is parked (a snapshot).
    bool all_parked() const noexcept {
        // seq_cst: cheap here, and keeps this load in the one total order.
        return parked(state_.load(std::memory_order_seq_cst)) == num_workers_;
    }

    // Removes every sleeper (shutdown); returns them.
    std::vector<std::size_t> take_all_sleepers() {
        std::lock_guard lock(mutex_);
        return std::exchange(sleepers_, {});
    }

private:
    static constexpr std::uint64_t pack(std::uint64_t parked, std::uint64_t searching) noexcept {
        return parked << 32 | searching;
    }
    // A sleeper woken: one parked fewer and one searcher more, in one
    // fetch_add. Unsigned arithmetic is modulo 2^64, so adding
    // pack(0, 1) - pack(1, 0) lowers the high half by one and raises the
    // low half by one (a sleeper exists: parked >= 1). to_parked's addend
    // for a searcher, pack(1, 0) - pack(0, 1), likewise raises parked and
    // lowers searching (>= 1: the caller is one).
    static constexpr std::uint64_t one_unparked_searcher = std::uint64_t{1} - (std::uint64_t{1} << 32);
    static std::uint32_t searching(std::uint64_t s) noexcept { return static_cast<std::uint32_t>(s); }
    static std::uint32_t parked(std::uint64_t s) noexcept { return static_cast<std::uint32_t>(s >> 32); }
    bool should_wake() const noexcept {
        // seq_cst: the "check" half of publish-then-check (see top).
        std::uint64_t s = state_.load(std::memory_order_seq_cst);
        return searching(s) == 0 && parked(s) != 0;
    }

    std::atomic<std::uint64_t> state_;
    std::size_t num_workers_;
    std::mutex mutex_;
    std::vector<std::size_t> sleepers_;
};

}  // namespace aspen::detail
