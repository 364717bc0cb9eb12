// spawn_many_local / spawn_many_remote: 1,000,000 trivial tasks (each bumps
// a shared counter), spawned either by one task inside the runtime or by
// main() from outside it, then all joined. Measures the cost of a spawn and
// a join, not of any work.
#include "bench.hpp"

#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace bench {
namespace {

constexpr std::int64_t tasks = 1'000'000;

aspen::task<void> bump(std::atomic<std::int64_t>& counter) {
    counter.fetch_add(1, std::memory_order_relaxed);
    co_return;
}

aspen::task<void> join_all(std::vector<aspen::join_handle<void>>& handles) {
    for (auto& h : handles) co_await h;
}

// ---- local: spawned from inside a task -------------------------------------

aspen::task<std::int64_t> spawn_local(std::int64_t n) {
    std::atomic<std::int64_t> counter{0};
    std::vector<aspen::join_handle<void>> handles;
    handles.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) handles.push_back(aspen::spawn(bump(counter)));
    for (auto& h : handles) co_await h;
    co_return counter.load(std::memory_order_relaxed);
}

std::int64_t run_aspen_local(aspen::runtime& rt) { return rt.block_on(spawn_local(tasks)); }

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
    std::atomic<std::int64_t> counter{0};
    std::vector<aspen::join_handle<void>> handles;
    handles.reserve(static_cast<std::size_t>(tasks));
    for (std::int64_t i = 0; i < tasks; ++i) handles.push_back(rt.spawn(bump(counter)));
    rt.block_on(join_all(handles));
    return counter.load(std::memory_order_relaxed);
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
