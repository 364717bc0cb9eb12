// thread_cache: threads kept for reuse, for block_in_place's stand-ins (as
// Tokio keeps its blocking threads). start(job) hands the job to an idle
// thread or starts a new one; the caller waits for it with job.wait(). A
// thread idle for `keep_alive` ends; close() ends the idle ones and joins
// every thread (a thread ended by keep-alive is joined by the next start or
// by close).
//
// Protocol (all under m_): a thread is either running a job, idle (listed
// in idle_, waiting on its slot's cv for `next` or for closed_), or exited
// (exited set, to be joined). start() takes the last idle slot, sets its
// `next` and notifies it; a thread that finds `next` set runs it, outside
// the mutex, then lists itself idle again before it releases job.done (so
// a caller's calls in a row reuse one thread). job.done is the job's last
// touch by the thread, so the caller may free the job once wait() returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <semaphore>
#include <thread>
#include <vector>

namespace aspen::detail {

class thread_cache {
public:
    struct job {
        job(void (*f)(void*), void* a) noexcept : fn(f), arg(a) {}
        void (*fn)(void*);
        void* arg;
        // Blocks until fn(arg) has returned on the thread.
        void wait() noexcept { done.acquire(); }
        std::binary_semaphore done{0};
    };

    explicit thread_cache(std::chrono::nanoseconds keep_alive) noexcept : keep_alive_(keep_alive) {}
    thread_cache(const thread_cache&) = delete;
    thread_cache& operator=(const thread_cache&) = delete;
    ~thread_cache() { close(); }

    // Runs j.fn(j.arg) on a cached or new thread. Throws (std::system_error,
    // std::bad_alloc) when no thread can be had: j is not run then.
    void start(job& j);
    // Takes j back if no thread has begun it yet (its thread goes back to
    // idle, or, a new one, starts idle): true then, and j never runs.
    // False: it has begun; wait() for it.
    bool retract(job& j) noexcept;
    // Ends the idle threads and joins all. No job may run or start meanwhile.
    void close() noexcept;

private:
    struct slot {
        std::thread thread;
        job* next = nullptr;
        std::condition_variable cv;
        bool exited = false;
    };
    void thread_main(slot* s);
    void join_exited();  // under m_

    std::mutex m_;
    std::vector<std::unique_ptr<slot>> slots_;
    std::vector<slot*> idle_;  // capacity >= slots_.size(): listing never allocates
    bool closed_ = false;
    std::chrono::nanoseconds keep_alive_;
};

}  // namespace aspen::detail
