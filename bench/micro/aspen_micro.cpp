// aspen-micro: what one operation costs, with Google Benchmark. aspen-bench
// compares whole workloads with their peers; this measures the primitives
// those workloads are made of, one at a time. Most benchmarks run their loop
// inside a task, so they see exactly what a task's code pays; the frame
// pool's runs on the calling thread, and the wake from another thread has
// the calling thread ring a task on a worker. A runtime with one worker runs
// its task on the worker thread, so those benchmarks measure real time.
//
//   build/release/bench/aspen-micro [--benchmark_filter=Spawn] [...]
#include <aspen/aspen.hpp>
#include <aspen/detail/frame_pool.hpp>

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <mutex>
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
aspen::config one_worker() {
    aspen::config cfg;
    cfg.workers = 1;
    return cfg;
}
template <class Body>
void on_one_worker(benchmark::State& state, Body body) {
    aspen::runtime rt(one_worker());
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

// block_in_place with an empty function: the hand-off to a stand-in
// thread and back (kept stand-ins: a wake-up each way, no thread start).
aspen::task<void> block_in_place_round_trip(benchmark::State& state) {
    for (auto _ : state) aspen::block_in_place([] {});
    co_return;
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

// A foreign thread (the benchmark's own) wakes a task that waits on a leaf,
// then waits until the task has run: one round trip of a wake from outside
// the runtime, as an embedding program or an I/O thread makes it. The one
// worker has nothing else to do, so it parks between wakes and each wake
// includes unparking it.
struct doorbell {
    std::mutex m;
    bool rung = false;
    bool closed = false;
    aspen::waker waiter;
    std::atomic<std::int64_t> answered{0};

    // From the benchmark thread: ring once, wait for the answer.
    void ring_and_wait(std::int64_t n) {
        set_and_wake(rung);
        // acquire: the task's answer (nothing else is read, but it keeps
        // the round trip ordered).
        while (answered.load(std::memory_order_acquire) != n) {
        }
    }
    void close() { set_and_wake(closed); }
    // The task's side: ready once rung (or closed); the waker is stored
    // under the same lock, so a ring between the check and the store is
    // never lost.
    aspen::poll<bool> poll(aspen::context& cx) {
        std::lock_guard lock(m);
        if (closed) return aspen::ready(false);
        if (rung) {
            rung = false;
            return aspen::ready(true);
        }
        waiter = cx.waker();
        return aspen::pending;
    }

private:
    // Sets the flag under the lock and wakes the waiting task, if any,
    // after it.
    void set_and_wake(bool& flag) {
        aspen::waker w;
        {
            std::lock_guard lock(m);
            flag = true;
            w = std::move(waiter);
        }
        w.wake();
    }
};

aspen::task<void> answer_doorbell(doorbell& d) {
    auto ring = [&d](aspen::context& cx) { return d.poll(cx); };
    for (;;) {
        bool rung = co_await aspen::poll_fn(ring);
        if (!rung) break;
        d.answered.fetch_add(1, std::memory_order_release);  // release: see ring_and_wait
    }
}

void BM_WakeFromAnotherThread_OneWorker(benchmark::State& state) {
    aspen::runtime rt(one_worker());
    doorbell d;
    aspen::join_handle<void> h = rt.spawn(answer_doorbell(d));
    std::int64_t n = 0;
    for (auto _ : state) d.ring_and_wait(++n);
    d.close();
    rt.block_on([](aspen::join_handle<void> done) -> aspen::task<void> { co_await done; }(std::move(h)));
}

void BM_InlineAwait(benchmark::State& state) { on_current_thread(state, inline_await); }
void BM_SpawnAwait_CurrentThread(benchmark::State& state) { on_current_thread(state, spawn_await); }
void BM_SpawnAwait_OneWorker(benchmark::State& state) { on_one_worker(state, spawn_await); }
void BM_YieldNow_CurrentThread(benchmark::State& state) { on_current_thread(state, yield_round_trip); }
void BM_YieldNow_OneWorker(benchmark::State& state) { on_one_worker(state, yield_round_trip); }
void BM_ChannelSendRecv(benchmark::State& state) { on_current_thread(state, channel_send_recv); }
void BM_BlockInPlace_OneWorker(benchmark::State& state) { on_one_worker(state, block_in_place_round_trip); }
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
BENCHMARK(BM_WakeFromAnotherThread_OneWorker)->UseRealTime();
BENCHMARK(BM_BlockInPlace_OneWorker)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
