// aspen::mpsc_channel / unbounded_channel: exactly-once, per-producer FIFO
// delivery under 1, 2 and 8 workers and capacities 1, 16, 1024; back-pressure;
// end of stream; closed channels give values back; cancel safety of send
// (never half-sent) and recv (no message lost).
#include <aspen/aspen.hpp>
#include <aspen/sync/mpsc.hpp>

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;

using aspen_test::workers;

#ifdef ASPEN_SANITIZED
constexpr std::uint32_t kPerProducer = 10000;
constexpr std::uint32_t kUnboundedPerProducer = 2000;
#else
constexpr std::uint32_t kPerProducer = 100000;
constexpr std::uint32_t kUnboundedPerProducer = 20000;
#endif
constexpr std::uint32_t kProducers = 8;

struct msg {
    std::uint32_t producer;
    std::uint32_t seq;
};

// ---- basics --------------------------------------------------------------

TEST(SyncMpsc, TrySendRespectsCapacityAndOrder) {
    auto [tx, rx] = aspen::mpsc_channel<int>(2);
    EXPECT_EQ(tx.capacity(), 2u);
    EXPECT_FALSE(tx.try_send(1).has_value());
    EXPECT_FALSE(tx.try_send(2).has_value());
    auto back = tx.try_send(3);  // full
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, 3);
    EXPECT_FALSE(tx.is_closed());
    EXPECT_EQ(rx.size(), 2u);
    EXPECT_EQ(rx.try_recv(), std::optional<int>(1));
    EXPECT_FALSE(tx.try_send(3).has_value());
    EXPECT_EQ(rx.try_recv(), std::optional<int>(2));
    EXPECT_EQ(rx.try_recv(), std::optional<int>(3));
    EXPECT_FALSE(rx.try_recv().has_value());
    EXPECT_THROW((void)aspen::mpsc_channel<int>(0), std::invalid_argument);
}

// The receiver's batch (see mpsc.hpp): whatever mix of sends and
// receives, the unreceived messages never exceed the capacity, and the
// rooms the batch holds back are fewer than a batch. Messages stay in
// order and size() counts the batch.
TEST(SyncMpsc, ReceiverBatchKeepsTheCapacityBoundAndGivesRoomsBack) {
    for (std::size_t capacity : {32, 64, 100, 1024}) {
        const std::size_t batch = aspen::detail::sync::chan<int>::batch_for(capacity);
        ASSERT_GE(batch, 2u) << capacity;
        auto [tx, rx] = aspen::mpsc_channel<int>(capacity);
        std::mt19937 rng(static_cast<unsigned>(capacity));
        int sent = 0, received = 0;
        for (int round = 0; round < 2000; ++round) {
            while (!tx.try_send(sent).has_value()) ++sent;
            const auto unreceived = static_cast<std::size_t>(sent - received);
            ASSERT_LE(unreceived, capacity) << "round " << round;
            ASSERT_GE(unreceived, capacity - (batch - 1)) << "round " << round;
            ASSERT_EQ(rx.size(), unreceived);
            for (auto k = rng() % (2 * batch + 1); k != 0; --k) {
                std::optional<int> v = rx.try_recv();
                ASSERT_TRUE(v.has_value());
                ASSERT_EQ(*v, received++);
            }
        }
        while (std::optional<int> v = rx.try_recv()) ASSERT_EQ(*v, received++);
        EXPECT_EQ(received, sent);
        EXPECT_EQ(rx.size(), 0u);
    }
}

TEST(SyncMpsc, SenderCountTracksCopiesAndDrops) {
    auto [tx, rx] = aspen::mpsc_channel<int>(4);
    EXPECT_EQ(rx.sender_count(), 1u);
    {
        auto a = tx;
        auto b = a;
        EXPECT_EQ(rx.sender_count(), 3u);
        auto c = std::move(b);  // a move does not count
        EXPECT_EQ(rx.sender_count(), 3u);
        a = c;  // copy-assign: drops a's old count, adds one
        EXPECT_EQ(rx.sender_count(), 3u);
        b = std::move(c);
        EXPECT_EQ(rx.sender_count(), 3u);
    }
    EXPECT_EQ(rx.sender_count(), 1u);
    aspen::mpsc_sender<int> empty;
    EXPECT_THROW((void)empty.try_send(1), std::logic_error);
}

