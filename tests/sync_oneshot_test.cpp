// aspen::oneshot_channel: delivery (same thread, foreign thread), the value
// comes back when the receiver is gone, nullopt when the sender is dropped,
// misuse throws, an aborted receiver loses nothing, and a race stress between
// send and receiver drop where every value is accounted for exactly once.
#include <aspen/aspen.hpp>
#include <aspen/sync/oneshot.hpp>

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::within;

using aspen_test::workers;

aspen::task<std::optional<std::string>> receive(aspen::oneshot_receiver<std::string> rx) {
    co_return co_await rx;
}

TEST(SyncOneshot, SendBeforeAwait) {
    aspen::runtime rt(workers(2));
    auto [tx, rx] = aspen::oneshot_channel<std::string>();
    EXPECT_FALSE(tx.is_closed());
    EXPECT_FALSE(tx.send("hello").has_value());
    EXPECT_FALSE(tx.valid());
    std::optional<std::string> v;
    within(30s, "oneshot send before await", [&] { v = rt.block_on(receive(std::move(rx))); });
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, "hello");
}

TEST(SyncOneshot, SendFromForeignThreadWhileWaiting) {
    aspen::runtime rt(workers(2));
    for (int i = 0; i < 200; ++i) {
        auto [tx, rx] = aspen::oneshot_channel<std::string>();
        auto h = rt.spawn(receive(std::move(rx)));
        std::thread t([&tx, i] {
            if (i % 2) std::this_thread::yield();
            EXPECT_FALSE(tx.send(std::to_string(i)).has_value());
        });
        std::optional<std::string> v;
        within(30s, "oneshot foreign send", [&] {
            v = rt.block_on([](aspen::join_handle<std::optional<std::string>> j) -> aspen::task<std::optional<std::string>> {
                co_return co_await j;
            }(std::move(h)));
        });
        t.join();
        ASSERT_TRUE(v.has_value());
        EXPECT_EQ(*v, std::to_string(i));
    }
}

TEST(SyncOneshot, ValueComesBackWhenReceiverDropped) {
    auto [tx, rx] = aspen::oneshot_channel<std::unique_ptr<int>>();
    { auto gone = std::move(rx); }
    EXPECT_TRUE(tx.is_closed());
    auto p = std::make_unique<int>(7);
    int* raw = p.get();
    std::optional<std::unique_ptr<int>> back = tx.send(std::move(p));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->get(), raw);  // the very same object, not a copy
    EXPECT_EQ(**back, 7);
    EXPECT_THROW((void)tx.send(std::make_unique<int>(1)), std::logic_error);
}

TEST(SyncOneshot, SenderDroppedGivesNullopt) {
    aspen::runtime rt(workers(2));
    {
        auto [tx, rx] = aspen::oneshot_channel<std::string>();
        { auto gone = std::move(tx); }
        std::optional<std::string> v = std::string("not reset");
        within(30s, "oneshot dropped sender", [&] { v = rt.block_on(receive(std::move(rx))); });
        EXPECT_FALSE(v.has_value());
    }
    {
        // Dropped on another thread while the receiver waits.
        auto [tx, rx] = aspen::oneshot_channel<std::string>();
        auto h = rt.spawn(receive(std::move(rx)));
        std::thread t([s = std::move(tx)]() mutable { std::this_thread::yield(); });
        t.join();
        std::optional<std::string> v = std::string("not reset");
        within(30s, "oneshot dropped sender while waiting", [&] {
            v = rt.block_on([](aspen::join_handle<std::optional<std::string>> j) -> aspen::task<std::optional<std::string>> {
                co_return co_await j;
            }(std::move(h)));
        });
        EXPECT_FALSE(v.has_value());
    }
}

aspen::task<int> misuse_body() {
    auto [tx, rx] = aspen::oneshot_channel<int>();
    (void)tx.send(5);
    int v = *co_await rx;
    int thrown = 0;
    try {
        co_await rx;
    } catch (const std::logic_error&) {
        ++thrown;
    }
    aspen::oneshot_receiver<int> moved_from;
    try {
        co_await moved_from;
    } catch (const std::logic_error&) {
        ++thrown;
    }
    co_return v * 10 + thrown;
}

