// mutex: 16 tasks each increment one shared counter 100,000 times, taking
// the async mutex for every increment (aspen::mutex, boost::fibers::mutex).
// The value checked is the counter: 16 * 100,000.
#include "bench.hpp"
#include "fiber_pool.hpp"

#include <boost/fiber/fiber.hpp>
#include <boost/fiber/mutex.hpp>

#include <mutex>
#include <string>
#include <vector>

namespace bench {
namespace {

constexpr int tasks = 16;
constexpr int increments = 100'000;

aspen::task<void> increment(aspen::mutex& m, std::int64_t& counter, int n) {
    for (int i = 0; i < n; ++i) {
        aspen::mutex_guard g = co_await m.lock();
        ++counter;
    }
}

aspen::task<std::int64_t> contend() {
    aspen::mutex m;
    std::int64_t counter = 0;
    std::vector<aspen::join_handle<void>> handles;
    handles.reserve(tasks);
    for (int t = 0; t < tasks; ++t) handles.push_back(aspen::spawn(increment(m, counter, increments)));
    for (auto& h : handles) co_await h;
    // The joins order every increment before this read.
    co_return counter;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(contend()); }

std::int64_t run_fiber() {
    std::int64_t counter = 0;
    boost::fibers::fiber root([&counter] {
        boost::fibers::mutex m;
        std::vector<boost::fibers::fiber> fibers;
        fibers.reserve(tasks);
        for (int t = 0; t < opaque(tasks); ++t)
            fibers.emplace_back([&m, &counter] {
                for (int i = 0; i < increments; ++i) {
                    std::lock_guard g(m);
                    ++counter;
                }
            });
        for (auto& f : fibers) f.join();
    });
    root.join();
    return counter;
}

}  // namespace

workload mutex_workload() {
    return {"mutex",    std::to_string(tasks) + "x" + std::to_string(increments),
            std::int64_t{tasks} * increments,
            &run_aspen, nullptr, nullptr, &run_fiber};
}

}  // namespace bench