// is_empty / is_closed, as Tokio's: closed once close() was called or every
// sender is gone, while messages may still wait; empty counts the
// receiver's batch too.
TEST(SyncMpsc, IsEmptyAndIsClosed) {
    for (bool by_close : {true, false}) {
        auto [tx, rx] = aspen::mpsc_channel<int>(64);
        EXPECT_TRUE(rx.is_empty());
        EXPECT_FALSE(rx.is_closed());
        for (int i = 0; i < 40; ++i) ASSERT_FALSE(tx.try_send(i).has_value());
        EXPECT_FALSE(rx.is_empty());
        EXPECT_EQ(rx.try_recv(), std::optional<int>(0));  // takes a batch into the receiver
        EXPECT_FALSE(rx.is_empty());
        if (by_close) rx.close();
        else tx = {};
        EXPECT_TRUE(rx.is_closed());
        EXPECT_FALSE(rx.is_empty());
        for (int i = 1; i < 40; ++i) ASSERT_EQ(rx.try_recv(), std::optional<int>(i));
        EXPECT_TRUE(rx.is_empty());
        EXPECT_TRUE(rx.is_closed());
    }
    aspen::mpsc_receiver<int> empty;
    EXPECT_THROW((void)empty.is_closed(), std::logic_error);
}

aspen::task<std::vector<int>> drain(aspen::mpsc_receiver<int>* rx) {
    std::vector<int> got;
    while (auto v = co_await rx->recv()) got.push_back(*v);
    co_return got;
}

// Producers take their sender by parameter: a spawned task's frame (its
// parameters included) is destroyed as soon as it finishes, so the receiver
// sees end of stream without waiting for the producers' handles to go.
aspen::task<void> send_range(aspen::mpsc_sender<int> tx, int from, int to) {
    for (int i = from; i < to; ++i) {
        auto back = co_await tx.send(i);
        if (back) throw std::runtime_error("unexpected: closed");
    }
}

TEST(SyncMpsc, EndOfStreamAfterAllSendersDrop) {
    aspen::runtime rt(workers(2));
    auto [tx, rx] = aspen::mpsc_channel<int>(4);
    auto tx2 = tx;
    EXPECT_FALSE(tx.try_send(1).has_value());
    EXPECT_FALSE(tx2.try_send(2).has_value());
    { auto gone = std::move(tx); }
    auto h = rt.spawn(send_range(std::move(tx2), 3, 100));  // the last sender, dropped when the task ends
    std::vector<int> got;
    within(30s, "mpsc end of stream", [&] { got = rt.block_on(drain(&rx)); });
    ASSERT_EQ(got.size(), 99u);
    for (int i = 0; i < 99; ++i) EXPECT_EQ(got[i], i + 1);
    // Still the end on a new recv.
    auto again = [](aspen::mpsc_receiver<int>* r) -> aspen::task<bool> { co_return !(co_await r->recv()).has_value(); };
    EXPECT_TRUE(rt.block_on(again(&rx)));
    rt.block_on([](aspen::join_handle<void> j) -> aspen::task<void> { co_await j; }(std::move(h)));
}

aspen::task<std::optional<std::unique_ptr<int>>> send_one(aspen::mpsc_sender<std::unique_ptr<int>>* tx,
                                                          std::unique_ptr<int> v) {
    co_return co_await tx->send(std::move(v));
}

