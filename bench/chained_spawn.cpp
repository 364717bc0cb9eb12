// chained_spawn: 1,000 chains of 1,000 tasks; each task spawns the next one
// of its chain and ends without waiting for it. The last task of each chain
// counts down a latch the root task awaits.
#include "bench.hpp"

#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <string>

namespace bench {
namespace {

constexpr int chains = 1000;
constexpr int chain_length = 1000;

struct chain_state {
    std::atomic<std::int64_t> ran{0};
    countdown chains_left{chains};
};

aspen::task<void> link(int left, chain_state& s) {
    s.ran.fetch_add(1, std::memory_order_relaxed);
    if (left > 1)
        aspen::spawn(link(left - 1, s)).detach();
    else
        s.chains_left.arrive();
    co_return;
}

aspen::task<std::int64_t> chained(chain_state& s) {
    for (int c = 0; c < chains; ++c) aspen::spawn(link(chain_length, s)).detach();
    co_await s.chains_left.wait();
    co_return s.ran.load(std::memory_order_relaxed);
}

std::int64_t run_aspen(aspen::runtime& rt) {
    chain_state s;
    return rt.block_on(chained(s));
}

void tbb_link(tbb::task_group& tg, int left, std::atomic<std::int64_t>& ran) {
    ran.fetch_add(1, std::memory_order_relaxed);
    if (left > 1) tg.run([&tg, left, &ran] { tbb_link(tg, left - 1, ran); });
}

std::int64_t run_tbb(tbb_arenas& arenas) {
    return arenas.local.execute([] {
        std::atomic<std::int64_t> ran{0};
        tbb::task_group tg;
        const int n = opaque(chains);
        for (int c = 0; c < n; ++c) tg.run([&tg, &ran] { tbb_link(tg, chain_length, ran); });
        tg.wait();
        return ran.load(std::memory_order_relaxed);
    });
}

}  // namespace

workload chained_spawn_workload() {
    return {"chained_spawn", std::to_string(chains) + "x" + std::to_string(chain_length),
            std::int64_t{chains} * chain_length, &run_aspen, &run_tbb, nullptr};
}

}  // namespace bench
