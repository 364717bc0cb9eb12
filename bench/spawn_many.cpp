// spawn_many_local / spawn_many_remote: 1,000,000 trivial tasks (each bumps
// a shared counter), spawned either by one task inside the runtime or by
// main() from outside it, then waited for all. Measures the cost of a spawn
// and a completion, not of any work. Like TBB's task_group (and Tokio's
// benchmark of the same name) nothing keeps a handle per task: the tasks are
// detached and count down a latch.
#include "bench.hpp"

#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace bench {
namespace {

constexpr std::int64_t tasks = 1'000'000;

struct spawn_state {
    explicit spawn_state(std::int64_t n) : left(n) {}
    std::atomic<std::int64_t> counter{0};
    countdown left;
};

aspen::task<void> bump(spawn_state& s) {
    s.counter.fetch_add(1, std::memory_order_relaxed);
    s.left.arrive();
    co_return;
}

aspen::task<std::int64_t> wait_all(spawn_state& s) {
    co_await s.left.wait();
    co_return s.counter.load(std::memory_order_relaxed);
}

// ---- local: spawned from inside a task -------------------------------------

aspen::task<std::int64_t> spawn_local(spawn_state& s, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) aspen::spawn(bump(s)).detach();
    co_return co_await wait_all(s);
}

std::int64_t run_aspen_local(aspen::runtime& rt) {
    spawn_state s(tasks);
    return rt.block_on(spawn_local(s, tasks));
}

std::int64_t run_tbb_local(tbb_arenas& arenas) {
    return arenas.local.execute([] {
        std::atomic<std::int64_t> counter{0};
        tbb::task_group tg;
        const std::int64_t n = opaque(tasks);
        for (std::int64_t i = 0; i < n; ++i) tg.run([&counter] { counter.fetch_add(1, std::memory_order_relaxed); });
        tg.wait();
        return counter.load(std::memory_order_relaxed);
    });
}

// ---- remote: spawned by main() from outside the runtime --------------------

std::int64_t run_aspen_remote(aspen::runtime& rt) {
    spawn_state s(tasks);
    for (std::int64_t i = 0; i < tasks; ++i) rt.spawn(bump(s)).detach();
    return rt.block_on(wait_all(s));
}

// TBB equivalent: main() stays outside the arena and hands each task over
// with task_arena::enqueue (TBB's shared FIFO, the counterpart of aspen's
// injector queue), then blocks until the last task signals completion. The
// arena is task_arena(workers, 0), so exactly `workers` TBB worker threads
// run the tasks while main() does not, as with aspen's block_on.
// (task_group::run from main() would instead run the tasks in main()'s own
// implicit arena with TBB's default thread count.)
struct remote_done {
    std::atomic<std::int64_t> counter{0};
    std::int64_t target = 0;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
};

std::int64_t run_tbb_remote(tbb_arenas& arenas) {
    remote_done state;
    state.target = opaque(tasks);
    for (std::int64_t i = 0; i < state.target; ++i) {
        arenas.remote.enqueue([&state] {
            if (state.counter.fetch_add(1, std::memory_order_acq_rel) + 1 != state.target) return;
            // Notify under the lock: main() cannot return (and destroy state)
            // before this thread is done with it.
            std::lock_guard<std::mutex> lock(state.m);
            state.done = true;
            state.cv.notify_one();
        });
    }
    std::unique_lock<std::mutex> lock(state.m);
    state.cv.wait(lock, [&state] { return state.done; });
    return state.counter.load(std::memory_order_relaxed);
}

}  // namespace

workload spawn_many_local_workload() {
    return {"spawn_many_local", std::to_string(tasks), tasks, &run_aspen_local, &run_tbb_local, nullptr};
}

workload spawn_many_remote_workload() {
    return {"spawn_many_remote", std::to_string(tasks), tasks, &run_aspen_remote, &run_tbb_remote, nullptr};
}

}  // namespace bench