TEST(SyncMpsc, SendToClosedChannelReturnsTheValue) {
    aspen::runtime rt(workers(2));
    auto [tx, rx] = aspen::mpsc_channel<std::unique_ptr<int>>(1);
    { auto gone = std::move(rx); }
    EXPECT_TRUE(tx.is_closed());
    auto p = std::make_unique<int>(5);
    int* raw = p.get();
    std::optional<std::unique_ptr<int>> back;
    within(30s, "mpsc send closed", [&] { back = rt.block_on(send_one(&tx, std::move(p))); });
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->get(), raw);
    auto back2 = tx.try_send(std::make_unique<int>(6));
    ASSERT_TRUE(back2.has_value());
    EXPECT_EQ(**back2, 6);

    auto [utx, urx] = aspen::unbounded_channel<std::unique_ptr<int>>();
    { auto gone = std::move(urx); }
    auto back3 = utx.send(std::make_unique<int>(7));
    ASSERT_TRUE(back3.has_value());
    EXPECT_EQ(**back3, 7);
}

// Senders waiting for room get their value back when the receiver goes.
aspen::task<bool> waiting_senders_get_values_back() {
    auto [tx, rx] = aspen::mpsc_channel<std::unique_ptr<int>>(1);
    (void)tx.try_send(std::make_unique<int>(0));
    std::vector<aspen::join_handle<std::optional<std::unique_ptr<int>>>> hs;
    for (int i = 1; i <= 20; ++i) {
        hs.push_back(aspen::spawn(send_one(&tx, std::make_unique<int>(i))));
        while (rx.waiting_senders() != static_cast<std::size_t>(i)) co_await aspen::yield_now();
    }
    { auto gone = std::move(rx); }  // closes; the buffered 0 is destroyed
    bool all_back = true;
    for (int i = 1; i <= 20; ++i) {
        auto back = co_await hs[i - 1];
        all_back = all_back && back.has_value() && **back == i;
    }
    co_return all_back;
}

TEST(SyncMpsc, WaitingSendersGetValueBackWhenReceiverDropped) {
    aspen::runtime rt(workers(2));
    bool ok = false;
    within(30s, "mpsc waiting senders closed", [&] { ok = rt.block_on(waiting_senders_get_values_back()); });
    EXPECT_TRUE(ok);
}

aspen::task<std::vector<int>> close_body() {
    auto [tx, rx] = aspen::mpsc_channel<int>(8);
    for (int i = 0; i < 3; ++i) (void)tx.try_send(i);
    rx.close();
    std::vector<int> got;
    auto back = co_await tx.send(99);
    if (back) got.push_back(-*back);  // -99: returned
    while (auto v = co_await rx.recv()) got.push_back(*v);  // buffered ones, then the end (sender still alive)
    co_return got;
}

TEST(SyncMpsc, CloseKeepsBufferedMessagesAndRejectsSends) {
    aspen::runtime rt(workers(1));
    std::vector<int> got;
    within(30s, "mpsc close", [&] { got = rt.block_on(close_body()); });
    EXPECT_EQ(got, (std::vector<int>{-99, 0, 1, 2}));
}

// ---- exactly once, per-producer order ---------------------------------------

aspen::task<void> produce(aspen::mpsc_sender<msg> tx_arg, std::uint32_t id, std::uint32_t n) {
    auto tx = std::move(tx_arg);
    for (std::uint32_t i = 0; i < n; ++i) {
        auto back = co_await tx.send(msg{id, i});
        if (back) throw std::runtime_error("channel closed under a producer");
    }
}

struct check_result {
    std::uint64_t received = 0;
    std::uint64_t out_of_order = 0;
    std::vector<std::uint32_t> next;  // per producer: the next expected seq
};

// Receives until end of stream, checking per-producer order (bounded and
// unbounded receivers alike).
template <class Receiver>
aspen::task<check_result> consume(Receiver* rx, std::uint32_t producers) {
    check_result r;
    r.next.assign(producers, 0);
    while (auto m = co_await rx->recv()) {
        ++r.received;
        if (m->producer >= producers || m->seq != r.next[m->producer])
            ++r.out_of_order;
        else
            ++r.next[m->producer];
    }
    co_return r;
}

