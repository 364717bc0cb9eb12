// aspen::broadcast_channel: every receiver gets every value, lagging
// receivers are told how many they missed, closing, values coming back
// with no receiver, value lifetimes, cancel safety under random aborts and
// the coop budget.
#include <aspen/aspen.hpp>
#include <aspen/sync/broadcast.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::any_runtime;
using aspen_test::within;

#ifdef ASPEN_SANITIZED
constexpr int per_producer = 500;
#else
constexpr int per_producer = 5000;
#endif

TEST(SyncBroadcast, TryRecvOrderLagAndClose) {
    auto [tx, rx] = aspen::broadcast_channel<int>(4);
    auto rx2 = tx.subscribe();
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(tx.send(i).has_value());
    for (int i = 0; i < 3; ++i) {
        auto r = rx.try_recv();
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(*r, i);
    }
    EXPECT_EQ(rx.try_recv().status(), aspen::broadcast_status::empty);
    // rx2 read nothing; 7 more sends overwrite 6 of its 10 values.
    for (int i = 3; i < 10; ++i) EXPECT_FALSE(tx.send(i).has_value());
    EXPECT_EQ(rx2.pending(), 10u);
    auto lag = rx2.try_recv();
    EXPECT_EQ(lag.status(), aspen::broadcast_status::lagged);
    EXPECT_EQ(lag.lagged(), 6u);
    for (int i = 6; i < 10; ++i) EXPECT_EQ(*rx2.try_recv(), i);
    EXPECT_EQ(rx2.try_recv().status(), aspen::broadcast_status::empty);
    // A late subscriber starts at the next send.
    auto late = rx.resubscribe();
    EXPECT_EQ(late.pending(), 0u);
    EXPECT_FALSE(tx.send(10).has_value());
    {
        auto sender_copy = tx;
        aspen::broadcast_sender<int> gone = std::move(tx);
    }  // every sender is gone now
    EXPECT_EQ(*late.try_recv(), 10);
    EXPECT_TRUE(late.try_recv().closed());
    // rx still had 3..10 to read; the ring keeps 7..10, readable after the close.
    auto r = rx.try_recv();
    EXPECT_EQ(r.status(), aspen::broadcast_status::lagged);  // 3..6 were overwritten
    EXPECT_EQ(r.lagged(), 4u);
    for (int i = 7; i <= 10; ++i) EXPECT_EQ(*rx.try_recv(), i);
    EXPECT_TRUE(rx.try_recv().closed());
}

TEST(SyncBroadcast, SendWithNoReceiverGivesTheValueBack) {
    auto [tx, rx] = aspen::broadcast_channel<std::string>(2);
    { auto drop = std::move(rx); }
    EXPECT_EQ(tx.receiver_count(), 0u);
    auto back = tx.send("kept");
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, "kept");
    auto rx2 = tx.subscribe();
    EXPECT_EQ(tx.receiver_count(), 1u);
    EXPECT_EQ(rx2.try_recv().status(), aspen::broadcast_status::empty);  // it was not kept
}

TEST(SyncBroadcast, ValuesAreReleasedOnceEveryReceiverReadThem) {
    auto [tx, rx] = aspen::broadcast_channel<std::shared_ptr<int>>(8);
    auto rx2 = tx.subscribe();
    auto payload = std::make_shared<int>(1);
    std::weak_ptr<int> watch = payload;
    EXPECT_FALSE(tx.send(std::move(payload)).has_value());
    { auto r = rx.try_recv(); }
    EXPECT_FALSE(watch.expired());  // rx2 has not read it
    {
        auto r = rx2.try_recv();
        EXPECT_EQ(watch.use_count(), 1);  // the last reader got it moved, not copied
    }
    EXPECT_TRUE(watch.expired());
    // A receiver dropped unread releases its claim too.
    auto p2 = std::make_shared<int>(2);
    std::weak_ptr<int> watch2 = p2;
    EXPECT_FALSE(tx.send(std::move(p2)).has_value());
    { auto r = rx.try_recv(); }
    { auto drop = std::move(rx2); }
    EXPECT_TRUE(watch2.expired());
}

