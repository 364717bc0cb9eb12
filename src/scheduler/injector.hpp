// injector<T>: the global multi-producer / multi-consumer run queue.
//
// Protocol
// --------
// An intrusive singly linked FIFO list threaded through T::queue_next
// (head_ = oldest, tail_ = newest), guarded by one std::mutex. Producers are
// threads outside the runtime (spawn from a foreign thread, wake-ups from
// the I/O / timer thread) and workers whose local ring overflowed
// (local_queue::push_overflow hands over half a ring as ONE pre-linked batch
// via push_batch). Consumers are workers: pop / pop_batch while searching
// for work or every `global_queue_interval` ticks, take_all at shutdown.
//
// Next to the list sits an atomic length, len_, so that len() / is_empty()
// and the empty fast path of pop() / pop_batch() never take the lock. Every
// change of len_ happens inside the lock, after the list change it
// describes, so under the lock len_ is exact. Outside the lock it is a
// snapshot that may lag a push that is still in progress (the list is
// already linked, the count not yet raised) - such a push has not finished,
// and its caller wakes sleepers only after it returns.
//
// Idle protocol: a push raises len_ with a seq_cst RMW, so "push, then check
// for sleepers" (pusher) against "announce sleeping, then re-check queues"
// (parker, whose re-check is the seq_cst load in is_empty()) is a Dekker
// handshake in the single total order: at least one side sees the other.
//
// Why FIFO
// --------
// Tasks arrive here from outside the worker that will run them; they have no
// cache affinity to exploit (the reason the local rings are LIFO), and
// fairness matters instead: the oldest external task must not starve behind
// a stream of newer ones. An overflow batch keeps its internal order
// (oldest first), so it also stays FIFO relative to itself.
//
// Why one lock
// ------------
// The queue is off the hot path (workers touch it every 61 ticks or when
// their own ring is empty or full), batches amortise it (an overflow moves
// capacity/2 + 1 tasks per acquisition, pop_batch takes many), and the
// critical sections are a handful of pointer writes. A lock-free MPMC list
// would buy little and cost an ABA / reclamation story. std::mutex rather
// than a spinlock: its uncontended path is one atomic RMW to lock and one to
// unlock, same as a spinlock, but under contention it sleeps in the kernel
// (futex) instead of spinning - important when workers outnumber cores and
// the holder may be preempted (spinning then burns the very timeslice the
// holder needs) - and ThreadSanitizer models it natively.

#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <mutex>

namespace aspen::detail {

template <class T>
class injector {
public:
    injector() = default;
    injector(const injector&) = delete;
    injector& operator=(const injector&) = delete;
    ~injector() = default;  // does not own the tasks; drain with take_all

    // Appends one task (newest).
    void push(T* t) {
        assert(t != nullptr);
        t->queue_next = nullptr;  // we own t until it is linked in
        std::lock_guard lock(mu_);
        link(t, t);
        // seq_cst: the idle protocol's publish-then-check handshake needs the
        // push in the single total order with the parker's seq_cst state update.
        len_.fetch_add(1, std::memory_order_seq_cst);
    }

    // Appends a pre-linked list first -> ... -> last of n tasks (oldest
    // first), as one atomic step: consumers see all of it or none of it.
    // last->queue_next is overwritten (set to nullptr).
    void push_batch(T* first, T* last, std::size_t n) {
        if (n == 0) {
            assert(first == nullptr && last == nullptr);
            return;
        }
        assert(first != nullptr && last != nullptr);
#ifndef NDEBUG
        {
            std::size_t k = 1;
            for (T* p = first; p != last; p = p->queue_next) {
                assert(p != nullptr && "push_batch: last is not reachable from first");
                ++k;
            }
            assert(k == n && "push_batch: n does not match the list length");
        }
#endif
        last->queue_next = nullptr;
        std::lock_guard lock(mu_);
        link(first, last);
        // seq_cst: as in push (idle protocol).
        len_.fetch_add(n, std::memory_order_seq_cst);
    }

    // Removes and returns the oldest task; nullptr when empty.
    T* pop() {
        // seq_cst: cheap snapshot; a push that completed before this call is
        // visible here (same load as is_empty()).
        if (len_.load(std::memory_order_seq_cst) == 0) return nullptr;
        std::lock_guard lock(mu_);
        T* t = head_;
        if (t == nullptr) return nullptr;
        head_ = t->queue_next;
        if (head_ == nullptr) tail_ = nullptr;
        t->queue_next = nullptr;
        // relaxed: removal publishes nothing (the lock orders the list itself);
        // as an RMW it still never loses a concurrent seq_cst increment.
        len_.fetch_sub(1, std::memory_order_relaxed);
        return t;
    }

    // Removes up to `max` of the oldest tasks in one lock acquisition and
    // stores them oldest first into out[0..k). Returns k.
    std::size_t pop_batch(T** out, std::size_t max) {
        assert(out != nullptr || max == 0);
        // seq_cst: as in pop.
        if (max == 0 || len_.load(std::memory_order_seq_cst) == 0) return 0;
        std::lock_guard lock(mu_);
        std::size_t k = 0;
        T* t = head_;
        while (k < max && t != nullptr) {
            T* next = t->queue_next;
            t->queue_next = nullptr;
            out[k++] = t;
            t = next;
        }
        head_ = t;
        if (head_ == nullptr) tail_ = nullptr;
        // relaxed: as in pop.
        if (k != 0) len_.fetch_sub(k, std::memory_order_relaxed);
        return k;
    }

    // Removes everything (shutdown). Returns the oldest task, the rest linked
    // through queue_next (nullptr-terminated); n = count.
    T* take_all(std::size_t& n) {
        std::lock_guard lock(mu_);
        T* all = head_;
        head_ = tail_ = nullptr;
        // relaxed: under the lock len_ is exact (every change is made under it).
        n = len_.load(std::memory_order_relaxed);
        // relaxed: as in pop (removal publishes nothing).
        if (n != 0) len_.fetch_sub(n, std::memory_order_relaxed);
        return all;
    }

    // Any thread, lock-free snapshot.
    std::size_t len() const noexcept {
        // seq_cst: a parker's re-check must be in the single total order with
        // pushers' seq_cst increments (idle protocol).
        return len_.load(std::memory_order_seq_cst);
    }

    bool is_empty() const noexcept {
        // seq_cst: as in len().
        return len_.load(std::memory_order_seq_cst) == 0;
    }

private:
    // Caller holds mu_; last->queue_next == nullptr.
    void link(T* first, T* last) noexcept {
        if (tail_ == nullptr) {
            head_ = first;
        } else {
            tail_->queue_next = first;
        }
        tail_ = last;
    }

    // Lock and list: touched together, by whoever holds the lock.
    std::mutex mu_;
    T* head_ = nullptr;
    T* tail_ = nullptr;
    // Read without the lock by every searching / parking worker: on its own
    // cache line so those reads do not bounce the lock's line.
    alignas(64) std::atomic<std::size_t> len_{0};
};

}  // namespace aspen::detail
