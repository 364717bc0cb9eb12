// yield_many: 1,000 tasks each yield 1,000 times; every yield puts the task
// behind all other ready work. TBB has no cooperative yield, so this one is
// aspen only.
#include "bench.hpp"

#include <string>
#include <vector>

namespace bench {
namespace {

constexpr int tasks = 1000;
constexpr int yields = 1000;

aspen::task<std::int64_t> yielder(int n) {
    std::int64_t done = 0;
    for (int i = 0; i < n; ++i) {
        co_await aspen::yield_now();
        ++done;
    }
    co_return done;
}

aspen::task<std::int64_t> yield_many(int n_tasks, int n_yields) {
    std::vector<aspen::join_handle<std::int64_t>> handles;
    handles.reserve(static_cast<std::size_t>(n_tasks));
    for (int i = 0; i < n_tasks; ++i) handles.push_back(aspen::spawn(yielder(n_yields)));
    std::int64_t total = 0;
    for (auto& h : handles) total += co_await h;
    co_return total;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(yield_many(tasks, yields)); }

}  // namespace

workload yield_many_workload() {
    return {"yield_many", std::to_string(tasks) + "x" + std::to_string(yields),
            std::int64_t{tasks} * yields, &run_aspen, nullptr, nullptr};
}

}  // namespace bench
