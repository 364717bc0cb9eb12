// Exactly-once under stress (the workload: exactly_once_workload.hpp) at
// 1..16 workers, with the default ring and with a 4-slot one.
#include "../test_util.hpp"
#include "exactly_once_workload.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>

namespace {

using namespace std::chrono_literals;

#ifdef ASPEN_SANITIZED
constexpr std::uint32_t total_tasks = 100'000;
#else
constexpr std::uint32_t total_tasks = 10'000'000;
#endif

void run_stress(std::size_t workers, std::uint32_t capacity) {
    aspen::config cfg;
    cfg.workers = workers;
    cfg.local_queue_capacity = capacity;
    exactly_once::report r;
    aspen_test::within(600s, "exactly-once stress", [&] { r = exactly_once::run(cfg, total_tasks); });
    ASSERT_EQ(r.first_error, "");
    // Every non-aborted task ran; some were aborted.
    EXPECT_GE(r.started, total_tasks - r.aborted);
    EXPECT_GE(r.finished, total_tasks - r.aborted);
    EXPECT_GT(r.aborted, 0u);
}

class ExactlyOnce : public ::testing::TestWithParam<std::tuple<std::size_t, std::uint32_t>> {};

TEST_P(ExactlyOnce, EveryTaskRunsOnceAndIsDestroyedOnce) {
    auto [workers, capacity] = GetParam();
    run_stress(workers, capacity);
}

INSTANTIATE_TEST_SUITE_P(Workers, ExactlyOnce,
                         ::testing::Combine(::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4},
                                                              std::size_t{8}, std::size_t{16}),
                                            ::testing::Values(std::uint32_t{256}, std::uint32_t{4})),
                         [](const auto& info) { return aspen_test::workers_capacity_name(info); });

}  // namespace
