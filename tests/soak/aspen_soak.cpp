// aspen-soak: runs the exactly-once workload (tests/stress/exactly_once_workload.hpp)
// and the I/O workload (tests/stress/io_workload.hpp) round after round on
// randomly configured runtimes for a given time, and fails on the first
// miscount. Not part of ctest: `scripts/soak.sh <minutes>`.
//
//   aspen-soak --minutes N [--seed S] [--tasks T]
//
// Each round picks workers 1..16, local_queue_capacity a power of two in
// 4..1024, global_queue_interval, steal_attempts, coop_budget and
// max_next_slot_runs at random, prints the configuration and the counts it
// checked. Exit status: 0 all rounds correct, 1 a miscount, 2 bad usage,
// 3 a round hung (the watchdog: 10 minutes per round).
#include "../stress/exactly_once_workload.hpp"
#include "../stress/io_workload.hpp"
#include "../test_util.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace {

struct options {
    double minutes = 1;
    std::uint64_t seed = 0;
    std::uint32_t max_tasks = 2'000'000;
};

bool parse(int argc, char** argv, options& o) {
    for (int i = 1; i < argc; ++i) {
        const bool has_value = i + 1 < argc;
        char* end = nullptr;
        if (std::strcmp(argv[i], "--minutes") == 0 && has_value) {
            o.minutes = std::strtod(argv[++i], &end);
            if (*end != '\0' || !(o.minutes > 0)) return false;
        } else if (std::strcmp(argv[i], "--seed") == 0 && has_value) {
            o.seed = std::strtoull(argv[++i], &end, 10);
            if (*end != '\0') return false;
        } else if (std::strcmp(argv[i], "--tasks") == 0 && has_value) {
            o.max_tasks = static_cast<std::uint32_t>(std::strtoul(argv[++i], &end, 10));
            if (*end != '\0' || o.max_tasks < 1000) return false;
        } else {
            return false;
        }
    }
    return true;
}

aspen::config random_config(std::mt19937_64& rng) {
    aspen::config c;
    c.workers = 1 + rng() % 16;
    c.local_queue_capacity = std::uint32_t{4} << (rng() % 9);  // 4 .. 1024
    const std::uint32_t intervals[] = {1, 2, 7, 31, 61, 127};
    c.global_queue_interval = intervals[rng() % 6];
    c.steal_attempts = 1 + static_cast<std::uint32_t>(rng() % 64);
    const std::uint32_t budgets[] = {1, 4, 32, 128, 1024};
    c.coop_budget = budgets[rng() % 5];
    c.max_next_slot_runs = 1 + static_cast<std::uint32_t>(rng() % 4);
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    if (!parse(argc, argv, o)) {
        std::fprintf(stderr, "usage: %s --minutes N [--seed S] [--tasks T (>= 1000)]\n", argv[0]);
        return 2;
    }
    if (o.seed == 0) o.seed = std::random_device{}();
    std::printf("aspen-soak: %.1f minutes, seed %llu\n", o.minutes, static_cast<unsigned long long>(o.seed));
    std::mt19937_64 rng(o.seed);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double, std::ratio<60>>(o.minutes);
    std::uint64_t rounds = 0, tasks = 0, bytes = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        const aspen::config cfg = random_config(rng);
        const std::uint32_t total = 1000 + static_cast<std::uint32_t>(rng() % o.max_tasks);
        std::printf("round %llu: workers=%zu capacity=%u global_queue_interval=%u steal_attempts=%u coop_budget=%u "
                    "max_next_slot_runs=%u tasks=%u: ",
                    static_cast<unsigned long long>(rounds), cfg.workers, cfg.local_queue_capacity,
                    cfg.global_queue_interval, cfg.steal_attempts, cfg.coop_budget, cfg.max_next_slot_runs, total);
        std::fflush(stdout);
        exactly_once::report r;
        aspen_test::within(std::chrono::seconds(600), "a soak round", [&] { r = exactly_once::run(cfg, total); });
        const bool all_ran = r.started + r.aborted >= total && r.finished + r.aborted >= total;
        if (!r.first_error.empty() || !all_ran) {
            std::printf("MISCOUNT: %s\n", r.first_error.empty() ? "a non-aborted task did not run" : r.first_error.c_str());
            return 1;
        }
        std::printf("started %llu, finished %llu, aborted %llu: ok; ", static_cast<unsigned long long>(r.started),
                    static_cast<unsigned long long>(r.finished), static_cast<unsigned long long>(r.aborted));
        io_stress::params io;
        io.connections = 1 + rng() % 32;
        io.messages = 20 + rng() % 200;
        std::printf("I/O %zu connections x %zu messages: ", io.connections, io.messages);
        std::fflush(stdout);
        io_stress::report ior;
        aspen_test::within(std::chrono::seconds(600), "an I/O soak round", [&] { ior = io_stress::run(cfg, io); });
        if (!ior.first_error.empty()) {
            std::printf("FAILED: %s\n", ior.first_error.c_str());
            return 1;
        }
        std::printf("%llu bytes echoed, %llu reads and %llu writes timed out: ok\n",
                    static_cast<unsigned long long>(ior.bytes_echoed),
                    static_cast<unsigned long long>(ior.reads_timed_out),
                    static_cast<unsigned long long>(ior.writes_timed_out));
        ++rounds;
        tasks += total;
        bytes += ior.bytes_echoed;
    }
    std::printf("aspen-soak: %llu rounds, %llu tasks, %llu bytes echoed, every count right\n",
                static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(tasks),
                static_cast<unsigned long long>(bytes));
    return 0;
}
