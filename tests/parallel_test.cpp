// aspen/parallel.hpp: parallel_for, parallel_for_chunks, parallel_for_each,
// parallel_reduce, parallel_transform_reduce, parallel_invoke, parallel_sort
// on every runtime kind.
#include "runtime_kinds.hpp"

#include <aspen/parallel.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using aspen_test::run_on;

class Parallel : public ::testing::TestWithParam<int> {
protected:
    int kind() const { return GetParam(); }
    std::size_t workers() const { return kind() == 0 ? 1 : static_cast<std::size_t>(kind()); }
};

// Every index of [first, last) exactly once, none outside.
aspen::task<bool> each_index_once(long first, long last, std::size_t grain) {
    const long n = std::max(0L, last - first);
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n) + 2);
    // relaxed: counted here, read after the await, which orders them.
    co_await aspen::parallel_for(
        first, last,
        [&](long i) {
            const long slot = i - first + 1;  // 0 and n + 1 catch strays
            hits[static_cast<std::size_t>(std::clamp(slot, 0L, n + 1))].fetch_add(1, std::memory_order_relaxed);
        },
        grain);
    for (std::size_t s = 0; s < hits.size(); ++s) {
        const int want = (s == 0 || s == hits.size() - 1) ? 0 : 1;
        if (hits[s].load(std::memory_order_relaxed) != want) co_return false;
    }
    co_return true;
}

TEST_P(Parallel, ForCallsEveryIndexExactlyOnce) {
    for (long n : {0L, 1L, 2L, 3L, 15L, 16L, 17L, 1000L, 100003L})
        for (std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}})
            EXPECT_TRUE(run_on(kind(), each_index_once(-500, n - 500, grain), "parallel_for")) << n << " " << grain;
    EXPECT_TRUE(run_on(kind(), each_index_once(10, 3, 0), "reversed range"));  // nothing to do
}

aspen::task<std::vector<std::pair<unsigned, unsigned>>> chunks_of(unsigned first, unsigned last, std::size_t grain) {
    std::mutex m;
    std::vector<std::pair<unsigned, unsigned>> seen;
    co_await aspen::parallel_for_chunks(
        first, last,
        [&](unsigned lo, unsigned hi) {
            std::lock_guard lock(m);
            seen.emplace_back(lo, hi);
        },
        grain);
    std::sort(seen.begin(), seen.end());
    co_return seen;
}

TEST_P(Parallel, ChunksTileTheRangeWithinTheGrain) {
    auto seen = run_on(kind(), chunks_of(5, 1005, 64), "chunks");
    ASSERT_EQ(seen.size(), 16u);  // ceil(1000 / 64)
    unsigned at = 5;
    for (auto [lo, hi] : seen) {
        EXPECT_EQ(lo, at);
        EXPECT_GT(hi, lo);
        EXPECT_LE(hi - lo, 64u);
        EXPECT_GE(hi - lo, 62u);  // sizes differ by at most one: 1000 / 16 = 62.5
        at = hi;
    }
    EXPECT_EQ(at, 1005u);

    // grain 0: 16 chunks a worker, one on a one-worker runtime.
    auto automatic = run_on(kind(), chunks_of(0, 100000, 0), "automatic chunks");
    EXPECT_EQ(automatic.size(), workers() == 1 ? 1u : workers() * 16);
    // Never more chunks than indices.
    EXPECT_EQ(run_on(kind(), chunks_of(0, 3, 0), "tiny").size(), workers() == 1 ? 1u : 3u);
}

aspen::task<std::size_t> report_workers() { co_return aspen::current_worker_count(); }

TEST_P(Parallel, CurrentWorkerCount) {
    EXPECT_EQ(run_on(kind(), report_workers(), "worker count"), workers());
}

TEST(ParallelOutside, CurrentWorkerCountOutsideARuntimeThrows) {
    EXPECT_THROW((void)aspen::current_worker_count(), std::logic_error);
}