TEST(SyncBroadcast, Misuse) {
    EXPECT_THROW((void)aspen::broadcast_channel<int>(0), std::invalid_argument);
    auto [tx, rx] = aspen::broadcast_channel<int>(1);
    auto moved = std::move(rx);
    EXPECT_THROW((void)rx.try_recv(), std::logic_error);
    EXPECT_THROW((void)rx.recv(), std::logic_error);
    auto tmoved = std::move(tx);
    EXPECT_THROW((void)tx.send(1), std::logic_error);
    EXPECT_THROW((void)tx.subscribe(), std::logic_error);
}

struct tally {
    std::uint64_t sum = 0;
    std::uint64_t received = 0;
    std::uint64_t missed = 0;
    bool in_order = true;
};

// Reads to the end of the stream. Values of one producer must arrive in
// increasing order.
aspen::task<tally> consume(aspen::broadcast_receiver<std::uint64_t> rx, int producers) {
    tally t;
    std::vector<std::int64_t> last(static_cast<std::size_t>(producers), -1);
    for (;;) {
        auto r = co_await rx.recv();
        if (r.closed()) break;
        if (r.lagged()) {
            t.missed += r.lagged();
            continue;
        }
        std::uint64_t v = *r;
        auto p = static_cast<std::size_t>(v / per_producer);
        auto seq = static_cast<std::int64_t>(v % per_producer);
        if (seq <= last[p]) t.in_order = false;
        last[p] = seq;
        t.sum += v;
        ++t.received;
    }
    co_return t;
}

aspen::task<void> produce(aspen::broadcast_sender<std::uint64_t> tx, int p) {
    for (int i = 0; i < per_producer; ++i) {
        if (tx.send(static_cast<std::uint64_t>(p) * per_producer + i).has_value())
            throw std::runtime_error("send came back with receivers alive");
        if (i % 64 == 0) co_await aspen::yield_now();
    }
}

aspen::task<std::vector<tally>> fan_out(std::size_t capacity, int producers, int consumers) {
    auto [tx, rx] = aspen::broadcast_channel<std::uint64_t>(capacity);
    std::vector<aspen::join_handle<tally>> cs;
    for (int c = 1; c < consumers; ++c) cs.push_back(aspen::spawn(consume(tx.subscribe(), producers)));
    cs.push_back(aspen::spawn(consume(std::move(rx), producers)));
    std::vector<aspen::join_handle<void>> ps;
    for (int p = 0; p < producers; ++p) ps.push_back(aspen::spawn(produce(tx, p)));
    { auto drop = std::move(tx); }  // the producers hold the only senders now
    for (auto& h : ps) co_await h;
    std::vector<tally> out;
    for (auto& h : cs) out.push_back(co_await h);
    co_return out;
}

class SyncBroadcast : public ::testing::TestWithParam<int> {};

// Every receiver accounts for every value exactly once: received or missed
// (reported as a lag). With a ring as large as everything sent, none is missed.
TEST_P(SyncBroadcast, EveryValueReceivedOrReportedMissed) {
    any_runtime rt(GetParam());
    constexpr int producers = 3, consumers = 4;
    const std::uint64_t total = static_cast<std::uint64_t>(producers) * per_producer;
    const std::uint64_t full_sum = total * (total - 1) / 2;
    for (std::size_t capacity : {std::size_t{16}, static_cast<std::size_t>(total)}) {
        std::vector<tally> ts;
        within(120s, "broadcast fan-out", [&] { ts = rt->block_on(fan_out(capacity, producers, consumers)); });
        ASSERT_EQ(ts.size(), static_cast<std::size_t>(consumers));
        for (const tally& t : ts) {
            EXPECT_EQ(t.received + t.missed, total) << "capacity " << capacity;
            EXPECT_TRUE(t.in_order);
            if (capacity == total) {
                EXPECT_EQ(t.missed, 0u);
                EXPECT_EQ(t.sum, full_sum);
            }
        }
    }
}