aspen::task<check_result> exactly_once_body(std::size_t capacity, std::uint32_t producers, std::uint32_t n) {
    auto [tx, rx] = aspen::mpsc_channel<msg>(capacity);
    std::vector<aspen::join_handle<void>> hs;
    for (std::uint32_t p = 0; p < producers; ++p) hs.push_back(aspen::spawn(produce(tx, p, n)));
    { auto gone = std::move(tx); }  // the producers hold the only senders now
    check_result r = co_await consume(&rx, producers);
    for (auto& h : hs) co_await h;
    co_return r;
}

class SyncMpscExactlyOnce : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(SyncMpscExactlyOnce, EveryMessageOnceInProducerOrder) {
    auto [capacity, nworkers] = GetParam();
    aspen::runtime rt(workers(nworkers));
    check_result r;
    within(500s, "mpsc exactly once", [&] { r = rt.block_on(exactly_once_body(capacity, kProducers, kPerProducer)); });
    EXPECT_EQ(r.received, std::uint64_t{kProducers} * kPerProducer);
    EXPECT_EQ(r.out_of_order, 0u);
    for (std::uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(r.next[p], kPerProducer) << "producer " << p;
}

INSTANTIATE_TEST_SUITE_P(CapacityAndWorkers, SyncMpscExactlyOnce,
                         ::testing::Combine(::testing::Values(1, 16, 1024), ::testing::Values(1, 2, 8)),
                         [](const auto& info) {
                             return "cap" + std::to_string(std::get<0>(info.param)) + "_workers" +
                                    std::to_string(std::get<1>(info.param));
                         });

// Unbounded: half the producers are tasks, half are foreign threads.
aspen::task<void> produce_unbounded(aspen::unbounded_sender<msg> tx_arg, std::uint32_t id, std::uint32_t n) {
    auto tx = std::move(tx_arg);
    for (std::uint32_t i = 0; i < n; ++i) {
        if (tx.send(msg{id, i})) throw std::runtime_error("channel closed under a producer");
        if (i % 128 == 0) co_await aspen::yield_now();
    }
}

class SyncMpscUnbounded : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SyncMpscUnbounded, EveryMessageOnceInProducerOrder) {
    aspen::runtime rt(workers(GetParam()));
    auto [tx, rx] = aspen::unbounded_channel<msg>();
    std::vector<aspen::join_handle<void>> hs;
    std::vector<std::thread> threads;
    for (std::uint32_t p = 0; p < kProducers; ++p) {
        if (p % 2 == 0) {
            hs.push_back(rt.spawn(produce_unbounded(tx, p, kUnboundedPerProducer)));
        } else {
            threads.emplace_back([s = tx, p]() mutable {
                for (std::uint32_t i = 0; i < kUnboundedPerProducer; ++i)
                    if (s.send(msg{p, i})) throw std::runtime_error("closed");
            });
        }
    }
    { auto gone = std::move(tx); }
    check_result r;
    within(300s, "unbounded exactly once", [&] { r = rt.block_on(consume(&rx, kProducers)); });
    for (auto& t : threads) t.join();
    for (auto& h : hs) rt.block_on([](aspen::join_handle<void> j) -> aspen::task<void> { co_await j; }(std::move(h)));
    EXPECT_EQ(r.received, std::uint64_t{kProducers} * kUnboundedPerProducer);
    EXPECT_EQ(r.out_of_order, 0u);
    for (std::uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(r.next[p], kUnboundedPerProducer);
}

INSTANTIATE_TEST_SUITE_P(Workers, SyncMpscUnbounded, ::testing::Values(1, 2, 8));

// ---- cancel safety ----------------------------------------------------------

std::atomic<long> tokens_created{0};

struct token {
    std::atomic<long>* destroyed = nullptr;
    std::uint32_t id = 0;
    token(std::atomic<long>* d, std::uint32_t i) : destroyed(d), id(i) { tokens_created.fetch_add(1); }
    token(token&& o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)), id(o.id) {}
    token& operator=(token&&) = delete;
    ~token() {
        if (destroyed) destroyed->fetch_add(1);
    }
};

