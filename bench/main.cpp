// aspen-bench: runs each workload on aspen, on oneTBB, on Boost.Fiber and
// serially, at the requested worker counts, checks every result and prints a
// table or CSV.
//
//   aspen-bench [--workers 1,2] [--runs 7] [--only fib,skynet] [--csv]
#include "asio_pool.hpp"
#include "bench.hpp"
#include "fiber_pool.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace {
std::vector<std::pair<std::string, std::string>> notes;  // key, line; in first-seen order
}  // namespace

void bench::note(const std::string& key, const std::string& line) {
    for (auto& [k, l] : notes) {
        if (k == key) {
            l = line;
            return;
        }
    }
    notes.emplace_back(key, line);
}

namespace {

using bench::workload;

struct options {
    std::vector<std::size_t> workers{1, 2};
    int runs = 7;
    std::vector<std::string> only;
    bool csv = false;
};

// One runtime x bench x worker count.
struct measurement {
    bool present = false;  // false: not run (no such variant)
    double median_ms = 0;
    double min_ms = 0;
    std::int64_t value = 0;  // the last value seen, or the first wrong one
    bool ok = true;
};

struct bench_results {
    workload w;
    std::vector<measurement> aspen;  // one per worker count
    std::vector<measurement> tbb;
    std::vector<measurement> fiber;
    measurement serial;
    std::vector<measurement> asio;  // network workloads only
    // At the first worker count, in the readable output only (and only if
    // aspen's runs there succeeded): the inline variant (bench.hpp) and how
    // many tasks one aspen run spawned (the runtime's metrics).
    measurement inline_floor;
    double spawns_per_run = 0;
};

std::vector<workload> all_workloads() {
    return {bench::fib_workload(),
            bench::skynet_workload(),
            bench::nqueens_workload(),
            bench::spawn_many_local_workload(),
            bench::spawn_many_remote_workload(),
            bench::yield_many_workload(),
            bench::chained_spawn_workload(),
            bench::sleep_many_workload(),
            bench::tcp_echo_workload(),
            bench::ping_pong_workload(),
            bench::mpsc_workload(),
            bench::mutex_workload(),
            bench::par_for_workload(),
            bench::par_reduce_workload(),
            bench::par_sort_workload()};
}

void usage(std::FILE* out, const char* argv0) {
    std::fprintf(out,
                 "usage: %s [--workers LIST] [--runs N] [--only NAMES] [--csv] [--help]\n"
                 "  --workers LIST  comma-separated worker counts (default 1,2)\n"
                 "  --runs N        timed runs per measurement, after one warm-up (default 7)\n"
                 "  --only NAMES    comma-separated workloads to run (default: all)\n"
                 "  --csv           print CSV: runtime,bench,workers,param,median_ms,min_ms,value,ok\n"
                 "workloads:",
                 argv0);
    for (const auto& w : all_workloads()) std::fprintf(out, " %s", w.name.c_str());
    std::fprintf(out, "\n");
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        std::size_t comma = s.find(',', start);
        parts.push_back(s.substr(start, comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return parts;
}

std::optional<long> parse_positive(const std::string& s) {
    if (s.empty() || s.size() > 9) return std::nullopt;
    long v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
    }
    if (v <= 0) return std::nullopt;
    return v;
}

// Returns the options, or the exit code to stop with.
std::optional<options> parse_args(int argc, char** argv, int& exit_code) {
    options opt;
    const std::vector<workload> known = all_workloads();
    auto fail = [&](const std::string& msg) -> std::optional<options> {
        std::fprintf(stderr, "aspen-bench: %s\n", msg.c_str());
        usage(stderr, argv[0]);
        exit_code = 2;
        return std::nullopt;
    };
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        std::string value;
        bool has_value = false;
        if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        auto take_value = [&]() -> bool {
            if (has_value) return true;
            if (i + 1 >= argc) return false;
            value = argv[++i];
            return true;
        };
        if (arg == "--help" || arg == "-h") {
            usage(stdout, argv[0]);
            exit_code = 0;
            return std::nullopt;
        } else if (arg == "--csv") {
            opt.csv = true;
        } else if (arg == "--workers") {
            if (!take_value()) return fail("--workers needs a value");
            opt.workers.clear();
            for (const auto& part : split(value)) {
                auto n = parse_positive(part);
                if (!n || *n > 1024) return fail("bad worker count '" + part + "' in --workers");
                opt.workers.push_back(static_cast<std::size_t>(*n));
            }
        } else if (arg == "--runs") {
            if (!take_value()) return fail("--runs needs a value");
            auto n = parse_positive(value);
            if (!n || *n > 100000) return fail("bad --runs '" + value + "'");
            opt.runs = static_cast<int>(*n);
        } else if (arg == "--only") {
            if (!take_value()) return fail("--only needs a value");
            opt.only.clear();
            for (const auto& name : split(value)) {
                bool found = std::any_of(known.begin(), known.end(), [&](const workload& w) { return w.name == name; });
                if (!found) return fail("unknown workload '" + name + "' in --only");
                opt.only.push_back(name);
            }
        } else {
            return fail("unknown argument '" + std::string(argv[i]) + "'");
        }
    }
    return opt;
}

// One warm-up run, then `runs` timed runs; every value is checked.
template <class F>
measurement measure(const char* runtime, const workload& w, std::size_t workers, int runs, F&& fn) {
    measurement m;
    m.present = true;
    std::vector<double> times;
    times.reserve(static_cast<std::size_t>(runs));
    for (int i = 0; i <= runs; ++i) {
        std::int64_t v = 0;
        const auto start = std::chrono::steady_clock::now();
        try {
            v = fn();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "FAILED: runtime=%s bench=%s workers=%zu threw: %s\n", runtime, w.name.c_str(),
                         workers, e.what());
            m.ok = false;
            break;
        }
        const auto stop = std::chrono::steady_clock::now();
        if (m.ok) m.value = v;
        if (v != w.expected) {
            if (m.ok)
                std::fprintf(stderr, "CHECK FAILED: runtime=%s bench=%s workers=%zu value=%lld expected=%lld\n",
                             runtime, w.name.c_str(), workers, static_cast<long long>(v),
                             static_cast<long long>(w.expected));
            m.ok = false;
        }
        if (i > 0) times.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
    if (!times.empty()) {
        std::sort(times.begin(), times.end());
        const std::size_t n = times.size();
        m.median_ms = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
        m.min_ms = times.front();
    }
    return m;
}

// Runs measure(workers) in a child process and returns its result, or
// nullopt if it failed (the reason is on stderr). Called before the parent
// starts any thread, so the fork is clean, and the child's memory is its
// own: not inflated by the parent's benchmark allocations, and with no
// memory freed by earlier workloads for it to reuse.
std::optional<long> in_child(const char* what, long (*measure)(std::size_t), std::size_t workers) {
    int fds[2];
    if (pipe(fds) != 0) {
        std::perror("aspen-bench: pipe");
        return std::nullopt;
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
        std::perror("aspen-bench: fork");
        close(fds[0]);
        close(fds[1]);
        return std::nullopt;
    }
    if (pid == 0) {
        close(fds[0]);
        long value = -1;
        try {
            value = measure(workers);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "FAILED: aspen %s child threw: %s\n", what, e.what());
        }
        const bool sent = value >= 0 && write(fds[1], &value, sizeof value) == static_cast<ssize_t>(sizeof value);
        std::fflush(nullptr);
        _exit(sent ? 0 : 1);
    }
    close(fds[1]);
    long value = -1;
    const ssize_t got = read(fds[0], &value, sizeof value);
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        std::perror("aspen-bench: waitpid");
        return std::nullopt;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != static_cast<ssize_t>(sizeof value)) {
        if (WIFSIGNALED(status))
            std::fprintf(stderr, "FAILED: aspen %s child killed by signal %d\n", what, WTERMSIG(status));
        else
            std::fprintf(stderr, "FAILED: aspen %s child gave no result\n", what);
        return std::nullopt;
    }
    return value;
}

