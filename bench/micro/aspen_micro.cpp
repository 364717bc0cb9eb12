// aspen-micro: what one operation costs, with Google Benchmark. aspen-bench
// compares whole workloads with their peers; this measures the primitives
// those workloads are made of, one at a time, on one thread. Each benchmark
// runs its loop inside a task, so it sees exactly what a task's code pays.
// A runtime with one worker runs that task on the worker thread, so those
// benchmarks measure real time (the calling thread only waits).
//
//   build/release/bench/aspen-micro [--benchmark_filter=Spawn] [...]
#include <aspen/aspen.hpp>
#include <aspen/detail/frame_pool.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>

namespace {

aspen::task<std::int64_t> leaf(std::int64_t x) { co_return x; }

// Runs body(state) as a task on a current_thread_runtime (the calling
// thread) or on a runtime with one worker.
template <class Body>
void on_current_thread(benchmark::State& state, Body body) {
    aspen::current_thread_runtime rt;
    rt.block_on(body(state));
}
template <class Body>
void on_one_worker(benchmark::State& state, Body body) {
    aspen::config cfg;
    cfg.workers = 1;
    aspen::runtime rt(cfg);
    rt.block_on(body(state));
}

// A task awaits a child task inline (symmetric transfer): the child's frame
// comes from the thread's frame pool and goes back there.
aspen::task<void> inline_await(benchmark::State& state) {
    std::int64_t sum = 0;
    for (auto _ : state) sum += co_await leaf(1);
    benchmark::DoNotOptimize(sum);
}

// aspen::spawn of a trivial task, then co_await of its handle: the child is
// taken back from the worker's next slot and run by the awaiting task.
aspen::task<void> spawn_await(benchmark::State& state) {
    std::int64_t sum = 0;
    for (auto _ : state) sum += co_await aspen::spawn(leaf(1));
    benchmark::DoNotOptimize(sum);
}

// yield_now: the task goes behind the ready work (none here) and is polled
// again.
aspen::task<void> yield_round_trip(benchmark::State& state) {
    for (auto _ : state) co_await aspen::yield_now();
}

// One message through a bounded channel and back out, in one task.
aspen::task<void> channel_send_recv(benchmark::State& state) {
    auto [tx, rx] = aspen::mpsc_channel<std::int64_t>(64);
    std::int64_t sum = 0;
    for (auto _ : state) {
        co_await tx.send(1);
        std::optional<std::int64_t> v = co_await rx.recv();
        sum += *v;
    }
    benchmark::DoNotOptimize(sum);
}

// An uncontended async mutex: lock, then unlock when the guard goes.
aspen::task<void> mutex_lock_unlock(benchmark::State& state) {
    aspen::mutex m;
    for (auto _ : state) {
        aspen::mutex_guard g = co_await m.lock();
        benchmark::DoNotOptimize(&g);
    }
}

void BM_InlineAwait(benchmark::State& state) { on_current_thread(state, inline_await); }
void BM_SpawnAwait_CurrentThread(benchmark::State& state) { on_current_thread(state, spawn_await); }
void BM_SpawnAwait_OneWorker(benchmark::State& state) { on_one_worker(state, spawn_await); }
void BM_YieldNow_CurrentThread(benchmark::State& state) { on_current_thread(state, yield_round_trip); }
void BM_YieldNow_OneWorker(benchmark::State& state) { on_one_worker(state, yield_round_trip); }
void BM_ChannelSendRecv(benchmark::State& state) { on_current_thread(state, channel_send_recv); }
void BM_MutexLockUnlock(benchmark::State& state) { on_current_thread(state, mutex_lock_unlock); }

// The frame pool alone: what a coroutine frame's allocation and free cost
// (a 200-byte frame: the pool's hit path after the first iteration).
void BM_FramePoolAllocFree(benchmark::State& state) {
    constexpr std::size_t frame = 200;
    for (auto _ : state) {
        void* p = aspen::detail::allocate_frame(frame, 0, 1);
        benchmark::DoNotOptimize(p);
        aspen::detail::deallocate_frame(p, aspen::detail::block_size_of(frame, 0, 1));
    }
}

BENCHMARK(BM_FramePoolAllocFree);
BENCHMARK(BM_InlineAwait);
BENCHMARK(BM_SpawnAwait_CurrentThread);
BENCHMARK(BM_SpawnAwait_OneWorker)->UseRealTime();
BENCHMARK(BM_YieldNow_CurrentThread);
BENCHMARK(BM_YieldNow_OneWorker)->UseRealTime();
BENCHMARK(BM_ChannelSendRecv);
BENCHMARK(BM_MutexLockUnlock);

}  // namespace

BENCHMARK_MAIN();
