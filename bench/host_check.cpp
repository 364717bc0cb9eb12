// The host check: how fast each CPU runs a plain serial recursion right
// now, printed at the start and the end of a benchmark run. The project's
// VM shares its host's cores, and for minutes at a time one vCPU or both
// run code like aspen's (calls, returns, memory at full rate) at about two
// thirds of their speed while a latency-bound loop keeps its speed
// (docs/performance.md, History, stop 52). Such a phase moves the ratios
// against the runtime whose code is the tighter, so a table is read with
// the host's state beside it.
#include "bench.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {
namespace {

// Not fib.cpp's serial_fib, which the optimiser may reshape: this one
// stays one call per node, the kind of code the slow phases slow.
[[gnu::noinline]] std::int64_t recurse(int n) { return n < 2 ? n : recurse(n - 1) + recurse(n - 2); }

// Median of five timed runs of recurse(30) on the calling thread, in ms.
double median_recursion_ms() {
    std::vector<double> times;
    for (int i = 0; i < 5; ++i) {
        const auto start = std::chrono::steady_clock::now();
        const std::int64_t v = recurse(opaque(30));
        const auto stop = std::chrono::steady_clock::now();
        if (v != 832040) return -1;
        times.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

std::string host_check() {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return "host check: sched_getaffinity failed";
    std::string line = "host check (serial fib(30) pinned to each CPU, median of 5):";
    char buf[64];
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) continue;
        std::snprintf(buf, sizeof buf, " cpu%d %.2f ms", cpu, median_recursion_ms());
        line += buf;
    }
    // Back to every allowed CPU: threads started later inherit this mask,
    // so a failure here would pin every runtime to one CPU; say so.
    if (sched_setaffinity(0, sizeof allowed, &allowed) != 0)
        line += " (WARNING: the CPU mask was not restored; the runs below are pinned)";
    return line;
}

}  // namespace bench
