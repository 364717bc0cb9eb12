// config::poll_time_histogram: off, nothing is timed; on, every poll lands
// in exactly one bucket, a poll that blocks its worker shows as the longest
// and in the last bucket, and the bucket bounds are the documented ones.
#include "runtime_kinds.hpp"
#include "scheduler/multi_thread.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;

namespace {

task<void> yielder(int n) {
    for (int i = 0; i < n; ++i) co_await aspen::yield_now();
}

task<void> some_work() {
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < 50; ++i) hs.push_back(aspen::spawn(yielder(20)));
    for (auto& h : hs) co_await h;
}

// Holds its worker: what the histogram is there to find.
task<void> blocks_its_worker() {
    co_await aspen::yield_now();
    std::this_thread::sleep_for(20ms);
}

std::uint64_t sum(const std::array<std::uint64_t, aspen::poll_time_buckets>& h) {
    return std::accumulate(h.begin(), h.end(), std::uint64_t{0});
}

aspen::config with_histogram(bool on) {
    aspen::config cfg;
    cfg.poll_time_histogram = on;
    return cfg;
}

class PollTime : public ::testing::TestWithParam<int> {};

TEST_P(PollTime, OffByDefaultNothingIsTimed) {
    EXPECT_FALSE(aspen::config{}.poll_time_histogram);
    aspen_test::any_runtime rt(GetParam());
    rt->block_on(some_work());
    aspen::worker_metrics t = rt->metrics().total();
    EXPECT_GT(t.polls, 0u);
    EXPECT_EQ(sum(t.poll_time_histogram), 0u);
    EXPECT_EQ(t.poll_time_ns, 0u);
    EXPECT_EQ(t.longest_poll_ns, 0u);
}

TEST_P(PollTime, EveryPollLandsInOneBucket) {
    aspen_test::any_runtime rt(GetParam(), with_histogram(true));
    rt->block_on(some_work());
    // block_on may return before the worker that completed the root has
    // recorded that poll's time (a poll is counted as it starts): after
    // shutdown every worker is done.
    rt->shutdown();
    aspen::runtime_metrics m = rt->metrics();
    for (const aspen::worker_metrics& w : m.workers) {
        EXPECT_EQ(sum(w.poll_time_histogram), w.polls);
        EXPECT_GE(w.poll_time_ns, w.longest_poll_ns);
    }
    // Each task is polled again after each of its 20 yields (its first run
    // may be nested in the root's join, which is part of the root's poll).
    EXPECT_GE(m.total().polls, 50u * 20);
    EXPECT_EQ(sum(m.total().poll_time_histogram), m.total().polls);
}

TEST_P(PollTime, APollThatBlocksItsWorkerIsTheLongest) {
    aspen_test::any_runtime rt(GetParam(), with_histogram(true));
    rt->block_on([]() -> task<void> {
        auto h = aspen::spawn(blocks_its_worker());
        co_await h;
    }());
    // The blocking poll may be the root's own (its join runs the child
    // nested, also after the child's yield, as help while waiting), whose
    // time the worker records after block_on has returned: read after
    // shutdown, when every worker is done.
    rt->shutdown();
    aspen::worker_metrics t = rt->metrics().total();
    // sleep_for never returns early: a lower bound only.
    EXPECT_GE(t.longest_poll_ns, std::uint64_t{20'000'000});
    EXPECT_GE(t.poll_time_histogram[aspen::poll_time_buckets - 1], 1u);  // 16.4 ms and up
}

INSTANTIATE_TEST_SUITE_P(Kinds, PollTime, aspen_test::runtime_kinds, aspen_test::kind_name);

TEST(PollTimeBuckets, BoundsAreWholeMicrosecondPowersOfTwo) {
    struct {
        std::int64_t ns;
        std::size_t bucket;
    } cases[] = {{-5, 0},        {0, 0},          {999, 0},         {1'000, 1},      {1'999, 1},
                 {2'000, 2},     {3'999, 2},      {4'000, 3},       {1'023'999, 10}, {1'024'000, 11},
                 {8'191'999, 13}, {8'192'000, 14}, {16'383'999, 14}, {16'384'000, 15}, {5'000'000'000, 15}};
    for (auto c : cases) {
        aspen::detail::worker_counters counters;
        counters.record_poll_time(std::chrono::nanoseconds(c.ns));
        aspen::worker_metrics m = counters.read();
        EXPECT_EQ(m.poll_time_histogram[c.bucket], 1u) << c.ns << " ns";
        EXPECT_EQ(sum(m.poll_time_histogram), 1u) << c.ns << " ns";
        EXPECT_EQ(m.longest_poll_ns, static_cast<std::uint64_t>(c.ns < 0 ? 0 : c.ns));
    }
    aspen::detail::worker_counters counters;
    counters.record_poll_time(3ms);
    counters.record_poll_time(1ms);
    aspen::worker_metrics m = counters.read();
    EXPECT_EQ(m.longest_poll_ns, 3'000'000u);
    EXPECT_EQ(m.poll_time_ns, 4'000'000u);
}

// Summed over workers: buckets add up, the longest is the maximum.
TEST(PollTimeBuckets, TotalAddsBucketsAndKeepsTheLongest) {
    aspen::runtime_metrics m;
    m.workers.resize(2);
    m.workers[0].poll_time_histogram[3] = 2;
    m.workers[1].poll_time_histogram[3] = 5;
    m.workers[0].longest_poll_ns = 7;
    m.workers[1].longest_poll_ns = 4;
    m.workers[0].poll_time_ns = 10;
    m.workers[1].poll_time_ns = 20;
    aspen::worker_metrics t = m.total();
    EXPECT_EQ(t.poll_time_histogram[3], 7u);
    EXPECT_EQ(t.longest_poll_ns, 7u);
    EXPECT_EQ(t.poll_time_ns, 30u);
}

}  // namespace
