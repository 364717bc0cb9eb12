// The I/O exactly-once workload (io_workload.hpp) at 1, 2 and 8 workers, and
// with a 4-slot ring: every byte echoed once and in order although reads and
// writes keep timing out, every sleeper finished or cancelled exactly once,
// and no descriptor left open.
#include "../net_util.hpp"
#include "../test_util.hpp"
#include "io_workload.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <tuple>

namespace {

using namespace std::chrono_literals;

#ifdef ASPEN_SANITIZED
constexpr io_stress::params sizes{16, 150, 32};
#else
constexpr io_stress::params sizes{32, 300, 64};
#endif

class IoStress : public ::testing::TestWithParam<std::tuple<std::size_t, std::uint32_t>> {};

TEST_P(IoStress, TimedOutReadsAndWritesLoseNoByteAndSleepersEndOnce) {
    auto [workers, capacity] = GetParam();
    aspen::config cfg = aspen_test::workers(workers);
    cfg.local_queue_capacity = capacity;
    const int fds_before = net_test::open_fds();
    io_stress::report r;
    aspen_test::within(300s, "I/O stress", [&] { r = io_stress::run(cfg, sizes); });
    std::printf("echoed %llu bytes; timed out: %llu reads, %llu writes; sleepers: %llu finished, %llu cancelled\n",
                static_cast<unsigned long long>(r.bytes_echoed), static_cast<unsigned long long>(r.reads_timed_out),
                static_cast<unsigned long long>(r.writes_timed_out),
                static_cast<unsigned long long>(r.sleepers_finished),
                static_cast<unsigned long long>(r.sleepers_cancelled));
    ASSERT_EQ(r.first_error, "");
    // The cancellation paths ran: reads timed out (a read waits for the
    // peer's bytes), and some sleepers were aborted before they finished.
    EXPECT_GT(r.reads_timed_out, 0u);
    EXPECT_GT(r.sleepers_cancelled, 0u);
    EXPECT_GT(r.sleepers_finished, 0u);
    EXPECT_EQ(net_test::open_fds(), fds_before);
}

INSTANTIATE_TEST_SUITE_P(Workers, IoStress,
                         ::testing::Values(std::tuple{std::size_t{1}, std::uint32_t{256}},
                                           std::tuple{std::size_t{2}, std::uint32_t{256}},
                                           std::tuple{std::size_t{8}, std::uint32_t{256}},
                                           std::tuple{std::size_t{2}, std::uint32_t{4}}),
                         [](const auto& info) { return aspen_test::workers_capacity_name(info); });

}  // namespace
