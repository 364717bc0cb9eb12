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
    void idle();
    bool drain_queues() override;

    std::uint32_t global_queue_interval_;
    std::uint32_t event_interval_;
    std::uint32_t ticks_to_event_;  // next non-blocking driver poll
    bool time_polls_;               // config::poll_time_histogram
    std::deque<task_header*> local_;  // driver thread only
    injector<task_header> remote_;
    std::atomic<bool> driving_{false};
    std::atomic<bool> stopping_{false};
    std::uint64_t tick_ = 0;
    std::atomic<std::uint64_t> remote_spawns_{0};
    worker_counters counters_;  // written by the driving thread only
    std::mutex shutdown_mutex_;
    bool shut_down_ = false;
};

}  // namespace aspen::detail