TEST(SyncOneshot, AwaitTwiceOrMovedFromThrows) {
    aspen::runtime rt(workers(1));
    EXPECT_EQ(rt.block_on(misuse_body()), 52);
}

// The receiving task is aborted while it waits: its receiver is destroyed
// with its frame, so a later send gives the value back.
aspen::task<void> wait_forever(aspen::oneshot_receiver<std::unique_ptr<int>> rx, std::atomic<int>* got) {
    auto v = co_await rx;
    got->fetch_add(1);
}

aspen::task<bool> aborted_receiver_body(aspen::oneshot_receiver<std::unique_ptr<int>> rx) {
    std::atomic<int> got{0};
    auto h = aspen::spawn(wait_forever(std::move(rx), &got));
    for (int i = 0; i < 10; ++i) co_await aspen::yield_now();
    h.abort();
    bool cancelled = false;
    try {
        co_await h;
    } catch (const aspen::task_cancelled&) {
        cancelled = true;
    }
    co_return cancelled && got.load() == 0;
}

TEST(SyncOneshot, AbortedReceiverLosesNothing) {
    aspen::runtime rt(workers(2));
    auto [tx, rx] = aspen::oneshot_channel<std::unique_ptr<int>>();
    bool ok = false;
    within(30s, "oneshot aborted receiver", [&] { ok = rt.block_on(aborted_receiver_body(std::move(rx))); });
    EXPECT_TRUE(ok);
    EXPECT_TRUE(tx.is_closed());
    auto back = tx.send(std::make_unique<int>(3));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(**back, 3);
}

// A counted value: every instance that holds a token is accounted for.
struct token {
    std::atomic<long>* destroyed = nullptr;
    explicit token(std::atomic<long>* d) : destroyed(d) {}
    token(token&& o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)) {}
    token& operator=(token&&) = delete;
    ~token() {
        if (destroyed) destroyed->fetch_add(1);
    }
};

aspen::task<long> receive_token(aspen::oneshot_receiver<token> rx) {
    auto v = co_await rx;
    co_return v.has_value() ? 1 : 0;
}

// Senders on a foreign thread race with receivers that are either awaited
// or aborted: each value is received, returned to the sender, or destroyed
// with the channel, exactly once.
TEST(SyncOneshot, SendRacesReceiverAbortEveryValueAccountedOnce) {
    aspen::runtime rt(workers(2));
#ifdef ASPEN_SANITIZED
    constexpr int n = 2000;
#else
    constexpr int n = 20000;
#endif
    std::atomic<long> destroyed{0};
    long returned = 0;
    std::vector<aspen::oneshot_sender<token>> txs;
    std::vector<aspen::join_handle<long>> hs;
    for (int i = 0; i < n; ++i) {
        auto [tx, rx] = aspen::oneshot_channel<token>();
        txs.push_back(std::move(tx));
        hs.push_back(rt.spawn(receive_token(std::move(rx))));
    }
    std::thread sender([&] {
        for (auto& tx : txs)
            if (auto back = tx.send(token(&destroyed))) ++returned;
    });
    for (int i = 0; i < n; i += 3) hs[i].abort();
    sender.join();
    long received = 0, cancelled = 0;
    within(60s, "oneshot race", [&] {
        for (auto& h : hs) {
            try {
                received += rt.block_on([](aspen::join_handle<long> j) -> aspen::task<long> { co_return co_await j; }(std::move(h)));
            } catch (const aspen::task_cancelled&) {
                ++cancelled;
            }
        }
    });
    // Every value was destroyed exactly once: by the receiver, by the
    // sender (returned), or with the channel (aborted after delivery).
    EXPECT_EQ(destroyed.load(), n);
    EXPECT_EQ(received + cancelled, n);
    EXPECT_LE(returned, cancelled);
}

}  // namespace
