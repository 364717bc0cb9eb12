// Tests for aspen::detail::injector: FIFO semantics single-threaded, and
// concurrent MPMC exactly-once with per-producer FIFO order.

#include "scheduler/injector.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace {

struct node {
    node* queue_next = nullptr;
    std::uint32_t id = 0;
    // Plain data written by the producer before pushing and checked/rewritten
    // by the consumer: ThreadSanitizer checks the hand-over through the lock.
    std::uint64_t payload = 0;
};

using injector = aspen::detail::injector<node>;

#if defined(ASPEN_SANITIZED)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif

std::vector<node> make_nodes(std::size_t n) {
    std::vector<node> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i].id = static_cast<std::uint32_t>(i);
    return v;
}

// Links nodes[from, to) through queue_next; returns {first, last}.
std::pair<node*, node*> link_range(std::vector<node>& nodes, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i + 1 < to; ++i) nodes[i].queue_next = &nodes[i + 1];
    nodes[to - 1].queue_next = reinterpret_cast<node*>(0x1);  // push_batch must terminate it
    return {&nodes[from], &nodes[to - 1]};
}

TEST(Injector, EmptyInjector) {
    injector inj;
    EXPECT_TRUE(inj.is_empty());
    EXPECT_EQ(inj.len(), 0u);
    EXPECT_EQ(inj.pop(), nullptr);
    node* out[4];
    EXPECT_EQ(inj.pop_batch(out, 4), 0u);
    std::size_t n = 99;
    EXPECT_EQ(inj.take_all(n), nullptr);
    EXPECT_EQ(n, 0u);
    inj.push_batch(nullptr, nullptr, 0);
    EXPECT_TRUE(inj.is_empty());
}

TEST(Injector, FifoAcrossPushAndPushBatch) {
    auto nodes = make_nodes(10);
    injector inj;
    inj.push(&nodes[0]);
    auto [f, l] = link_range(nodes, 1, 5);
    inj.push_batch(f, l, 4);
    inj.push(&nodes[5]);
    EXPECT_EQ(inj.len(), 6u);
    EXPECT_FALSE(inj.is_empty());

    EXPECT_EQ(inj.pop(), &nodes[0]);
    EXPECT_EQ(nodes[0].queue_next, nullptr);
    node* out[3] = {};
    ASSERT_EQ(inj.pop_batch(out, 3), 3u);
    EXPECT_EQ(out[0], &nodes[1]);
    EXPECT_EQ(out[1], &nodes[2]);
    EXPECT_EQ(out[2], &nodes[3]);
    EXPECT_EQ(inj.len(), 2u);

    // pop_batch with more room than tasks, then refill the emptied list.
    node* out2[8] = {};
    ASSERT_EQ(inj.pop_batch(out2, 8), 2u);
    EXPECT_EQ(out2[0], &nodes[4]);
    EXPECT_EQ(out2[1], &nodes[5]);
    EXPECT_TRUE(inj.is_empty());
    EXPECT_EQ(inj.pop(), nullptr);

    inj.push(&nodes[6]);
    auto [f2, l2] = link_range(nodes, 7, 10);
    inj.push_batch(f2, l2, 3);
    EXPECT_EQ(inj.len(), 4u);
    std::size_t n = 0;
    node* all = inj.take_all(n);
    EXPECT_EQ(n, 4u);
    EXPECT_TRUE(inj.is_empty());
    EXPECT_EQ(inj.pop(), nullptr);
    std::vector<node*> got;
    for (node* p = all; p != nullptr; p = p->queue_next) got.push_back(p);
    ASSERT_EQ(got.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], &nodes[6 + i]);

    // Usable again after take_all.
    inj.push(&nodes[0]);
    EXPECT_EQ(inj.pop(), &nodes[0]);
    EXPECT_TRUE(inj.is_empty());
}

TEST(Injector, SingleElementBatch) {
    auto nodes = make_nodes(2);
    injector inj;
    nodes[0].queue_next = &nodes[1];  // stale link must be cut
    inj.push_batch(&nodes[0], &nodes[0], 1);
    EXPECT_EQ(nodes[0].queue_next, nullptr);
    EXPECT_EQ(inj.len(), 1u);
    EXPECT_EQ(inj.pop(), &nodes[0]);
    EXPECT_EQ(inj.pop(), nullptr);
}