// Chunk k waits until every chunk has started: the await can only end if
// every chunk runs at the same moment on its own worker, so each piece must
// be stealable while its neighbour's chunk runs (the watchdog fails a hang).
aspen::task<std::size_t> all_chunks_at_once(std::size_t n) {
    std::atomic<std::size_t> started{0};
    std::mutex m;
    std::vector<std::thread::id> threads;
    co_await aspen::parallel_for(
        std::size_t{0}, n,
        [&](std::size_t) {
            {
                std::lock_guard lock(m);
                threads.push_back(std::this_thread::get_id());
            }
            // acq_rel / acquire: only a count; nothing else is handed over.
            started.fetch_add(1, std::memory_order_acq_rel);
            while (started.load(std::memory_order_acquire) < n) std::this_thread::yield();
        },
        1);
    std::sort(threads.begin(), threads.end());
    co_return static_cast<std::size_t>(std::unique(threads.begin(), threads.end()) - threads.begin());
}

TEST_P(Parallel, ChunksRunOnEveryWorkerAtOnce) {
    if (workers() < 2) GTEST_SKIP() << "needs two workers";
    EXPECT_EQ(run_on(kind(), all_chunks_at_once(workers()), "every worker at once"), workers());
}

aspen::task<std::vector<int>> add_one_each(std::vector<int> v) {
    co_await aspen::parallel_for_each(v.begin(), v.end(), [](int& x) { x += 1; });
    co_return v;
}

TEST_P(Parallel, ForEachReachesEveryElement) {
    std::vector<int> v(12345);
    std::iota(v.begin(), v.end(), 0);
    auto out = run_on(kind(), add_one_each(v), "for_each");
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(out[i], v[i] + 1);
}

aspen::task<std::int64_t> sum_to(std::int64_t n, std::size_t grain) {
    co_return co_await aspen::parallel_reduce(
        std::int64_t{0}, n, std::int64_t{0},
        [](std::int64_t lo, std::int64_t hi) {
            std::int64_t s = 0;
            for (std::int64_t i = lo; i < hi; ++i) s += i;
            return s;
        },
        std::plus<>(), grain);
}

TEST_P(Parallel, ReduceSumsExactly) {
    for (std::int64_t n : {0, 1, 2, 17, 1000, 1000003})
        for (std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{999}}) {
            if (grain == 1 && n > 1000) continue;  // a million one-index chunks: slow under TSan
            EXPECT_EQ(run_on(kind(), sum_to(n, grain), "reduce"), n * (n - 1) / 2) << n << " " << grain;
        }
}

// Concatenation is associative but not commutative: the result shows the
// order the chunks were combined in.
aspen::task<std::vector<int>> concatenated(int n, std::size_t grain) {
    co_return co_await aspen::parallel_reduce(
        0, n, std::vector<int>{},
        [](int lo, int hi) {
            std::vector<int> part;
            for (int i = lo; i < hi; ++i) part.push_back(i);
            return part;
        },
        [](std::vector<int> a, std::vector<int> b) {
            a.insert(a.end(), b.begin(), b.end());
            return a;
        },
        grain);
}

TEST_P(Parallel, ReduceCombinesInIndexOrder) {
    for (std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{100}}) {
        auto v = run_on(kind(), concatenated(1000, grain), "ordered reduce");
        std::vector<int> want(1000);
        std::iota(want.begin(), want.end(), 0);
        EXPECT_EQ(v, want) << grain;
    }
}

aspen::task<double> float_sum(const std::vector<double>* x) {
    co_return co_await aspen::parallel_transform_reduce(
        x->begin(), x->end(), 0.0, std::plus<>(), [](double d) { return d * 1.0000001; }, 1000);
}

TEST(ParallelReduce, FloatingPointResultIsTheSameOnEveryRuntimeKind) {
    std::vector<double> x(200000);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> d(-1e6, 1e6);
    for (double& v : x) v = d(rng);
    const double one = run_on(0, float_sum(&x), "current_thread");
    for (int kind : {1, 2, 8, 16}) {
        const double other = run_on(kind, float_sum(&x), "float reduce");
        EXPECT_EQ(std::memcmp(&one, &other, sizeof one), 0) << kind << ": " << one << " vs " << other;
    }
}

TEST_P(Parallel, TransformReduceMatchesSerial) {
    std::vector<int> v(50001);
    std::iota(v.begin(), v.end(), -25000);
    auto sum_squares = [&]() -> aspen::task<long long> {
        co_return co_await aspen::parallel_transform_reduce(v.begin(), v.end(), 7LL, std::plus<>(),
                                                            [](int x) { return 1LL * x * x; });
    };
    long long want = 7;
    for (int x : v) want += 1LL * x * x;
    EXPECT_EQ(run_on(kind(), sum_squares(), "transform_reduce"), want);
}

