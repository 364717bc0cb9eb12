// The blocking_* calls (as Tokio's blocking_send, blocking_recv,
// blocking_lock): plain threads and spawn_blocking functions trading with
// tasks through mpsc, oneshot and broadcast channels and sharing a mutex or
// shared_mutex with them, on every runtime kind; every message and every
// increment counted. On a runtime's thread the calls throw and take nothing.
#include <aspen/aspen.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using aspen_test::any_runtime;

constexpr auto watchdog = std::chrono::seconds(60);

class SyncBlocking : public ::testing::TestWithParam<int> {};

aspen::task<long> receive_all(aspen::mpsc_receiver<int>* rx, int expected) {
    long sum = 0;
    int next = 0;
    while (std::optional<int> v = co_await rx->recv()) {
        if (*v != next)
            throw std::runtime_error("out of order: " + std::to_string(*v) + " for " + std::to_string(next));
        ++next;
        sum += *v;
    }
    if (next != expected) throw std::runtime_error("received " + std::to_string(next));
    co_return sum;
}

// A plain thread sends 20,000 values through a channel of 4 rooms, so it
// sleeps on a full channel again and again; a task receives them in order.
TEST_P(SyncBlocking, PlainThreadSendsToTaskThroughFullChannel) {
    constexpr int n = 20000;
    any_runtime rt(GetParam());
    auto [tx, rx] = aspen::mpsc_channel<int>(4);
    std::thread producer([tx = std::move(tx)]() mutable {
        for (int i = 0; i < n; ++i) {
            if (tx.blocking_send(i)) throw std::runtime_error("channel closed early");
        }
    });
    long sum = 0;
    aspen_test::within(watchdog, "blocking_send into a full channel", [&] { sum = rt->block_on(receive_all(&rx, n)); });
    producer.join();
    EXPECT_EQ(sum, long{n} * (n - 1) / 2);
}

aspen::task<void> send_range(aspen::mpsc_sender<int> tx, int n) {
    for (int i = 0; i < n; ++i) (void)co_await tx.send(i);
}

aspen::task<void> send_all(int n, aspen::mpsc_sender<int> tx) {
    // Spawned, so this task ends while the thread is still receiving.
    auto h = aspen::spawn(send_range(std::move(tx), n));
    co_await h;
}

// Tasks send; a plain thread receives with blocking_recv and
// blocking_recv_many, then sees the end of the stream.
TEST_P(SyncBlocking, PlainThreadReceivesFromTasks) {
    constexpr int n = 20000;
    any_runtime rt(GetParam());
    auto [tx, rx] = aspen::mpsc_channel<int>(8);
    std::vector<int> got;
    bool ended = false;
    std::thread consumer([&, rx = std::move(rx)]() mutable {
        while (got.size() < n / 2) {
            std::optional<int> v = rx.blocking_recv();
            if (!v) return;
            got.push_back(*v);
        }
        while (rx.blocking_recv_many(got, 64) != 0) {
        }
        ended = !rx.blocking_recv().has_value();
    });
    aspen_test::within(watchdog, "tasks feeding blocking_recv", [&] { rt->block_on(send_all(n, std::move(tx))); });
    consumer.join();
    ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], i);
    EXPECT_TRUE(ended);
}

TEST(SyncBlockingChannel, ClosedChannelGivesTheValueBackAndEmptyEnds) {
    auto [tx, rx] = aspen::mpsc_channel<std::string>(1);
    EXPECT_FALSE(tx.blocking_send("a").has_value());
    rx.close();
    std::optional<std::string> back = tx.blocking_send("b");
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, "b");
    // What was sent before the close is still there, then the end.
    EXPECT_EQ(rx.blocking_recv(), std::optional<std::string>("a"));
    EXPECT_FALSE(rx.blocking_recv().has_value());
    std::vector<std::string> rest;
    EXPECT_EQ(rx.blocking_recv_many(rest, 8), 0u);
    EXPECT_EQ(rx.blocking_recv_many(rest, 0), 0u);
    EXPECT_TRUE(rest.empty());
}

TEST(SyncBlockingChannel, UnboundedReceiverBetweenPlainThreads) {
    constexpr int n = 50000;
    auto [tx, rx] = aspen::unbounded_channel<int>();
    long sum = 0;
    std::thread consumer([&, rx = std::move(rx)]() mutable {
        while (std::optional<int> v = rx.blocking_recv()) sum += *v;
    });
    std::thread producer([tx = std::move(tx)]() mutable {
        for (int i = 0; i < n; ++i) (void)tx.send(i);
    });
    producer.join();
    consumer.join();
    EXPECT_EQ(sum, long{n} * (n - 1) / 2);
}

aspen::task<void> answer_later(aspen::oneshot_sender<int> tx) {
    co_await aspen::yield_now();
    (void)tx.send(42);
}

