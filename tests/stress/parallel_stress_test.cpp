// Parallel algorithms under stress, at 1..16 workers, with the default ring
// and with a 4-slot one: callers run random trees of nested parallel_for
// calls (plain leaves, async bodies that yield and nest, random sizes and
// grains); some callers are aborted at random moments, and in some trees a
// leaf throws. Counted exactly: a caller that was neither aborted nor hit
// by an exception sees every leaf index of its tree exactly once (its
// count equals the serial count of the same tree); a failing one gets its
// own exception; an aborted one counts no more than its tree has, and its
// pieces leave nothing behind (the asan build's LeakSanitizer).
#include "../runtime_kinds.hpp"
#include "splitmix.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using namespace std::chrono_literals;
using stress_util::splitmix;

#ifdef ASPEN_SANITIZED
constexpr int callers = 12;
#else
constexpr int callers = 60;
#endif

// One call of the tree, drawn from its key: n indices (fewer deeper down),
// a grain (0: automatic), whether its body nests another call.
struct shape {
    int n;
    std::size_t grain;
    bool nests;
};

shape shape_of(std::uint64_t key, int depth) {
    splitmix r{key};
    shape s{};
    s.n = static_cast<int>(r() % static_cast<std::uint64_t>(64 >> depth));
    s.grain = r() % 3 == 0 ? 0 : 1 + r() % 8;
    s.nests = depth < 3 && r() % 3 != 0;
    return s;
}

std::uint64_t child_key(std::uint64_t key, int i) {
    splitmix r{key ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(i + 1))};
    return r();
}

// The leaves of the tree under (key, depth), counted serially.
long leaves_of(std::uint64_t key, int depth) {
    const shape s = shape_of(key, depth);
    if (!s.nests) return s.n;
    long total = 0;
    for (int i = 0; i < s.n; ++i) total += leaves_of(child_key(key, i), depth + 1);
    return total;
}

struct leaf_failed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct caller_state {
    std::uint64_t key = 0;
    bool throws = false;  // one leaf in about 300 throws
    std::atomic<long> leaves{0};
};

bool leaf_throws(const caller_state& c, std::uint64_t key, int i) {
    return c.throws && child_key(key, i) % 300 == 0;
}

aspen::task<void> run_call(caller_state* c, std::uint64_t key, int depth) {
    const shape s = shape_of(key, depth);
    if (!s.nests) {
        auto leaf = [c, key](int i) {
            // relaxed: read after the runtime is gone, or after the caller's
            // await, which orders every leaf before it.
            c->leaves.fetch_add(1, std::memory_order_relaxed);
            if (leaf_throws(*c, key, i)) throw leaf_failed("leaf");
        };
        co_await aspen::parallel_for(0, s.n, std::move(leaf), s.grain);
        co_return;
    }
    auto nested = [c, key, depth](int i) -> aspen::task<void> {
        if (i % 4 == 0) co_await aspen::yield_now();
        co_await run_call(c, child_key(key, i), depth + 1);
    };
    co_await aspen::parallel_for(0, s.n, std::move(nested), s.grain);
}

// 0: finished, 1: its leaf's exception, 2: cancelled, 3: anything else.
aspen::task<int> outcome_of(aspen::join_handle<void>& h) {
    try {
        co_await h;
        co_return 0;
    } catch (const leaf_failed&) {
        co_return 1;
    } catch (const aspen::task_cancelled&) {
        co_return 2;
    } catch (...) {
        co_return 3;
    }
}

void run_stress(std::size_t workers, std::uint32_t capacity, std::uint64_t seed) {
    std::vector<std::unique_ptr<caller_state>> state;
    splitmix r{seed};
    for (int i = 0; i < callers; ++i) {
        auto c = std::make_unique<caller_state>();
        c->key = r();
        c->throws = r() % 4 == 0;
        state.push_back(std::move(c));
    }
    std::vector<int> outcome(callers, -1);
    std::vector<bool> aborted(callers, false);
    aspen_test::within(600s, "parallel stress", [&] {
        aspen::config cfg;
        cfg.workers = workers;
        cfg.local_queue_capacity = capacity;
        aspen::runtime rt(cfg);
        std::vector<aspen::join_handle<void>> handles;
        for (auto& c : state) handles.push_back(rt.spawn(run_call(c.get(), c->key, 0)));
        // Abort about one caller in five, some at once, some after a moment.
        for (int i = 0; i < callers; ++i) {
            if (r() % 5 != 0) continue;
            for (std::uint64_t spin = r() % 20000; spin > 0; --spin) std::atomic_signal_fence(std::memory_order_seq_cst);
            handles[static_cast<std::size_t>(i)].abort();
            aborted[static_cast<std::size_t>(i)] = true;
        }
        for (int i = 0; i < callers; ++i)
            outcome[static_cast<std::size_t>(i)] = rt.block_on(outcome_of(handles[static_cast<std::size_t>(i)]));
        // The runtime's end: an aborted caller's pieces have ended or are gone.
    });
    int exact = 0;
    for (int i = 0; i < callers; ++i) {
        const caller_state& c = *state[static_cast<std::size_t>(i)];
        const long want = leaves_of(c.key, 0);
        const long got = c.leaves.load(std::memory_order_relaxed);
        const int o = outcome[static_cast<std::size_t>(i)];
        ASSERT_NE(o, 3) << "caller " << i;
        if (o == 0) {
            // Finished (an abort, if any, came too late): no leaf threw, so
            // every leaf ran, once.
            EXPECT_EQ(got, want) << "caller " << i;
            ++exact;
        } else if (o == 1) {
            EXPECT_TRUE(c.throws) << "caller " << i;
            EXPECT_LE(got, want) << "caller " << i;
        } else {
            EXPECT_TRUE(aborted[static_cast<std::size_t>(i)]) << "caller " << i;
            EXPECT_LE(got, want) << "caller " << i;
        }
    }
    EXPECT_GT(exact, 0);
}

class ParallelStress : public ::testing::TestWithParam<std::tuple<std::size_t, std::uint32_t>> {};

TEST_P(ParallelStress, NestedCallsCountEveryLeafOnceUnderAbortsAndExceptions) {
    auto [workers, capacity] = GetParam();
    for (std::uint64_t seed : {1u, 2u, 3u}) run_stress(workers, capacity, seed * 7919 + workers * 31 + capacity);
}

INSTANTIATE_TEST_SUITE_P(Workers, ParallelStress,
                         ::testing::Combine(::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4},
                                                              std::size_t{8}, std::size_t{16}),
                                            ::testing::Values(std::uint32_t{256}, std::uint32_t{4})),
                         [](const auto& info) { return aspen_test::workers_capacity_name(info); });

}  // namespace