// Nothing follows the send: a task that was cancelled was cancelled at the
// send, so its value must not have been sent.
aspen::task<void> send_token(aspen::mpsc_sender<token> tx_arg, std::atomic<long>* destroyed, std::uint32_t id,
                             std::atomic<int>* sent) {
    auto tx = std::move(tx_arg);
    auto back = co_await tx.send(token(destroyed, id));
    if (!back) sent[id].store(1);
}

aspen::task<std::vector<std::uint32_t>> receive_all(aspen::mpsc_receiver<token>* rx) {
    std::vector<std::uint32_t> ids;
    while (auto t = co_await rx->recv()) {
        ids.push_back(t->id);
        if (ids.size() % 7 == 0) co_await aspen::yield_now();
    }
    co_return ids;
}

aspen::task<int> abort_senders_body(std::size_t capacity, std::uint32_t n, std::atomic<long>* destroyed,
                                    std::atomic<int>* sent, std::vector<std::uint32_t>* received, unsigned seed) {
    std::mt19937 rng(seed);
    auto [tx, rx] = aspen::mpsc_channel<token>(capacity);
    std::vector<aspen::join_handle<void>> hs;
    for (std::uint32_t i = 0; i < n; ++i) hs.push_back(aspen::spawn(send_token(tx, destroyed, i, sent)));
    { auto gone = std::move(tx); }
    // Let the senders start and queue up on the full channel first, so the
    // aborts below hit senders that are waiting (or were just granted a room).
    for (int i = 0; i < 3; ++i) co_await aspen::yield_now();
    auto consumer = aspen::spawn(receive_all(&rx));
    for (std::uint32_t i = 0; i < n / 3; ++i) {
        hs[rng() % n].abort();
        if (rng() % 4 == 0) co_await aspen::yield_now();
    }
    int cancelled = 0;
    for (auto& h : hs) {
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            ++cancelled;
        }
    }
    *received = co_await consumer;
    co_return cancelled;
}

class SyncMpscCancel : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SyncMpscCancel, AbortedSendIsNeverHalfSent) {
    aspen::runtime rt(workers(GetParam()));
    constexpr std::uint32_t n = 400;
    int cancelled_total = 0;
    long cancelled_while_sending = 0;
    for (std::size_t capacity : {1, 4}) {
        for (unsigned seed = 1; seed <= 5; ++seed) {
            std::atomic<long> destroyed{0};
            tokens_created.store(0);
            std::vector<std::atomic<int>> sent(n);
            std::vector<std::uint32_t> received;
            int cancelled = 0;
            within(60s, "mpsc abort senders",
                   [&] { cancelled = rt.block_on(abort_senders_body(capacity, n, &destroyed, sent.data(), &received, seed)); });
            cancelled_total += cancelled;
            // Received = exactly the sends that completed, each once.
            std::vector<int> seen(n, 0);
            for (auto id : received) ++seen[id];
            int sent_count = 0;
            for (std::uint32_t i = 0; i < n; ++i) {
                EXPECT_EQ(seen[i], sent[i].load()) << "id " << i;
                sent_count += sent[i].load();
            }
            EXPECT_EQ(sent_count + cancelled, static_cast<int>(n));
            // Every token made (a task aborted before it ran made none) was
            // destroyed exactly once: received, or unsent with its awaitable.
            EXPECT_EQ(destroyed.load(), tokens_created.load());
            EXPECT_GE(tokens_created.load(), static_cast<long>(sent_count));
            cancelled_while_sending += tokens_created.load() - sent_count;
        }
    }
    EXPECT_GT(cancelled_total, 0);
    EXPECT_GT(cancelled_while_sending, 0);  // some were aborted inside the send
}

// Receiving tasks take turns on one receiver; random ones are aborted while
// they wait or before they run. No message may be lost or duplicated.
aspen::task<std::optional<int>> recv_one(aspen::mpsc_receiver<int>* rx) { co_return co_await rx->recv(); }