aspen::task<void> recv_one(aspen::broadcast_receiver<int>* rx, std::atomic<int>* got) {
    auto r = co_await rx->recv();
    if (r.has_value()) got->fetch_add(1);
}

// Receivers whose tasks are aborted at random moments: every value is still
// received by the receiver (in a later task), none lost or duplicated.
struct storm_result {
    std::vector<std::uint64_t> counts;  // per receiver: values received in all
    int cancelled_waits = 0;            // aborts that hit a task still waiting
};

aspen::task<storm_result> abort_storm(int receivers, unsigned seed) {
    std::mt19937 rng(seed);
    storm_result out;
    auto [tx, first] = aspen::broadcast_channel<int>(static_cast<std::size_t>(per_producer));
    std::vector<aspen::broadcast_receiver<int>> rxs;
    for (int i = 1; i < receivers; ++i) rxs.push_back(tx.subscribe());
    rxs.push_back(std::move(first));
    std::vector<std::atomic<int>> got(static_cast<std::size_t>(receivers));
    std::vector<aspen::join_handle<void>> waiting(static_cast<std::size_t>(receivers));
    for (int i = 0; i < per_producer; ++i) {
        for (int k = 0; k < receivers; ++k) {
            auto& h = waiting[static_cast<std::size_t>(k)];
            if (!h.valid() || h.is_finished()) h = aspen::spawn(recv_one(&rxs[static_cast<std::size_t>(k)], &got[static_cast<std::size_t>(k)]));
            else if (rng() % 3 == 0) {
                h.abort();  // cancelled mid-wait (or just completed): the next task goes on
                try {
                    co_await h;
                } catch (const aspen::task_cancelled&) {
                    ++out.cancelled_waits;
                }
                h = aspen::spawn(recv_one(&rxs[static_cast<std::size_t>(k)], &got[static_cast<std::size_t>(k)]));
            }
        }
        if (rng() % 2) co_await aspen::yield_now();
        if (tx.send(i).has_value()) throw std::runtime_error("value came back");
    }
    { auto drop = std::move(tx); }  // waits with nothing left to read end with "closed"
    for (auto& h : waiting) {
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
        }
    }
    for (int k = 0; k < receivers; ++k) {
        auto& rx = rxs[static_cast<std::size_t>(k)];
        std::uint64_t n = static_cast<std::uint64_t>(got[static_cast<std::size_t>(k)].load());
        while (rx.try_recv().has_value()) ++n;  // what no task took yet
        out.counts.push_back(n);
    }
    co_return out;
}

TEST_P(SyncBroadcast, AbortedReceiversLoseNothing) {
    any_runtime rt(GetParam());
    storm_result r;
    within(120s, "broadcast abort storm", [&] { r = rt->block_on(abort_storm(3, 99u + GetParam())); });
    EXPECT_GT(r.cancelled_waits, 0);
    ASSERT_EQ(r.counts.size(), 3u);
    for (std::uint64_t n : r.counts) EXPECT_EQ(n, static_cast<std::uint64_t>(per_producer));
}

TEST(SyncBroadcast, ReadyRecvsSpendTheCoopBudget) {
    auto ch = aspen::broadcast_channel<int>(128);
    for (int i = 0; i < 100; ++i) (void)ch.first.send(i);
    auto& rx = ch.second;
    int seen_at = aspen_test::coop_yield_point([&](int i) -> aspen::task<bool> {
        auto r = co_await rx.recv();
        co_return r.has_value() && *r == i;
    });
    EXPECT_GE(seen_at, 0) << "-2: wrong value; -1: the loop never yielded";
    EXPECT_LT(seen_at, 100);
}

INSTANTIATE_TEST_SUITE_P(Runtimes, SyncBroadcast, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
