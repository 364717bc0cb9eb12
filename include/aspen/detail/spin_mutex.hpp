// spin_mutex: the lock that guards the short critical sections of the sync
// primitives (channel, mutex, semaphore, notify, ...). A test-and-test-and-
// set spinlock whose waiters give the CPU away (sched_yield) once a short
// spin has not been enough.
//
// Why not std::mutex: the critical sections are a few dozen instructions
// (a queue push or pop, a waker moved out; wakers are woken after unlock).
// Uncontended, std::mutex costs two atomic RMWs (lock and unlock) and a
// library call; this lock costs one RMW and a plain release store. Under
// contention std::mutex sleeps in the kernel at once, and the wake-up is a
// context switch (microseconds) where the holder needed ~100 ns. Measured on
// the 2-core machine, 4 producers and a consumer on one mpsc channel
// (bench `mpsc`, 10M messages): 1 worker 567 -> 437 ms; 2 workers
// 1,300-1,480 -> 1,100-1,300 ms, and 42,000-96,000 -> ~37,000 voluntary
// context switches per three runs (what is left is workers parking).
// A futex-backed three-state lock (spin, then sleep) was tried too: its
// unlock must be an RMW to learn about sleepers, and it measured no better
// than std::mutex.
//
// Protocol: `held` is the whole state.
//   lock:   exchange(true); if it returned false we own the lock. Otherwise
//           read `held` (relaxed, no cache-line ping-pong) until it reads
//           false, pausing; after spin_limit reads, sched_yield() between
//           reads; then exchange again.
//   unlock: store(false).
// Mutual exclusion: only an exchange that reads false takes the lock, and
// the exchanges on one word are totally ordered. Progress: a holder never
// blocks or waits while holding (no wake: wakers are moved out and woken
// after unlock; no user code but the copy, move and destruction of the
// values a channel keeps, and a buffer's allocation), so it releases the
// lock as soon as it runs; yielding lets it run when the machine is
// oversubscribed (more workers than cores), so waiting costs CPU time there
// but never a deadlock.
#pragma once

#include <sched.h>

#include <atomic>

namespace aspen::detail {

class spin_mutex {
public:
    spin_mutex() noexcept = default;
    spin_mutex(const spin_mutex&) = delete;
    spin_mutex& operator=(const spin_mutex&) = delete;

    void lock() noexcept {
        // acquire: the previous holder's writes (its unlock is a release).
        while (held_.exchange(true, std::memory_order_acquire)) wait_until_free();
    }

    bool try_lock() noexcept {
        // relaxed pre-check: do not write (and steal the line) when held.
        // acquire on the exchange: as in lock().
        return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
    }

    void unlock() noexcept {
        // release: our critical section happens-before the next owner's.
        held_.store(false, std::memory_order_release);
    }

private:
    static constexpr int spin_limit = 128;

    static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }

    void wait_until_free() noexcept {
        // relaxed: only a hint for when to retry; the exchange decides.
        for (int spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
            if (spins < spin_limit)
                pause();
            else
                sched_yield();
        }
    }

    std::atomic<bool> held_{false};
};

}  // namespace aspen::detail