aspen::task<int> invoke_three() {
    std::atomic<int> mask{0};
    // relaxed: the await orders these before the load below.
    co_await aspen::parallel_invoke([&] { mask.fetch_or(1, std::memory_order_relaxed); },
                                    [&] { mask.fetch_or(2, std::memory_order_relaxed); },
                                    [&] { mask.fetch_or(4, std::memory_order_relaxed); });
    co_await aspen::parallel_invoke([&] { mask.fetch_or(8, std::memory_order_relaxed); });
    co_return mask.load(std::memory_order_relaxed);
}

TEST_P(Parallel, InvokeRunsEveryFunction) { EXPECT_EQ(run_on(kind(), invoke_three(), "invoke"), 15); }

// ---- errors ----------------------------------------------------------------

struct chunk_failed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Chunk `bad` (of n, grain 1) throws; returns the calls made and whether the
// await rethrew that exception with no body still running.
aspen::task<std::pair<int, bool>> failing_loop(int n, int bad) {
    std::atomic<int> calls{0}, running{0};
    bool rethrown = false;
    try {
        co_await aspen::parallel_for(
            0, n,
            [&](int i) {
                // relaxed: counts, read after the await has ordered them.
                running.fetch_add(1, std::memory_order_relaxed);
                calls.fetch_add(1, std::memory_order_relaxed);
                struct leave {
                    std::atomic<int>& r;
                    ~leave() { r.fetch_sub(1, std::memory_order_relaxed); }
                } l{running};
                if (i == bad) throw chunk_failed("chunk " + std::to_string(i));
            },
            1);
    } catch (const chunk_failed& e) {
        rethrown = std::string(e.what()) == "chunk " + std::to_string(bad) &&
                   running.load(std::memory_order_relaxed) == 0;
    }
    co_return std::pair{calls.load(std::memory_order_relaxed), rethrown};
}

TEST_P(Parallel, ABodysExceptionIsRethrownAfterTheRunningChunksEnd) {
    for (int bad : {0, 1, 63}) {
        auto [calls, rethrown] = run_on(kind(), failing_loop(64, bad), "failing loop");
        EXPECT_TRUE(rethrown) << bad;
        EXPECT_GE(calls, 1);
        EXPECT_LE(calls, 64);
    }
    // One worker: the awaiting task runs chunk 0 before any piece, so when
    // chunk 0 throws, every other chunk is skipped.
    if (workers() == 1) {
        EXPECT_EQ(run_on(kind(), failing_loop(64, 0), "skip after failure").first, 1);
    }
}

aspen::task<bool> every_chunk_throws() {
    try {
        co_await aspen::parallel_for(0, 100, [](int i) { throw chunk_failed(std::to_string(i)); }, 1);
    } catch (const chunk_failed&) {
        co_return true;
    }
    co_return false;
}

TEST_P(Parallel, ManyFailuresGiveOneException) { EXPECT_TRUE(run_on(kind(), every_chunk_throws(), "all throw")); }

// ---- abort and shutdown ------------------------------------------------------

// Chunk 0 (the awaiting task's) waits for `release_first`, every other for
// `release_rest`; each counts its start.
aspen::task<void> held_loop(int n, std::atomic<int>* started, std::atomic<bool>* release_first,
                            std::atomic<bool>* release_rest) {
    co_await aspen::parallel_for(
        0, n,
        [=](int i) {
            // acq_rel / acquire: counts and flags only.
            started->fetch_add(1, std::memory_order_acq_rel);
            std::atomic<bool>* gate = i == 0 ? release_first : release_rest;
            while (!gate->load(std::memory_order_acquire)) std::this_thread::yield();
        },
        1);
}

void wait_for(const std::atomic<int>& count, int at_least) {
    aspen_test::within(std::chrono::seconds(60), "chunks starting", [&] {
        // acquire: see held_loop.
        while (count.load(std::memory_order_acquire) < at_least) std::this_thread::yield();
    });
}