aspen::task<void> trickle(aspen::mpsc_sender<int> tx_arg, int n) {
    auto tx = std::move(tx_arg);
    for (int i = 0; i < n; ++i) {
        auto back = co_await tx.send(i);
        if (back) co_return;
        if (i % 3 == 0) co_await aspen::yield_now();
    }
}

aspen::task<std::vector<int>> abort_receivers_body(int n, unsigned seed, std::size_t capacity) {
    std::mt19937 rng(seed);
    auto [tx, rx] = aspen::mpsc_channel<int>(capacity);
    auto producer = aspen::spawn(trickle(std::move(tx), n));
    std::vector<int> got;
    for (;;) {
        auto h = aspen::spawn(recv_one(&rx));
        int spins = static_cast<int>(rng() % 3);
        for (int s = 0; s < spins; ++s) co_await aspen::yield_now();
        if (rng() % 2) h.abort();
        try {
            auto v = co_await h;
            if (!v) break;  // end of stream
            got.push_back(*v);
        } catch (const aspen::task_cancelled&) {
        }
    }
    co_await producer;
    co_return got;
}

// A try_recv while another task's recv waits (one at a time, on one
// thread): the try_recv takes a batch, and the waiting recv, once it runs,
// gets the next message from it (dropping the waker it left).
aspen::task<void> try_recv_while_recv_waits_body() {
    auto [tx, rx] = aspen::mpsc_channel<int>(64);  // a batch of 4
    auto h = aspen::spawn(recv_one(&rx));
    co_await aspen::yield_now();  // h runs and waits: the channel is empty
    for (int i = 0; i < 10; ++i) EXPECT_FALSE(tx.try_send(i).has_value());
    EXPECT_EQ(rx.try_recv(), std::optional<int>(0));  // 1 to 3 in the batch
    EXPECT_EQ(co_await h, std::optional<int>(1));
    for (int i = 2; i < 10; ++i) EXPECT_EQ(rx.try_recv(), std::optional<int>(i));
    EXPECT_FALSE(rx.try_recv().has_value());
}

TEST(SyncMpsc, TryRecvWhileARecvWaitsKeepsTheOrder) {
    aspen::current_thread_runtime rt;
    rt.block_on(try_recv_while_recv_waits_body());
}

TEST_P(SyncMpscCancel, AbortedRecvLosesNoMessage) {
    aspen::runtime rt(workers(GetParam()));
    constexpr int n = 2000;
    // 2: one message per lock; 64 and 1024: the receiver's batch (4 and 64).
    for (std::size_t capacity : {2, 64, 1024}) {
        for (unsigned seed = 1; seed <= 3; ++seed) {
            std::vector<int> got;
            within(60s, "mpsc abort receivers", [&] { got = rt.block_on(abort_receivers_body(n, seed, capacity)); });
            ASSERT_EQ(got.size(), static_cast<std::size_t>(n)) << "seed " << seed << " capacity " << capacity;
            for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], i) << "seed " << seed << " capacity " << capacity;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Workers, SyncMpscCancel, ::testing::Values(1, 2, 8));

// Deterministic on one thread: a room is reserved for A, A is aborted
// before it resumes; the room goes to B, A's value is not sent.
aspen::task<std::vector<int>> reserved_room_body() {
    auto [tx, rx] = aspen::mpsc_channel<int>(1);
    (void)tx.try_send(0);
    auto send_value = [](aspen::mpsc_sender<int> s_arg, int v) -> aspen::task<void> {
        auto s = std::move(s_arg);
        (void)co_await s.send(v);
    };
    auto ha = aspen::spawn(send_value(tx, 100));
    while (rx.waiting_senders() != 1) co_await aspen::yield_now();
    auto hb = aspen::spawn(send_value(tx, 200));
    while (rx.waiting_senders() != 2) co_await aspen::yield_now();
    std::vector<int> got;
    got.push_back(*rx.try_recv());  // 0; the room is reserved for A
    ha.abort();                     // A never resumes: the room passes to B
    try {
        co_await ha;
    } catch (const aspen::task_cancelled&) {
        got.push_back(-1);
    }
    co_await hb;
    { auto gone = std::move(tx); }
    while (auto v = co_await rx.recv()) got.push_back(*v);
    co_return got;
}