aspen::task<void> drop_sender(aspen::oneshot_sender<int> tx) {
    co_await aspen::yield_now();
    tx = {};  // gone unsent
}

TEST_P(SyncBlocking, OneshotFromTaskToPlainThread) {
    any_runtime rt(GetParam());
    for (bool send : {true, false}) {
        auto [tx, rx] = aspen::oneshot_channel<int>();
        std::optional<int> got = -1;
        std::thread waiter([&, rx = std::move(rx)]() mutable { got = rx.blocking_recv(); });
        aspen_test::within(watchdog, "oneshot into blocking_recv", [&] {
            rt->block_on(send ? answer_later(std::move(tx)) : drop_sender(std::move(tx)));
        });
        waiter.join();
        EXPECT_EQ(got, send ? std::optional<int>(42) : std::nullopt);
    }
}

TEST(SyncBlockingChannel, OneshotReceivedTwiceThrows) {
    auto [tx, rx] = aspen::oneshot_channel<int>();
    (void)tx.send(1);
    EXPECT_EQ(rx.blocking_recv(), std::optional<int>(1));
    EXPECT_THROW((void)rx.blocking_recv(), std::logic_error);
}

aspen::task<void> broadcast_range(aspen::broadcast_sender<int> tx, int n) {
    for (int i = 0; i < n; ++i) {
        (void)tx.send(i);
        co_await aspen::yield_now();
    }
}

// A channel larger than what is sent: nothing lags, every value arrives.
TEST_P(SyncBlocking, BroadcastToPlainThreads) {
    constexpr int n = 2000, listeners = 3;
    any_runtime rt(GetParam());
    auto [tx, rx] = aspen::broadcast_channel<int>(n);
    std::vector<long> sums(listeners, 0);
    std::vector<bool> closed(listeners, false);
    std::vector<std::thread> threads;
    for (int l = 0; l < listeners; ++l) {
        threads.emplace_back([&, l, r = tx.subscribe()]() mutable {
            for (;;) {
                aspen::broadcast_result<int> res = r.blocking_recv();
                if (res) sums[l] += *res;
                else {
                    closed[l] = res.closed();
                    return;
                }
            }
        });
    }
    rx = {};  // only the threads' receivers
    aspen_test::within(watchdog, "broadcast into blocking_recv",
                       [&] { rt->block_on(broadcast_range(std::move(tx), n)); });
    for (auto& t : threads) t.join();
    for (int l = 0; l < listeners; ++l) {
        EXPECT_EQ(sums[l], long{n} * (n - 1) / 2) << l;
        EXPECT_TRUE(closed[l]) << l;
    }
}

aspen::task<void> add_under_lock(aspen::mutex* m, long* counter, int times) {
    for (int i = 0; i < times; ++i) {
        aspen::mutex_guard g = co_await m->lock();
        long v = *counter;
        co_await aspen::yield_now();  // hold it across a suspension
        *counter = v + 1;
    }
}

aspen::task<void> tasks_add(aspen::mutex* m, long* counter, int tasks, int times) {
    std::vector<aspen::join_handle<void>> hs;
    for (int t = 0; t < tasks; ++t) hs.push_back(aspen::spawn(add_under_lock(m, counter, times)));
    for (auto& h : hs) co_await h;
}

// Plain threads and tasks increment one plain counter under one mutex:
// no increment is lost, so the lock excluded every other holder.
TEST_P(SyncBlocking, MutexSharedByThreadsAndTasks) {
    constexpr int threads = 3, tasks = 4, times = 500;
    any_runtime rt(GetParam());
    aspen::mutex m;
    long counter = 0;
    std::vector<std::thread> ths;
    for (int t = 0; t < threads; ++t) {
        ths.emplace_back([&] {
            for (int i = 0; i < times; ++i) {
                aspen::mutex_guard g = m.blocking_lock();
                long v = counter;
                std::this_thread::yield();
                counter = v + 1;
            }
        });
    }
    aspen_test::within(watchdog, "mutex between threads and tasks",
                       [&] { rt->block_on(tasks_add(&m, &counter, tasks, times)); });
    for (auto& t : ths) t.join();
    EXPECT_EQ(counter, long{threads + tasks} * times);
    EXPECT_FALSE(m.is_locked());
}

// Readers share, a writer excludes them: each reader thread sees an even
// value (the writer makes it odd only while it holds the lock).
TEST(SyncBlockingSharedMutex, ReadersAndWritersOnPlainThreads) {
    constexpr int writers = 2, readers = 3, times = 2000;
    aspen::shared_mutex m;
    long value = 0;
    std::atomic<int> odd_seen{0};
    std::vector<std::thread> ths;
    for (int w = 0; w < writers; ++w) {
        ths.emplace_back([&] {
            for (int i = 0; i < times; ++i) {
                aspen::shared_mutex_write_guard g = m.blocking_lock();
                ++value;
                std::this_thread::yield();
                ++value;
            }
        });
    }
    for (int r = 0; r < readers; ++r) {
        ths.emplace_back([&] {
            for (int i = 0; i < times; ++i) {
                aspen::shared_mutex_read_guard g = m.blocking_lock_shared();
                if (value % 2 != 0) odd_seen.fetch_add(1);
            }
        });
    }
    for (auto& t : ths) t.join();
    EXPECT_EQ(value, 2L * writers * times);
    EXPECT_EQ(odd_seen.load(), 0);
    EXPECT_EQ(m.readers(), 0u);
}