// P producers push ids p * per_producer + seq in increasing seq, mixing push
// and push_batch; C consumers pop with pop and pop_batch. Checks every id is
// taken exactly once and every consumer sees each producer's ids in
// increasing order (a FIFO queue guarantees that for any number of
// consumers, since one consumer's pops are ordered).
void run_mpmc(int producers, int consumers, std::uint32_t per_producer, std::uint64_t seed) {
    const std::uint32_t total_items = per_producer * static_cast<std::uint32_t>(producers);
    auto nodes = make_nodes(total_items);
    std::unique_ptr<std::atomic<std::uint32_t>[]> taken(new std::atomic<std::uint32_t>[total_items]);
    for (std::uint32_t i = 0; i < total_items; ++i) taken[i].store(0, std::memory_order_relaxed);
    std::atomic<std::uint64_t> consumed{0};
    std::atomic<std::uint64_t> order_violations{0};
    std::atomic<std::uint64_t> bad_batches{0};
    std::atomic<std::uint64_t> batch_pops{0};
    injector inj;

    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
            std::mt19937_64 rng(seed + static_cast<std::uint64_t>(p));
            std::size_t i = static_cast<std::size_t>(p) * per_producer;
            const std::size_t end = i + per_producer;
            while (i < end) {
                std::size_t k = 1 + rng() % 16;
                if (k > end - i) k = end - i;
                for (std::size_t j = i; j < i + k; ++j) nodes[j].payload = nodes[j].id * 5ull + 2;
                if (k == 1 && rng() % 2 == 0) {
                    inj.push(&nodes[i]);
                } else {
                    auto [f, l] = link_range(nodes, i, i + k);
                    inj.push_batch(f, l, k);
                }
                i += k;
            }
        });
    }
    for (int c = 0; c < consumers; ++c) {
        threads.emplace_back([&, c] {
            std::mt19937_64 rng(seed * 31 + static_cast<std::uint64_t>(c));
            std::vector<std::int64_t> last_seen(static_cast<std::size_t>(producers), -1);
            auto take = [&](node* t) {
                if (t->queue_next != nullptr) bad_batches.fetch_add(1, std::memory_order_relaxed);
                if (t->payload != t->id * 5ull + 2) bad_batches.fetch_add(1, std::memory_order_relaxed);
                t->payload = 0;
                taken[t->id].fetch_add(1, std::memory_order_relaxed);
                const std::size_t p = t->id / per_producer;
                const std::int64_t seq = t->id % per_producer;
                if (seq <= last_seen[p]) order_violations.fetch_add(1, std::memory_order_relaxed);
                last_seen[p] = seq;
                consumed.fetch_add(1, std::memory_order_relaxed);
            };
            node* out[32];
            while (consumed.load(std::memory_order_relaxed) < total_items) {
                if (rng() % 2 == 0) {
                    if (node* t = inj.pop()) {
                        take(t);
                        continue;
                    }
                } else {
                    const std::size_t max = 1 + rng() % 32;
                    const std::size_t k = inj.pop_batch(out, max);
                    if (k > max) bad_batches.fetch_add(1, std::memory_order_relaxed);
                    if (k > 0) batch_pops.fetch_add(1, std::memory_order_relaxed);
                    for (std::size_t i = 0; i < k; ++i) take(out[i]);
                    if (k > 0) continue;
                }
                std::this_thread::yield();
            }
        });
    }
    for (auto& t : threads) t.join();

    EXPECT_EQ(consumed.load(), total_items);
    std::uint64_t bad = 0;
    for (std::uint32_t i = 0; i < total_items; ++i)
        if (taken[i].load(std::memory_order_relaxed) != 1) ++bad;
    EXPECT_EQ(bad, 0u) << "ids not taken exactly once";
    EXPECT_EQ(order_violations.load(), 0u) << "per-producer FIFO order violated";
    EXPECT_EQ(bad_batches.load(), 0u);
    EXPECT_GT(batch_pops.load(), 0u);
    EXPECT_TRUE(inj.is_empty());
    EXPECT_EQ(inj.len(), 0u);
}

const std::uint32_t per_producer = sanitized ? 25'000 : 500'000;

TEST(Injector, MpmcFourProducersFourConsumers) { run_mpmc(4, 4, per_producer, 1); }

TEST(Injector, MpmcFourProducersOneConsumerIsFifoPerProducer) { run_mpmc(4, 1, per_producer, 2); }

TEST(Injector, ConcurrentLenNeverExceedsPushed) {
    // len() read without the lock stays within [0, total] and is 0 at the end.
    const std::uint32_t n = sanitized ? 20'000 : 400'000;
    auto nodes = make_nodes(n);
    injector inj;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> bad{0};
    std::thread reader([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            const std::size_t l = inj.len();
            if (l > n) bad.fetch_add(1);
        }
    });
    std::thread producer([&] {
        for (std::uint32_t i = 0; i < n; ++i) inj.push(&nodes[i]);
    });
    std::uint32_t got = 0;
    while (got < n) {
        if (inj.pop() != nullptr) {
            ++got;
        } else {
            std::this_thread::yield();
        }
    }
    producer.join();
    stop.store(true);
    reader.join();
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_TRUE(inj.is_empty());
}

}  // namespace