TEST(SyncMpsc, ReservedRoomOfAbortedSenderPassesOn) {
    aspen::runtime rt(workers(1));
    std::vector<int> got;
    within(30s, "mpsc reserved room", [&] { got = rt.block_on(reserved_room_body()); });
    EXPECT_EQ(got, (std::vector<int>{0, -1, 200}));
}

TEST(SyncMpsc, ReservedRoomOfAbortedSenderPassesOnCurrentThread) {
    aspen::current_thread_runtime rt;
    std::vector<int> got;
    within(30s, "mpsc reserved room current-thread", [&] { got = rt.block_on(reserved_room_body()); });
    EXPECT_EQ(got, (std::vector<int>{0, -1, 200}));
}

}  // namespace

// ---- recv_many --------------------------------------------------------------

namespace {

TEST(SyncMpsc, RecvManyTakesWhatIsBufferedUpToTheLimit) {
    aspen::runtime rt(workers(1));
    within(60s, "recv_many basics", [&] {
        rt.block_on([]() -> aspen::task<void> {
            auto [tx, rx] = aspen::mpsc_channel<int>(16);
            for (int i = 0; i < 10; ++i) EXPECT_FALSE(tx.try_send(i).has_value());
            std::vector<int> out;
            EXPECT_EQ(co_await rx.recv_many(out, 0), 0u);
            EXPECT_EQ(co_await rx.recv_many(out, 4), 4u);
            EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3}));
            EXPECT_EQ(co_await rx.recv_many(out, 100), 6u);  // only what is there: no wait for more
            EXPECT_EQ(out.size(), 10u);
            for (int i = 0; i < 10; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], i);
            { auto gone = std::move(tx); }
            EXPECT_EQ(co_await rx.recv_many(out, 100), 0u);  // end of stream
        }());
    });
}

// 4 producers x 20,000 messages on 2 and 8 workers, received in batches of
// at most 37: every message once, in each producer's order.
TEST(SyncMpsc, RecvManyDeliversEveryMessageOnceInProducerOrder) {
    for (std::size_t n : {std::size_t{2}, std::size_t{8}}) {
        aspen::runtime rt(workers(n));
        within(120s, "recv_many exactly once", [&] {
            rt.block_on([]() -> aspen::task<void> {
                constexpr std::uint32_t producers = 4, per = 20000;
                auto [tx, rx] = aspen::mpsc_channel<msg>(64);
                std::vector<aspen::join_handle<void>> hs;
                for (std::uint32_t p = 0; p < producers; ++p)
                    hs.push_back(aspen::spawn([](aspen::mpsc_sender<msg> tx, std::uint32_t p) -> aspen::task<void> {
                        for (std::uint32_t i = 0; i < per; ++i) {
                            std::optional<msg> back = co_await tx.send(msg{p, i});
                            if (back) throw std::runtime_error("closed under a producer");
                        }
                    }(tx, p)));
                { auto gone = std::move(tx); }
                std::vector<std::uint32_t> next(producers, 0);
                std::uint64_t received = 0, out_of_order = 0, batches = 0;
                std::vector<msg> batch;
                for (;;) {
                    batch.clear();
                    std::size_t got = co_await rx.recv_many(batch, 37);
                    if (got == 0) break;
                    EXPECT_EQ(got, batch.size());
                    EXPECT_LE(got, 37u);
                    ++batches;
                    for (const msg& m : batch) {
                        out_of_order += m.seq != next[m.producer];
                        next[m.producer] = m.seq + 1;
                        ++received;
                    }
                }
                for (auto& h : hs) co_await h;
                EXPECT_EQ(received, std::uint64_t{producers} * per);
                EXPECT_EQ(out_of_order, 0u);
                EXPECT_LE(batches, received);
            }());
        });
    }
}

}  // namespace