// Inside a task every blocking call throws std::logic_error naming itself,
// and takes nothing: the message is still there for recv afterwards.
aspen::task<int> blocking_inside_task(aspen::mpsc_sender<int> tx, aspen::mpsc_receiver<int> rx) {
    (void)co_await tx.send(5);
    int refused = 0;
    auto expect_refusal = [&](auto call, const char* name) {
        try {
            call();
        } catch (const std::logic_error& e) {
            if (std::string(e.what()).find(name) != std::string::npos) ++refused;
        }
    };
    expect_refusal([&] { (void)rx.blocking_recv(); }, "aspen::mpsc_receiver::blocking_recv");
    std::vector<int> many;
    expect_refusal([&] { (void)rx.blocking_recv_many(many, 4); }, "aspen::mpsc_receiver::blocking_recv_many");
    expect_refusal([&] { (void)tx.blocking_send(6); }, "aspen::mpsc_sender::blocking_send");
    aspen::mutex m;
    expect_refusal([&] { (void)m.blocking_lock(); }, "aspen::mutex::blocking_lock");
    aspen::shared_mutex sm;
    expect_refusal([&] { (void)sm.blocking_lock(); }, "aspen::shared_mutex::blocking_lock");
    expect_refusal([&] { (void)sm.blocking_lock_shared(); }, "aspen::shared_mutex::blocking_lock_shared");
    auto [otx, orx] = aspen::oneshot_channel<int>();
    expect_refusal([&] { (void)orx.blocking_recv(); }, "aspen::oneshot_receiver::blocking_recv");
    auto [btx, brx] = aspen::broadcast_channel<int>(2);
    expect_refusal([&] { (void)brx.blocking_recv(); }, "aspen::broadcast_receiver::blocking_recv");
    std::optional<int> v = co_await rx.recv();
    if (!v || *v != 5 || !many.empty() || m.is_locked() || sm.readers() != 0) co_return -1;
    co_return refused;
}

TEST_P(SyncBlocking, InsideATaskThrowsAndTakesNothing) {
    auto [tx, rx] = aspen::mpsc_channel<int>(4);
    EXPECT_EQ(aspen_test::run_on(GetParam(), blocking_inside_task(std::move(tx), std::move(rx)), "blocking in a task"),
              8);
}

// A spawn_blocking function may wait on a task's message (as in Tokio).
aspen::task<int> blocking_function_waits_for_task() {
    auto [tx, rx] = aspen::mpsc_channel<int>(1);
    auto h = aspen::spawn_blocking([rx = std::move(rx)]() mutable {
        int sum = 0;
        while (std::optional<int> v = rx.blocking_recv()) sum += *v;
        return sum;
    });
    for (int i = 1; i <= 100; ++i) (void)co_await tx.send(i);
    tx = {};  // end of stream
    co_return co_await h;
}

TEST_P(SyncBlocking, SpawnBlockingFunctionReceivesFromTask) {
    EXPECT_EQ(aspen_test::run_on(GetParam(), blocking_function_waits_for_task(), "blocking_recv in spawn_blocking"),
              5050);
}

// The parker itself: a wake that comes before the park is kept (the park
// returns at once), and a waker copy that outlives the parker wakes nobody
// (ASan checks that it touches no freed memory).
TEST(ThreadParker, WakeBeforeParkIsKept) {
    aspen_test::within(watchdog, "park after a wake", [] {
        aspen::detail::thread_parker p;
        p.waker().wake_by_ref();
        p.park();
        aspen::waker copy = p.waker();
        copy.wake();  // consumes the copy's reference
        p.park();
    });
}

TEST(ThreadParker, WakerOutlivesParker) {
    aspen::waker late;
    {
        aspen::detail::thread_parker p;
        late = p.waker();
    }
    std::thread([late = std::move(late)]() mutable { late.wake(); }).join();
}

TEST(ThreadParker, WakeFromAnotherThreadEndsPark) {
    aspen_test::within(watchdog, "park until another thread wakes", [] {
        aspen::detail::thread_parker p;
        std::atomic<bool> woke{false};
        std::thread waker([&, w = p.waker()] {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            woke.store(true);
            w.wake_by_ref();
        });
        while (!woke.load()) p.park();  // a spurious return re-checks
        waker.join();
    });
}

INSTANTIATE_TEST_SUITE_P(Kinds, SyncBlocking, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
