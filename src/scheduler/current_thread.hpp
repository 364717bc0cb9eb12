// The single-threaded executor behind current_thread_runtime: tasks run on
// the thread inside block_on, in FIFO order (so yield_now goes behind all
// ready work by construction). Wakes from other threads go through a locked
// injector and unpark the driving thread, which sleeps in the I/O driver
// (so it also serves timers and sockets; busy, it polls the driver every
// event_interval ticks).
#pragma once

#include "scheduler/injector.hpp"
#include "scheduler/multi_thread.hpp"
#include "scheduler/scheduler.hpp"

#include <atomic>
#include <deque>
#include <mutex>

namespace aspen::detail {

// The block_on calls waiting while another thread drives the runtime
// (as in Tokio, a current-thread runtime is driven by one block_on at a
// time; the others' tasks run in that drive meanwhile). Each waiter sleeps
// on a word of its own, on its stack, until its task completes (the task's
// join waker sets root_done) or a drive ends (drive_ended sets drive_over
// for every waiter listed), then tries to drive itself.
// Protocol: a waiter lists itself, then reads `driving` (seq_cst); a drive
// ends by storing false (seq_cst), then waking the list under the lock.
// Either the waiter reads false and does not sleep, or its listing came
// first and the drive's end finds it. A waiter leaves the list under the
// lock before it returns, and takes its join waker back, or waits for the
// completer's wake, so nothing writes to its word once it has gone.
class drive_handoff {
public:
    struct waiter {
        std::atomic<std::uint32_t> word{0};  // root_done | drive_over
        waiter* next = nullptr;
    };
    static constexpr std::uint32_t root_done = 1, drive_over = 2;

    // Sleeps until root completes (true) or a drive ends (false: the caller
    // tries to drive). `driving` is the scheduler's drive flag.
    bool wait(task_header* root, const std::atomic<bool>& driving);
    // A drive ended (after `driving` was stored false): wakes every waiter.
    void drive_ended() noexcept;

private:
    void list(waiter& w);
    void unlist(waiter& w) noexcept;

    std::mutex m_;
    waiter* head_ = nullptr;  // under m_
};

class current_thread_scheduler final : public scheduler {
public:
    explicit current_thread_scheduler(const config& cfg);
    ~current_thread_scheduler() override;

    void schedule(task_header* t, schedule_kind kind) override;
    void run_until_complete(task_header* t) override;
    void shutdown() override;
    runtime_metrics metrics() const override;
    task_header* take_local(task_header* want) noexcept override;

private:
    bool on_driver() const noexcept;
    task_header* next_task();
    // True once this thread drives; false if root completed while another
    // thread's drive ran it.
    bool take_the_drive(task_header* root);
    void idle();
    bool drain_queues() override;

    std::uint32_t global_queue_interval_;
    std::uint32_t event_interval_;
    std::uint32_t ticks_to_event_;  // next non-blocking driver poll
    bool time_polls_;               // config::poll_time_histogram
    std::deque<task_header*> local_;  // driver thread only
    // local_.size() for metrics(), which any thread may call: written by the
    // driver after each change of local_ (note_local_depth).
    std::atomic<std::uint64_t> local_depth_{0};
    void note_local_depth() noexcept {
        // relaxed: a statistic, single writer; publishes nothing.
        local_depth_.store(local_.size(), std::memory_order_relaxed);
    }
    injector<task_header> remote_;
    std::atomic<bool> driving_{false};
    drive_handoff handoff_;
    std::atomic<bool> stopping_{false};
    std::uint64_t tick_ = 0;
    std::atomic<std::uint64_t> remote_spawns_{0};
    worker_counters counters_;  // written by the driving thread only
    std::mutex shutdown_mutex_;
    bool shut_down_ = false;
};

}  // namespace aspen::detail