TEST(ParallelAbort, AbortingTheCallerSkipsTheChunksNotStarted) {
    std::atomic<int> started{0};
    std::atomic<bool> release_first{false}, release_rest{false};
    {
        aspen::runtime rt(aspen_test::workers(2));
        auto h = rt.spawn(held_loop(64, &started, &release_first, &release_rest));
        wait_for(started, 2);  // chunk 0 and one stolen piece's chunk run
        h.abort();             // the caller is running chunk 0: it goes at its wait
        release_first.store(true, std::memory_order_release);
        aspen_test::within(std::chrono::seconds(60), "the aborted caller",
                           [&] { rt.block_on(aspen_test::abort_and_join(h)); });
        // The caller is gone, so the pieces have been asked to stop.
        release_rest.store(true, std::memory_order_release);
        aspen_test::within(std::chrono::seconds(60), "shutdown", [&] { rt.shutdown(); });
    }
    EXPECT_EQ(started.load(), 2);  // everything not started was skipped
}

aspen::task<void> slow_loop(std::atomic<int>* calls) {
    co_await aspen::parallel_for(
        0, 10000,
        [calls](int) {
            // relaxed: a count read after shutdown joined every worker.
            calls->fetch_add(1, std::memory_order_relaxed);
            std::this_thread::yield();
        },
        1);
}

TEST(ParallelAbort, ShutdownInTheMiddleLosesNothingAndLeaksNothing) {
    for (std::size_t w : {1, 2, 8}) {
        std::atomic<int> calls{0};
        {
            aspen::runtime rt(aspen_test::workers(w));
            for (int i = 0; i < 4; ++i) rt.spawn(slow_loop(&calls)).detach();
            while (calls.load(std::memory_order_relaxed) < 100) std::this_thread::yield();
        }  // LSan (asan preset) reports a block or a frame left behind
        EXPECT_LE(calls.load(), 40000);
    }
}

// ---- many at once --------------------------------------------------------------

aspen::task<bool> concurrent_reductions(int loops) {
    aspen::join_set<std::int64_t> set;
    for (int i = 0; i < loops; ++i) set.spawn(sum_to(20000 + i, 0));
    std::int64_t total = 0;
    while (auto v = co_await set.next()) total += *v;
    std::int64_t want = 0;
    for (std::int64_t i = 0; i < loops; ++i) want += (20000 + i) * (19999 + i) / 2;
    co_return total == want;
}

TEST_P(Parallel, ManyCallsAtOnce) { EXPECT_TRUE(run_on(kind(), concurrent_reductions(32), "concurrent reductions")); }

// ---- async bodies -------------------------------------------------------------------

aspen::task<bool> nested_loops(int rows, int cols) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(rows * cols));
    co_await aspen::parallel_for(0, rows, [&](int r) -> aspen::task<void> {
        co_await aspen::yield_now();
        co_await aspen::parallel_for(0, cols, [&, r](int c) {
            // relaxed: read after the outer await, which orders it.
            hits[static_cast<std::size_t>(r * cols + c)].fetch_add(1, std::memory_order_relaxed);
        });
    });
    co_return std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h.load() == 1; });
}

TEST_P(Parallel, AsyncBodiesNestParallelLoops) {
    EXPECT_TRUE(run_on(kind(), nested_loops(64, 100), "nested loops"));
}

// Every chunk waits until all have arrived: this ends on one worker only
// if a waiting chunk gives its worker back (a plain body would hang).
aspen::task<int> chunks_meet(int n) {
    aspen::latch all(static_cast<std::size_t>(n));
    std::atomic<int> met{0};
    co_await aspen::parallel_for(
        0, n,
        [&](int) -> aspen::task<void> {
            all.count_down();
            co_await all.wait();
            // relaxed: read after the await.
            met.fetch_add(1, std::memory_order_relaxed);
        },
        1);
    co_return met.load(std::memory_order_relaxed);
}

TEST_P(Parallel, AWaitingAsyncChunkGivesItsWorkerBack) {
    EXPECT_EQ(run_on(kind(), chunks_meet(40), "chunks meeting"), 40);
}

aspen::task<int> invoke_mixed() {
    std::atomic<int> mask{0};
    // relaxed: the await orders these before the load below.
    co_await aspen::parallel_invoke([&] { mask.fetch_or(1, std::memory_order_relaxed); },
                                    [&]() -> aspen::task<void> {
                                        co_await aspen::yield_now();
                                        mask.fetch_or(2, std::memory_order_relaxed);
                                    },
                                    [&]() -> aspen::task<void> {
                                        mask.fetch_or(4, std::memory_order_relaxed);
                                        co_return;
                                    });
    co_return mask.load(std::memory_order_relaxed);
}