aspen::config with_workers(std::size_t workers) {
    aspen::config cfg;
    cfg.workers = workers;
    return cfg;
}

// Peak RSS in KiB of a process that ran aspen fib(35); -1 if the value
// is wrong.
long fib35_peak_rss_kib(std::size_t workers) {
    constexpr int n = 35;
    constexpr std::int64_t fib_35 = 9227465;
    {
        aspen::runtime rt(with_workers(workers));
        const std::int64_t v = bench::aspen_fib(rt, n);
        if (v != fib_35) {
            std::fprintf(stderr, "CHECK FAILED: runtime=aspen bench=fib(35) rss child value=%lld expected=%lld\n",
                         static_cast<long long>(v), static_cast<long long>(fib_35));
            return -1;
        }
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;  // KiB on Linux
}

// Resident bytes per sleeping task of sleep_many; -1 if not every timer
// was armed and fired.
long sleep_many_bytes_per_task(std::size_t workers) {
    aspen::runtime rt(with_workers(workers));
    const std::int64_t bytes = bench::sleep_many_resident_bytes_per_task(rt);
    if (bytes < 0)
        std::fprintf(stderr,
                     "CHECK FAILED: runtime=aspen bench=sleep_many memory child: not every timer was armed before "
                     "the deadline (5 s; a loaded machine?) or fired\n");
    return bytes;
}

// Runs the Boost.Fiber variant of every workload in `results` that has one,
// at `workers`, in a child process (work_stealing can be set up only once
// per process: see fiber_pool.hpp), and returns its measurements in that
// order. Called before the parent starts any thread, so the fork is clean.
// If the child fails, every measurement it owed is marked failed.
std::vector<measurement> fiber_measurements(const std::vector<bench_results>& results, std::size_t workers,
                                            int runs) {
    static_assert(std::is_trivially_copyable_v<measurement>, "sent through a pipe as bytes");
    std::vector<const workload*> todo;
    for (const auto& r : results)
        if (r.w.fiber) todo.push_back(&r.w);
    std::vector<measurement> out(todo.size());
    for (auto& m : out) {
        m.present = true;
        m.ok = false;  // until the child reports
    }
    if (todo.empty()) return out;
    int fds[2];
    if (pipe(fds) != 0) {
        std::perror("aspen-bench: pipe");
        return out;
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
        std::perror("aspen-bench: fork");
        close(fds[0]);
        close(fds[1]);
        return out;
    }
    if (pid == 0) {
        close(fds[0]);
        int code = 0;
        {
            bench::fiber_pool pool(workers);
            for (const workload* w : todo) {
                const measurement m = measure("fiber", *w, workers, runs, [w] { return w->fiber(); });
                if (write(fds[1], &m, sizeof m) != static_cast<ssize_t>(sizeof m)) code = 1;
            }
        }  // the helper threads stop and are joined here
        close(fds[1]);
        std::fflush(nullptr);
        // _exit: the calling thread still belongs to work_stealing, whose
        // statics must not be torn down under it.
        _exit(code);
    }
    close(fds[1]);
    std::size_t got = 0;
    for (auto& m : out) {
        measurement in;
        if (read(fds[0], &in, sizeof in) != static_cast<ssize_t>(sizeof in)) break;
        m = in;
        ++got;
    }
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) std::perror("aspen-bench: waitpid");
    const bool child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!child_ok || got != out.size()) {
        std::fprintf(stderr, "FAILED: Boost.Fiber child at %zu worker%s (%s); %zu of %zu measurements received\n",
                     workers, workers == 1 ? "" : "s",
                     WIFSIGNALED(status) ? "killed by a signal" : "exited with an error", got, out.size());
        for (auto& m : out) m.ok = false;
    }
    return out;
}

