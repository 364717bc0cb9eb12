// aspen-bench: the Boost.Fiber peer's threads (see fiber_pool.hpp).
#include "fiber_pool.hpp"

#include <boost/fiber/algo/work_stealing.hpp>
#include <boost/fiber/operations.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace bench {

namespace {
void join_work_stealing(std::size_t workers) {
    // Blocks until all `workers` threads have called it (work_stealing's
    // constructor waits on a barrier). suspend = false, Boost's default: an
    // idle thread keeps looking for work instead of sleeping (no wake-up
    // latency, but it burns its core; compare runs made at low load).
    boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(
        static_cast<std::uint32_t>(workers));
}
}  // namespace

fiber_pool::fiber_pool(std::size_t workers) {
    helpers_.reserve(workers - 1);
    for (std::size_t i = 1; i < workers; ++i) helpers_.emplace_back([this, workers] { helper(workers); });
    join_work_stealing(workers);
}

fiber_pool::~fiber_pool() {
    {
        std::unique_lock lock(m_);
        stop_ = true;
    }
    stop_cv_.notify_all();
    for (auto& t : helpers_) t.join();
}

void fiber_pool::helper(std::size_t workers) {
    join_work_stealing(workers);
    // The thread's main fiber waits here; while it does, the thread's
    // dispatcher runs the fibers it steals. Main fibers are pinned, so this
    // one resumes on this thread and the thread ends normally.
    std::unique_lock lock(m_);
    stop_cv_.wait(lock, [this] { return stop_; });
}

void fiber_failed(const char* what) {
    std::fprintf(stderr, "FAILED: fiber peer: %s\n", what);
    std::fflush(stderr);
    std::abort();
}

}  // namespace bench