TEST_P(Parallel, InvokeAwaitsTheFunctionsThatReturnTasks) {
    EXPECT_EQ(run_on(kind(), invoke_mixed(), "mixed invoke"), 7);
}

aspen::task<bool> async_body_throws() {
    std::vector<int> v(50, 0);
    try {
        co_await aspen::parallel_for_each(
            v.begin(), v.end(),
            [](int& x) -> aspen::task<void> {
                co_await aspen::yield_now();
                x = 1;
                throw chunk_failed("async");
            },
            1);
    } catch (const chunk_failed& e) {
        co_return std::string(e.what()) == "async";
    }
    co_return false;
}

TEST_P(Parallel, AnAsyncBodysExceptionIsRethrown) {
    EXPECT_TRUE(run_on(kind(), async_body_throws(), "async throw"));
}

// An async reduce chunk: each chunk yields (and every seventh sleeps) before
// it returns its part, a concatenation, so the result shows that every
// chunk was awaited and combined in index order.
aspen::task<std::vector<int>> concatenated_async(int n, std::size_t grain) {
    auto chunk = [](int lo, int hi) -> aspen::task<std::vector<int>> {
        co_await aspen::yield_now();
        if (lo % 7 == 0) co_await aspen::sleep(std::chrono::milliseconds(1));
        std::vector<int> part;
        for (int i = lo; i < hi; ++i) part.push_back(i);
        co_return part;
    };
    auto combine = [](std::vector<int> a, std::vector<int> b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    };
    co_return co_await aspen::parallel_reduce(0, n, std::vector<int>{}, chunk, combine, grain);
}

TEST_P(Parallel, ReduceAwaitsAsyncChunksAndCombinesInIndexOrder) {
    for (std::size_t grain : {std::size_t{0}, std::size_t{1}, std::size_t{13}}) {
        auto v = run_on(kind(), concatenated_async(500, grain), "async reduce");
        std::vector<int> want(500);
        std::iota(want.begin(), want.end(), 0);
        EXPECT_EQ(v, want) << grain;
    }
}

// An async chunk that throws after a suspension: the exception reaches the
// caller of parallel_reduce.
aspen::task<bool> async_reduce_throws() {
    auto chunk = [](int lo, int) -> aspen::task<long> {
        co_await aspen::yield_now();
        if (lo == 40) throw chunk_failed("async reduce");
        co_return 1L;
    };
    try {
        (void)co_await aspen::parallel_reduce(0, 100, 0L, chunk, std::plus<>(), 10);
    } catch (const chunk_failed& e) {
        co_return std::string(e.what()) == "async reduce";
    }
    co_return false;
}

TEST_P(Parallel, AnAsyncReduceChunksExceptionIsRethrown) {
    EXPECT_TRUE(run_on(kind(), async_reduce_throws(), "async reduce throw"));
}

// Chunks wait on an event nobody sets; the caller is aborted. The pieces
// still waiting are destroyed at shutdown, and with them the block: every
// copy of the body (holding a token) is gone afterwards.
aspen::task<void> stuck_loop(aspen::event* never, std::atomic<int>* waiting, std::atomic<int>* alive) {
    auto token = std::make_shared<aspen_test::alive_token>(alive);
    // Named: g++ 12 destroys a lambda written inside the co_await twice
    // (README, "Compiler caveats").
    auto body = [never, waiting, token](int) -> aspen::task<void> {
        // acq_rel: a count the test thread waits on.
        waiting->fetch_add(1, std::memory_order_acq_rel);
        co_await never->wait();
    };
    co_await aspen::parallel_for(0, 16, std::move(body), 1);
}

TEST(ParallelAbort, AbortedCallerOfWaitingAsyncChunksLeavesNothingBehind) {
    for (std::size_t w : {1, 2, 8}) {
        aspen::event never;
        std::atomic<int> waiting{0}, alive{0};
        {
            aspen::runtime rt(aspen_test::workers(w));
            auto h = rt.spawn(stuck_loop(&never, &waiting, &alive));
            wait_for(waiting, 16);  // every chunk waits: the pieces are idle tasks
            aspen_test::within(std::chrono::seconds(60), "abort", [&] { rt.block_on(aspen_test::abort_and_join(h)); });
        }
        EXPECT_EQ(alive.load(), 0) << w;  // the block (and the body in it) was freed
    }
}

