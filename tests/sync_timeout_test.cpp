// Every waiting sync operation can be given to aspen::timeout as it is
// (`co_await aspen::timeout(1s, rx.recv())`): the operations move until
// they are first awaited (leaf_awaitable). A timed-out operation is
// cancelled as an aborted task's would be, so nothing is lost: the message
// that comes later is received, the lock and the permits are still there,
// a later notify or send reaches the next wait.
#include <aspen/aspen.hpp>

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <type_traits>

namespace {

using namespace std::chrono_literals;
using aspen::task;

// Movable before the first await: what timeout needs.
static_assert(std::is_nothrow_move_constructible_v<aspen::mpsc_recv_awaitable<int>>);
static_assert(std::is_nothrow_move_constructible_v<aspen::mpsc_send_awaitable<int>>);
static_assert(std::is_nothrow_move_constructible_v<aspen::mutex_lock_awaitable>);
static_assert(std::is_nothrow_move_constructible_v<aspen::semaphore_acquire_awaitable>);
static_assert(std::is_nothrow_move_constructible_v<aspen::notified_awaitable>);
static_assert(std::is_nothrow_move_constructible_v<aspen::barrier_wait_awaitable>);
static_assert(std::is_nothrow_move_constructible_v<aspen::broadcast_recv_awaitable<int>>);
static_assert(std::is_nothrow_move_constructible_v<aspen::watch_changed_awaitable<int>>);
static_assert(std::is_nothrow_move_constructible_v<aspen::join_set_next_awaitable<int>>);
static_assert(std::is_nothrow_move_constructible_v<decltype(std::declval<aspen::event&>().wait())>);
static_assert(std::is_nothrow_move_constructible_v<decltype(std::declval<aspen::shared_mutex&>().lock())>);

class SyncTimeout : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SyncTimeout, EveryWaitingOperationTimesOutAndLosesNothing) {
    aspen::runtime rt(aspen_test::workers(GetParam()));
    aspen_test::within(60s, "sync operations under timeout", [&] {
        rt.block_on([]() -> task<void> {
            // mpsc: receive, and send into a full channel.
            auto [tx, rx] = aspen::mpsc_channel<int>(1);
            EXPECT_THROW(co_await aspen::timeout(5ms, rx.recv()), aspen::timed_out);
            EXPECT_FALSE(tx.try_send(1).has_value());  // accepted: the channel is full now
            EXPECT_THROW(co_await aspen::timeout(5ms, tx.send(2)), aspen::timed_out);
            EXPECT_EQ(co_await aspen::timeout(10s, rx.recv()), std::optional<int>(1));
            EXPECT_FALSE((co_await aspen::timeout(10s, tx.send(3))).has_value());
            EXPECT_EQ(co_await aspen::timeout(10s, rx.recv()), std::optional<int>(3));  // 2 was never sent

            // mutex and semaphore: the owner keeps what it holds; it is
            // there for the next one after.
            aspen::mutex m;
            {
                auto held = co_await m.lock();
                EXPECT_THROW((void)co_await aspen::timeout(5ms, m.lock()), aspen::timed_out);
            }
            { auto again = co_await aspen::timeout(10s, m.lock()); }
            aspen::semaphore sem(2);
            {
                auto one = co_await sem.acquire();
                EXPECT_THROW((void)co_await aspen::timeout(5ms, sem.acquire(2)), aspen::timed_out);
            }
            { auto both = co_await aspen::timeout(10s, sem.acquire(2)); }

            // notify: a notify_one after the timed-out wait reaches the next.
            aspen::notify n;
            EXPECT_THROW(co_await aspen::timeout(5ms, n.notified()), aspen::timed_out);
            n.notify_one();
            co_await aspen::timeout(10s, n.notified());

            // event, broadcast, watch: the later set / send is seen.
            aspen::event ev;
            EXPECT_THROW(co_await aspen::timeout(5ms, ev.wait()), aspen::timed_out);
            ev.set();
            co_await aspen::timeout(10s, ev.wait());
            auto [btx, brx] = aspen::broadcast_channel<int>(4);
            EXPECT_THROW(co_await aspen::timeout(5ms, brx.recv()), aspen::timed_out);
            EXPECT_FALSE(btx.send(7).has_value());
            auto got = co_await aspen::timeout(10s, brx.recv());
            EXPECT_TRUE(got.has_value());
            EXPECT_EQ(got ? *got : -1, 7);
            // oneshot (an operator co_await, given by value): the receiver
            // goes with the timed-out wait, so a later send gets its value
            // back; one in time gives the value.
            auto [otx, orx] = aspen::oneshot_channel<int>();
            EXPECT_THROW(co_await aspen::timeout(5ms, std::move(orx)), aspen::timed_out);
            EXPECT_EQ(otx.send(5), std::optional<int>(5));
            auto [otx2, orx2] = aspen::oneshot_channel<int>();
            EXPECT_FALSE(otx2.send(6).has_value());
            EXPECT_EQ(co_await aspen::timeout(10s, std::move(orx2)), std::optional<int>(6));

            auto [wtx, wrx] = aspen::watch_channel<int>(0);
            EXPECT_THROW(co_await aspen::timeout(5ms, wrx.changed()), aspen::timed_out);
            EXPECT_FALSE(wtx.send(1).has_value());
            EXPECT_TRUE(co_await aspen::timeout(10s, wrx.changed()));
        }());
    });
    EXPECT_EQ(rt.metrics().timers_armed, 0u);
}

INSTANTIATE_TEST_SUITE_P(Workers, SyncTimeout, ::testing::Values(1, 2, 8));

#ifndef NDEBUG
// Misuse: moving an operation after it started (its waker is stored; the
// channel would wake a stale copy). The assert in leaf_awaitable's move
// catches it in the builds with asserts (the sanitizer builds).
TEST(SyncTimeoutDeathTest, MovingAnOperationAfterItStartedIsCaught) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto move_started = [] {
        aspen::current_thread_runtime rt;
        rt.block_on([]() -> task<void> {
            auto [tx, rx] = aspen::mpsc_channel<int>(1);
            auto op = rx.recv();
            EXPECT_FALSE(op.await_ready());  // empty: it waits now, its waker stored
            auto moved = std::move(op);
            co_return;
        }());
    };
    EXPECT_DEATH(move_started(), "moved after it was awaited or polled");
}
#endif

}  // namespace
