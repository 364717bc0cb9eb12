// local_queue under chosen interleavings (tests/local_queue_harness.hpp):
// every interleaving within a preemption bound for small programs on a
// 4-slot ring, random interleavings of random programs beyond, each step
// compared with a sequential model.

#include "local_queue_harness.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

namespace {

using namespace lq_harness;
using op = owner_op;

// The queue's indices count modulo 2^21; starting just below makes them wrap.
constexpr std::uint32_t index_space = std::uint32_t{1} << 21;

// The explorer itself, on runs without a queue: threads that just take
// `steps[i]` steps each. Every interleaving: the multinomial coefficient;
// no preemption: each order of the threads once.
run_result fake_run(const std::vector<int>& steps, const chooser& choose) {
    std::vector<int> left = steps;
    run_result r;
    int prev = -1;
    for (;;) {
        std::vector<int> enabled;
        for (std::size_t i = 0; i < left.size(); ++i)
            if (left[i] > 0) enabled.push_back(static_cast<int>(i));
        if (enabled.empty()) return r;
        const int c = choose(enabled, prev);
        r.trace.push_back({enabled, c, prev});
        --left[static_cast<std::size_t>(c)];
        prev = c;
    }
}

TEST(Interleavings, ExplorerCountsEveryScheduleOnce) {
    const std::vector<int> steps{3, 2, 2};
    auto run = [&](const chooser& c) { return fake_run(steps, c); };
    EXPECT_EQ(explore(run, -1).runs, 210u);  // 7! / (3! 2! 2!)
    EXPECT_EQ(explore(run, 0).runs, 6u);     // 3!
    // Bound 1: one switch away from a running thread. Fewer than all, more
    // than none.
    const auto one = explore(run, 1).runs;
    EXPECT_GT(one, 6u);
    EXPECT_LT(one, 210u);
}

struct exhaustive_case {
    const char* name;
    program p;
    int bound;
    std::uint64_t expected_runs;
};

// expected_runs: what the search finds for these programs with the present
// queue code (a bound of -1: every interleaving). They change only when the
// number of atomic operations an operation performs changes; then check the
// new code passes and update them.
std::vector<exhaustive_case> exhaustive_cases() {
    const std::uint32_t wrap = index_space - 2;  // the indices wrap mid-run
    return {
        {"owner_vs_one_thief_all", {4, 4, 0, 2, {op::push, op::pop, op::pop_oldest}, {1}}, -1, 11218},
        {"two_thieves_race_a_claim", {4, 4, wrap, 3, {op::push, op::pop}, {1, 1}}, 3, 8984},
        {"overflow_vs_two_thieves", {4, 4, 0, 4, {op::push, op::pop_oldest}, {1, 1}}, 3, 8440},
        {"pop_oldest_inside_a_steal", {4, 4, wrap, 4, {op::pop_oldest, op::pop_oldest, op::push}, {1}}, 5, 4241},
        {"small_thief_queue", {4, 2, 0, 4, {op::pop, op::push, op::push}, {2, 1}}, 2, 2596},
        {"push_oldest_vs_two_thieves", {4, 4, wrap, 2, {op::push_oldest, op::push_oldest, op::pop, op::push_oldest}, {1, 1}}, 3, 13480},
        {"push_oldest_into_a_full_ring", {2, 2, 0, 1, {op::push_oldest, op::push_oldest, op::pop_oldest}, {1}}, -1, 1232},
    };
}

void expect_every_path(const coverage& c) {
    std::printf("  paths: %llu steals (%llu failed), overflows: %llu half, %llu single, %llu room; "
                "%llu pop_oldest inside a steal; push_oldest: %llu taken, %llu refused\n",
                static_cast<unsigned long long>(c.steals), static_cast<unsigned long long>(c.failed_steals),
                static_cast<unsigned long long>(c.overflows), static_cast<unsigned long long>(c.overflow_singles),
                static_cast<unsigned long long>(c.overflow_room),
                static_cast<unsigned long long>(c.pop_oldest_in_steal),
                static_cast<unsigned long long>(c.oldest_pushes), static_cast<unsigned long long>(c.oldest_refusals));
    EXPECT_GT(c.steals, 0u);
    EXPECT_GT(c.failed_steals, 0u);
    EXPECT_GT(c.overflows, 0u);
    EXPECT_GT(c.overflow_singles, 0u);
    EXPECT_GT(c.overflow_room, 0u);
    EXPECT_GT(c.pop_oldest_in_steal, 0u);
    EXPECT_GT(c.oldest_pushes, 0u);
    EXPECT_GT(c.oldest_refusals, 0u);
}

TEST(Interleavings, ExhaustiveWithinPreemptionBound) {
    std::uint64_t total = 0;
    coverage seen;
    for (const auto& c : exhaustive_cases()) {
        SCOPED_TRACE(c.name);
        const explore_result r = explore(c.p, c.bound);
        ASSERT_TRUE(r.ok) << c.p.describe() << "\n" << r.error;
        std::printf("  %-28s %s, bound %d: %llu interleavings, %llu steps\n", c.name, c.p.describe().c_str(),
                    c.bound, static_cast<unsigned long long>(r.runs), static_cast<unsigned long long>(r.steps));
        EXPECT_EQ(r.runs, c.expected_runs);
        total += r.runs;
        seen.add(r.seen);
    }
    EXPECT_GT(total, 0u);
    expect_every_path(seen);
}

program random_program(std::mt19937_64& rng) {
    program p;
    const std::uint32_t caps[] = {2, 4, 8};
    p.cap = caps[rng() % 3];
    p.dst_cap = caps[rng() % 2];
    p.start_index = rng() % 2 ? 0 : index_space - static_cast<std::uint32_t>(rng() % 8);
    p.prefill = static_cast<std::uint32_t>(rng() % (p.cap + 1));
    const std::size_t n_ops = 2 + rng() % 7;
    for (std::size_t i = 0; i < n_ops; ++i) {
        const auto r = rng() % 9;
        p.owner.push_back(r < 4 ? op::push : r < 6 ? op::pop : r < 8 ? op::pop_oldest : op::push_oldest);
    }
    const std::size_t thieves = 1 + rng() % 3;
    for (std::size_t i = 0; i < thieves; ++i) p.steals.push_back(1 + static_cast<int>(rng() % 3));
    return p;
}

TEST(Interleavings, RandomProgramsRandomSchedules) {
#if defined(ASPEN_SANITIZED)
    const int programs = 300;
#else
    const int programs = 3000;
#endif
    const int schedules = 20;
    std::mt19937_64 rng(2024);
    std::uint64_t runs = 0, steps = 0;
    coverage seen;
    for (int i = 0; i < programs; ++i) {
        const program p = random_program(rng);
        for (int s = 0; s < schedules; ++s) {
            std::uint64_t seed = rng();
            std::mt19937_64 pick(seed);
            const run_result r = run_once(p, [&](const std::vector<int>& enabled, int) {
                return enabled[pick() % enabled.size()];
            });
            ASSERT_TRUE(r.ok) << p.describe() << " schedule seed " << seed << "\n" << r.error;
            ++runs;
            steps += r.trace.size();
            seen.add(r.seen);
        }
    }
    std::printf("  %llu random interleavings, %llu steps\n", static_cast<unsigned long long>(runs),
                static_cast<unsigned long long>(steps));
    EXPECT_EQ(runs, static_cast<std::uint64_t>(programs) * schedules);
    expect_every_path(seen);
}

// The harness has teeth: with a CAS that is not atomic (compare, then
// write one step later) it finds an interleaving that breaks the queue.
TEST(Interleavings, FindsTheBugOfANonAtomicCas) {
    torn_cas = true;
    const program p{4, 4, 0, 3, {op::push, op::pop}, {1}};
    const explore_result r = explore(p, 2);
    torn_cas = false;
    EXPECT_FALSE(r.ok);
    std::printf("  found after %llu interleavings: %s\n", static_cast<unsigned long long>(r.runs), r.error.c_str());
}

}  // namespace
