// aspen-bench: what every workload file provides and main.cpp runs.
//
// A workload is plain functions that each do the whole job once and return
// the value to check: the aspen version, the oneTBB version (nullptr when TBB
// has no equivalent), a serial baseline (nullptr when there is none) and a
// Boost.Fiber version (nullptr when not compared with Boost.Fiber; it runs
// on a thread of a fiber_pool, see fiber_pool.hpp). main.cpp times them; the
// functions only do the work.
#pragma once

#include <aspen/aspen.hpp>

#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace bench {

// The TBB arenas of one worker count, created once outside the timed region.
struct tbb_arenas {
    // task_arena(workers): the calling thread joins it and workers-1 TBB
    // worker threads help, so exactly `workers` threads run the tasks.
    tbb::task_arena& local;
    // task_arena(workers, 0): all `workers` slots belong to TBB worker
    // threads; the calling thread stays outside (used to submit from outside,
    // like aspen::runtime::spawn from main()).
    tbb::task_arena& remote;
};

class asio_pool;  // asio_pool.hpp: the Asio peer (network workloads)

struct workload {
    std::string name;
    std::string param;  // shown in the table and the CSV; never contains a comma
    std::int64_t expected;
    std::int64_t (*aspen)(aspen::runtime& rt);
    std::int64_t (*tbb)(tbb_arenas& arenas);  // nullptr: no TBB equivalent
    std::int64_t (*serial)();                 // nullptr: no serial baseline
    std::int64_t (*fiber)() = nullptr;        // nullptr: no Boost.Fiber peer
    // Network workloads compare with Asio instead of TBB and report
    // requests/s: `requests` per run.
    std::int64_t (*asio)(asio_pool& pool) = nullptr;
    std::int64_t requests = 0;
    // "inline": the aspen version with every aspen::spawn replaced by an
    // inline co_await (nullptr: none). The same coroutine frames, without
    // the scheduler and on one thread: main.cpp shows what spawning adds
    // per spawned task, and the best ratio to TBB that free spawns with
    // perfect scaling could reach.
    std::int64_t (*aspen_inline)(aspen::runtime& rt) = nullptr;
    // Computes `expected` (serially) when the workload is selected, for
    // values too costly to compute for every listing of the workloads.
    std::int64_t (*expected_fn)() = nullptr;
};

// The registry: one function per workload file.
workload fib_workload();
workload skynet_workload();
workload nqueens_workload();
workload spawn_many_local_workload();
workload spawn_many_remote_workload();
workload yield_many_workload();
workload chained_spawn_workload();
workload sleep_many_workload();
workload tcp_echo_workload();

// A line printed under the table (the last one per key wins): for what a
// workload measures besides its time.
void note(const std::string& key, const std::string& line);
workload ping_pong_workload();
workload mpsc_workload();
workload mutex_workload();
workload par_for_workload();
workload par_reduce_workload();
workload par_sort_workload();

// fib(n) on aspen, spawning fib(n-1) at every level (also used by the
// peak-RSS child process in main.cpp).
std::int64_t aspen_fib(aspen::runtime& rt, int n);

// Resident memory a sleeping task costs: spawns the sleep_many tasks,
// reads the resident set once every timer is armed, waits until all fired.
// Meant for a fresh child process (main.cpp), where no earlier workload
// left freed memory behind for the tasks to reuse. -1 if the count is off.
std::int64_t sleep_many_resident_bytes_per_task(aspen::runtime& rt);

// One line: how long a serial recursion takes pinned to each CPU this
// process may use (host_check.cpp says why). Restores the calling thread's
// CPU mask before it returns.
std::string host_check();

// Note for workload code: await a send into a named variable, then test it.
// With g++ 12.2, `if (co_await tx.send(v)) throw ...;` left a coroutine
// reading uninitialised frame state (valgrind) and hanging or skipping its
// body in a small test program; clang 19 compiled the same code correctly.

// Returns v unchanged, but the compiler cannot see that: keeps a constant
// argument from being folded into a precomputed serial result.
template <class T>
inline T opaque(T v) noexcept {
    asm volatile("" : "+r"(v));
    return v;
}

// A latch a task can await (built on poll_fn and a stored waker): lets a
// workload wait for detached tasks without keeping a join handle each.
class countdown {
public:
    explicit countdown(std::int64_t n) : left_(n) {}

    void arrive() {
        if (left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
        aspen::waker w;
        {
            std::lock_guard<std::mutex> lock(m_);
            done_ = true;
            w = std::move(waiter_);
        }
        w.wake();  // our own reference: *this may already be gone
    }

    auto wait() {
        return aspen::poll_fn([this](aspen::context& cx) -> aspen::poll<void> {
            std::lock_guard<std::mutex> lock(m_);
            if (done_) return aspen::ready();
            waiter_ = cx.waker();
            return aspen::pending;
        });
    }

private:
    std::atomic<std::int64_t> left_;
    std::mutex m_;
    bool done_ = false;
    aspen::waker waiter_;
};

}  // namespace bench