// ---- sort ------------------------------------------------------------------------

template <class T, class Comp = std::less<>>
aspen::task<std::vector<T>> sorted(std::vector<T> v, Comp comp = {}) {
    co_await aspen::parallel_sort(v.begin(), v.end(), comp);
    co_return v;
}

std::vector<int> pattern(std::size_t n, int which) {
    std::vector<int> v(n);
    std::mt19937 rng(static_cast<unsigned>(n * 31 + static_cast<unsigned>(which)));
    for (std::size_t i = 0; i < n; ++i) {
        const int k = static_cast<int>(i);
        switch (which) {
            case 0: v[i] = static_cast<int>(rng()); break;      // random
            case 1: v[i] = k; break;                            // sorted
            case 2: v[i] = -k; break;                           // reversed
            case 3: v[i] = 42; break;                           // all equal
            case 4: v[i] = static_cast<int>(rng() % 3); break;  // few distinct
            default: v[i] = k < static_cast<int>(n / 2) ? k : static_cast<int>(n) - k;  // organ pipe
        }
    }
    return v;
}

// The largest size is smaller in the sanitizer builds, where every std::sort
// (the pieces' and the reference's) runs instrumented, and in ASan at -O0:
// with 600,000 it took 35 s of parallel_test's 38 under ASan.
#ifdef ASPEN_SANITIZED
constexpr std::size_t largest_sort = 150000;
#else
constexpr std::size_t largest_sort = 600000;
#endif

TEST_P(Parallel, SortMatchesStdSort) {
    for (std::size_t n : std::initializer_list<std::size_t>{0, 1, 2, 2048, 2049, 5000, 100000, largest_sort})
        for (int which = 0; which < 6; ++which) {
            std::vector<int> v = pattern(n, which);
            std::vector<int> want = v;
            std::sort(want.begin(), want.end());
            EXPECT_EQ(run_on(kind(), sorted(v), "sort"), want) << n << " pattern " << which;
        }
}

TEST_P(Parallel, SortWithAComparatorAndMoveOnlyElements) {
    std::vector<int> v = pattern(300000, 0);
    std::vector<int> want = v;
    std::sort(want.begin(), want.end(), std::greater<>());
    EXPECT_EQ(run_on(kind(), sorted(v, std::greater<>()), "sort greater"), want);

    std::vector<std::unique_ptr<int>> owned;
    for (int x : pattern(50000, 4)) owned.push_back(std::make_unique<int>(x));
    auto by_value = [](const std::unique_ptr<int>& a, const std::unique_ptr<int>& b) { return *a < *b; };
    auto out = run_on(kind(), sorted(std::move(owned), by_value), "sort unique_ptr");
    ASSERT_EQ(out.size(), 50000u);
    EXPECT_TRUE(std::is_sorted(out.begin(), out.end(), by_value));
}

TEST_P(Parallel, SortOfStrings) {
    std::vector<std::string> v;
    std::mt19937 rng(3);
    for (int i = 0; i < 40000; ++i) v.push_back(std::to_string(rng() % 100000));
    std::vector<std::string> want = v;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(run_on(kind(), sorted(v), "sort strings"), want);
}

// The comparator throws after `limit` calls: rethrown once every piece has
// ended. What the range then holds is unspecified: std::sort itself, which
// sorts the small parts, may lose the element it was moving when comp threw.
aspen::task<bool> sort_failing(std::vector<int> v, long limit) {
    std::atomic<long> calls{0};
    try {
        co_await aspen::parallel_sort(v.begin(), v.end(), [&](int a, int b) {
            // relaxed: a count.
            if (calls.fetch_add(1, std::memory_order_relaxed) == limit) throw chunk_failed("comparator");
            return a < b;
        });
    } catch (const chunk_failed&) {
        co_return true;
    }
    co_return false;
}

TEST_P(Parallel, SortComparatorExceptionIsRethrown) {
    std::vector<int> v = pattern(200000, 0);
    for (long limit : {0L, 5000L, 1000000L})
        EXPECT_TRUE(run_on(kind(), sort_failing(v, limit), "sort failing")) << limit;
}

INSTANTIATE_TEST_SUITE_P(Kinds, Parallel, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