std::string ms(const measurement& m) {
    if (!m.present) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", m.median_ms);
    return buf;
}

std::string ms_min(const measurement& m) {
    if (!m.present) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", m.min_ms);
    return buf;
}

std::string check(const char* label, const measurement& m) {
    return std::string(label) + ":" + (!m.present ? "-" : m.ok ? "ok" : "FAIL");
}

void print_csv_row(const char* runtime, const workload& w, std::size_t workers, const measurement& m) {
    if (!m.present) return;
    std::printf("%s,%s,%zu,%s,%.3f,%.3f,%lld,%s\n", runtime, w.name.c_str(), workers, w.param.c_str(), m.median_ms,
                m.min_ms, static_cast<long long>(m.value), m.ok ? "true" : "false");
}

// num's median / den's median, or "-" when either is missing.
std::string median_ratio(const measurement& num, const measurement& den) {
    if (!num.present || !den.present || den.median_ms <= 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", num.median_ms / den.median_ms);
    return buf;
}

// Requests per second of the median run.
std::string req_per_s(const workload& w, const measurement& m) {
    if (!m.present || m.median_ms <= 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", static_cast<double>(w.requests) / (m.median_ms / 1000.0));
    return buf;
}

// Network workloads against Asio, in requests/s (higher is better).
void print_network_table(const std::vector<bench_results>& results, const options& opt) {
    bool any = std::any_of(results.begin(), results.end(), [](const bench_results& r) { return r.w.asio != nullptr; });
    if (!any) return;
    std::printf("network: requests/s of the median run; ratio = aspen req/s / asio req/s, higher is better\n");
    std::printf("%-18s %-10s %7s %10s %10s %10s %10s %12s %12s %10s  %s\n", "bench", "param", "workers", "aspen med",
                "aspen min", "asio med", "asio min", "aspen req/s", "asio req/s", "aspen/asio", "check");
    for (const auto& r : results) {
        if (!r.w.asio) continue;
        for (std::size_t wi = 0; wi < opt.workers.size(); ++wi) {
            const measurement& a = r.aspen[wi];
            const measurement& p = r.asio[wi];
            const std::string ratio = median_ratio(p, a);  // req/s ratio: the inverse of the times'
            std::printf("%-18s %-10s %7zu %10s %10s %10s %10s %12s %12s %10s  %s\n", r.w.name.c_str(),
                        r.w.param.c_str(), opt.workers[wi], ms(a).c_str(), ms_min(a).c_str(), ms(p).c_str(),
                        ms_min(p).c_str(), req_per_s(r.w, a).c_str(), req_per_s(r.w, p).c_str(), ratio.c_str(),
                        (check("aspen", a) + " " + check("asio", p)).c_str());
        }
    }
    std::printf("\n");
}

// What spawning costs beyond the coroutine frames: the inline variant's
// time against aspen's at 1 worker, per spawned task; and the ratio to TBB
// at the largest worker count that the inline time alone, split perfectly
// over the workers, would give: no scheduler can beat that bound with
// these frames.
void print_spawn_cost(const bench_results& r, const options& opt) {
    const measurement& floor = r.inline_floor;
    if (!floor.present || !floor.ok) return;
    std::printf("aspen %s, every spawn awaited inline instead (the coroutine frames alone, one thread): %.2f ms",
                r.w.name.c_str(), floor.median_ms);
    for (std::size_t wi = 0; wi < opt.workers.size(); ++wi) {
        const measurement& a = r.aspen[wi];
        if (opt.workers[wi] != 1 || !a.ok || r.spawns_per_run < 1) continue;
        std::printf("; spawning adds %.1f ns per spawned task at 1 worker (%.0f spawns a run)",
                    (a.median_ms - floor.median_ms) * 1e6 / r.spawns_per_run, r.spawns_per_run);
    }
    for (std::size_t wi = opt.workers.size(); wi-- > 0;) {
        const measurement& t = r.tbb[wi];
        if (opt.workers[wi] < 2 || !t.present || !t.ok || t.median_ms <= 0) continue;
        std::printf("; free spawns and perfect scaling would give %.2fx TBB at %zu workers",
                    floor.median_ms / static_cast<double>(opt.workers[wi]) / t.median_ms, opt.workers[wi]);
        break;
    }
    std::printf("\n");
}

// aspen's runs of one workload on a runtime of its own; with `extras`
// (the first worker count, readable output) also its spawns per run and
// its inline floor (bench.hpp).
void measure_aspen(bench_results& r, std::size_t workers, bool extras, int runs) {
    aspen::runtime rt(with_workers(workers));
    r.aspen.push_back(measure("aspen", r.w, workers, runs, [&] { return r.w.aspen(rt); }));
    if (!extras || !r.aspen.back().ok) return;
    // measure() made runs + 1 runs (the warm-up too).
    r.spawns_per_run = static_cast<double>(rt.metrics().total().tasks_spawned) / (runs + 1);
    if (r.w.aspen_inline) r.inline_floor = measure("aspen inline", r.w, workers, runs, [&] { return r.w.aspen_inline(rt); });
}

// TBB's runs of one workload, in arenas of `workers` threads made for it.
measurement measure_tbb(const bench_results& r, std::size_t workers, int runs) {
    tbb::task_arena local(static_cast<int>(workers));
    tbb::task_arena remote(static_cast<int>(workers), 0);
    local.initialize();
    remote.initialize();
    bench::tbb_arenas arenas{local, remote};
    return measure("tbb", r.w, workers, runs, [&] { return r.w.tbb(arenas); });
}

}  // namespace

int main(int argc, char** argv) {
    int exit_code = 0;
    const std::optional<options> parsed = parse_args(argc, argv, exit_code);
    if (!parsed) return exit_code;
    const options& opt = *parsed;

    std::vector<bench_results> results;
    for (auto& w : all_workloads()) {
        if (!opt.only.empty() && std::find(opt.only.begin(), opt.only.end(), w.name) == opt.only.end()) continue;
        results.push_back(bench_results{std::move(w), {}, {}, {}, {}, {}, {}, 0});
    }
    const auto selected = [&](const char* name) {
        return std::any_of(results.begin(), results.end(), [&](const bench_results& r) { return r.w.name == name; });
    };
    const std::size_t max_workers = *std::max_element(opt.workers.begin(), opt.workers.end());

    // The host's state beside the table (host_check.cpp), before and after
    // the measurements; not in the CSV, whose columns are fixed.
    const std::string host_before = opt.csv ? std::string() : bench::host_check();

    // First, before any thread exists: the memory children.
    bool rss_failed = false, sleep_bytes_failed = false;
    std::optional<long> rss_kib, sleep_bytes;
    if (!opt.csv && selected("fib")) {
        rss_kib = in_child("fib(35) rss", &fib35_peak_rss_kib, max_workers);
        rss_failed = !rss_kib;
    }
    if (!opt.csv && selected("sleep_many")) {
        sleep_bytes = in_child("sleep_many memory", &sleep_many_bytes_per_task, max_workers);
        sleep_bytes_failed = !sleep_bytes;
    }

    // After the memory children, which would inherit what these allocate
    // (par_sort's keys alone are 16 MB): the values too costly to list.
    for (auto& r : results)
        if (r.w.expected_fn) r.w.expected = r.w.expected_fn();

    // Then, still before any thread exists: Boost.Fiber, one child process
    // per worker count.
    for (const std::size_t workers : opt.workers) {
        std::vector<measurement> fiber = fiber_measurements(results, workers, opt.runs);
        std::size_t next = 0;
        for (auto& r : results) r.fiber.push_back(r.w.fiber ? fiber[next++] : measurement{});
    }

    // TBB's pool defaults to hardware threads - 1 workers; the remote arena
    // needs `workers` of its own, so allow up to max_workers of them.
    tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism, max_workers + 1);

    // Each workload is measured at every worker count, on aspen and right
    // after on its peers, before the next workload: the two halves of a
    // ratio, and the worker counts of a speed-up, are measured back to
    // back, not with every other workload in between. This VM's speed
    // drifts (TBB's fib took 94 ms at 1 worker in some hours and 146 in
    // others while aspen's stayed), and the ratios moved with it. Each
    // runtime or pool is built for the one measurement and gone before the
    // next starts, so no idle peer's threads are left to spin meanwhile.
    const bool any_asio =
        std::any_of(results.begin(), results.end(), [](const bench_results& r) { return r.w.asio != nullptr; });
    for (auto& r : results) {
        for (std::size_t wi = 0; wi < opt.workers.size(); ++wi) {
            const std::size_t workers = opt.workers[wi];
            measure_aspen(r, workers, wi == 0 && !opt.csv, opt.runs);
            r.tbb.push_back(r.w.tbb ? measure_tbb(r, workers, opt.runs) : measurement{});
            if (!any_asio) continue;
            if (r.w.asio) {
                bench::asio_pool pool(workers);
                r.asio.push_back(measure("asio", r.w, workers, opt.runs, [&] { return r.w.asio(pool); }));
            } else {
                r.asio.emplace_back();
            }
        }
    }
    for (auto& r : results)
        if (r.w.serial) r.serial = measure("serial", r.w, 1, opt.runs, [&] { return r.w.serial(); });
    const std::string host_after = opt.csv ? std::string() : bench::host_check();

    bool all_ok = !rss_failed && !sleep_bytes_failed;
    for (const auto& r : results) {
        for (const auto& m : r.aspen) all_ok = all_ok && m.ok;
        for (const auto& m : r.tbb) all_ok = all_ok && m.ok;
        for (const auto& m : r.asio) all_ok = all_ok && m.ok;
        for (const auto& m : r.fiber) all_ok = all_ok && m.ok;
        all_ok = all_ok && r.serial.ok && r.inline_floor.ok;
    }

    if (opt.csv) {
        std::printf("runtime,bench,workers,param,median_ms,min_ms,value,ok\n");
        for (const auto& r : results) {
            for (std::size_t wi = 0; wi < opt.workers.size(); ++wi) print_csv_row("aspen", r.w, opt.workers[wi], r.aspen[wi]);
            for (std::size_t wi = 0; wi < opt.workers.size(); ++wi) print_csv_row("tbb", r.w, opt.workers[wi], r.tbb[wi]);
            for (std::size_t wi = 0; wi < r.asio.size(); ++wi) print_csv_row("asio", r.w, opt.workers[wi], r.asio[wi]);
            for (std::size_t wi = 0; wi < r.fiber.size(); ++wi) print_csv_row("fiber", r.w, opt.workers[wi], r.fiber[wi]);
            print_csv_row("serial", r.w, 1, r.serial);
        }
        return all_ok ? 0 : 1;
    }

    std::printf("aspen-bench: median and min of %d run%s after one warm-up, times in ms\n", opt.runs,
                opt.runs == 1 ? "" : "s");
    std::printf("%s, before the runs\n%s, after them\n\n", host_before.c_str(), host_after.c_str());
    const bool any_compute = std::any_of(results.begin(), results.end(), [](const bench_results& r) { return !r.w.asio; });
    if (any_compute)
        std::printf("%-18s %-10s %7s %10s %10s %10s %10s %10s %10s %9s %11s  %s\n", "bench", "param", "workers",
                    "aspen med", "aspen min", "tbb med", "tbb min", "fiber med", "serial", "aspen/tbb", "aspen/fiber",
                    "check");
    for (const auto& r : results) {
        if (r.w.asio) continue;  // in the network table below
        for (std::size_t wi = 0; wi < opt.workers.size(); ++wi) {
            const measurement& a = r.aspen[wi];
            const measurement& t = r.tbb[wi];
            const measurement& f = r.fiber[wi];
            const std::string checks = check("aspen", a) + " " + check("tbb", t) + " " + check("fiber", f) + " " +
                                       check("serial", r.serial);
            std::printf("%-18s %-10s %7zu %10s %10s %10s %10s %10s %10s %9s %11s  %s\n", r.w.name.c_str(),
                        r.w.param.c_str(), opt.workers[wi], ms(a).c_str(), ms_min(a).c_str(), ms(t).c_str(),
                        ms_min(t).c_str(), ms(f).c_str(), ms(r.serial).c_str(), median_ratio(a, t).c_str(),
                        median_ratio(a, f).c_str(), checks.c_str());
        }
    }
    if (any_compute) std::printf("\n");
    print_network_table(results, opt);

    for (const auto& r : results) {
        if (r.w.name != "fib") continue;
        const measurement* one = nullptr;
        const measurement* two = nullptr;
        for (std::size_t wi = 0; wi < opt.workers.size(); ++wi) {
            if (opt.workers[wi] == 1) one = &r.aspen[wi];
            if (opt.workers[wi] == 2) two = &r.aspen[wi];
        }
        if (one && two && one->ok && two->ok && two->median_ms > 0)
            std::printf("aspen fib(%s) speed-up 1 -> 2 workers: %.2fx (median %.2f ms -> %.2f ms)\n",
                        r.w.param.c_str(), one->median_ms / two->median_ms, one->median_ms, two->median_ms);
    }
    for (const auto& r : results) print_spawn_cost(r, opt);
    if (rss_kib)
        std::printf("aspen fib(35) peak RSS (child process, %zu worker%s): %.1f MB\n", max_workers,
                    max_workers == 1 ? "" : "s", static_cast<double>(*rss_kib) / 1024.0);
    else if (rss_failed)
        std::printf("aspen fib(35) peak RSS: FAILED (see stderr)\n");
    if (sleep_bytes)
        std::printf("aspen sleep_many: %ld bytes of resident memory per sleeping task (child process, %zu worker%s)\n",
                    *sleep_bytes, max_workers, max_workers == 1 ? "" : "s");
    else if (sleep_bytes_failed)
        std::printf("aspen sleep_many memory: FAILED (see stderr)\n");
    for (const auto& [key, line] : notes) std::printf("%s\n", line.c_str());

    if (!all_ok) std::printf("\nSOME CHECKS FAILED\n");
    return all_ok ? 0 : 1;
}
