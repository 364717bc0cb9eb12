// Senders waiting for their receiver to go (Tokio's Sender::closed):
// mpsc (bounded and unbounded) and oneshot. Every waiter completes when the
// receiver is destroyed or closes, also when that happens on a plain thread;
// an aborted waiter leaves the channel's list (ASan sees a freed node
// otherwise); a wait for a receiver already gone completes at once; in a
// select the closed() branch wins; misuse throws.
#include <aspen/aspen.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace {

using aspen_test::run_on;

class SenderClosed : public ::testing::TestWithParam<int> {};

template <class Sender>
aspen::task<void> wait_closed(Sender tx, std::atomic<int>* waiting, std::atomic<int>* done) {
    auto c = tx.closed();
    waiting->fetch_add(1);
    co_await std::move(c);
    done->fetch_add(1);
}

// Senders of each kind wait; the receiver then goes away (dropped or
// closed, by a task or a plain thread). Returns how many waits completed.
template <class Channel>
aspen::task<int> waiters_body(Channel channel, bool close_instead, bool from_thread) {
    auto [tx, rx] = std::move(channel);
    std::optional<decltype(rx)> held(std::move(rx));
    std::atomic<int> waiting{0}, done{0};
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < 16; ++i) hs.push_back(aspen::spawn(wait_closed(tx, &waiting, &done)));
    while (waiting.load() != 16) co_await aspen::yield_now();
    if (done.load() != 0) co_return -1;  // nothing completes before the receiver goes
    auto finish = [&] {
        if (close_instead)
            held->close();
        else
            held.reset();
    };
    if (from_thread) {
        std::thread t(finish);
        t.join();
    } else {
        finish();
    }
    for (auto& h : hs) co_await h;
    if (!tx.is_closed()) co_return -2;
    auto again = tx.closed();
    co_await std::move(again);  // closed already: at once
    co_return done.load();
}

TEST_P(SenderClosed, MpscWaitersCompleteWhenTheReceiverIsDestroyed) {
    EXPECT_EQ(run_on(GetParam(), waiters_body(aspen::mpsc_channel<int>(4), false, false), "mpsc drop"), 16);
    EXPECT_EQ(run_on(GetParam(), waiters_body(aspen::mpsc_channel<int>(4), false, true), "mpsc drop thread"), 16);
}

TEST_P(SenderClosed, MpscWaitersCompleteWhenTheReceiverCloses) {
    EXPECT_EQ(run_on(GetParam(), waiters_body(aspen::mpsc_channel<int>(1), true, false), "mpsc close"), 16);
    EXPECT_EQ(run_on(GetParam(), waiters_body(aspen::unbounded_channel<int>(), true, true), "unbounded close"), 16);
    EXPECT_EQ(run_on(GetParam(), waiters_body(aspen::unbounded_channel<int>(), false, true), "unbounded drop"), 16);
}

// Half of the waiters are aborted while queued, then the receiver goes:
// the rest complete, and no aborted waiter's node is touched (ASan).
aspen::task<int> aborted_waiters_body() {
    auto [tx, rx] = aspen::mpsc_channel<int>(2);
    std::optional<aspen::mpsc_receiver<int>> held(std::move(rx));
    std::atomic<int> waiting{0}, done{0};
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < 64; ++i) hs.push_back(aspen::spawn(wait_closed(tx, &waiting, &done)));
    while (waiting.load() != 64) co_await aspen::yield_now();
    for (int i = 0; i < 64; i += 2) {
        auto& h = hs[static_cast<std::size_t>(i)];
        co_await aspen_test::abort_and_join(h);
        h = aspen::join_handle<void>();  // the task's block (and the frame's node) is freed now
    }
    held.reset();
    for (int i = 1; i < 64; i += 2) co_await hs[static_cast<std::size_t>(i)];
    co_return done.load();
}

TEST_P(SenderClosed, AbortedWaitersLeaveTheList) {
    // An aborted waiter could only have completed if the abort came after
    // the receiver went, which it does not here.
    EXPECT_EQ(run_on(GetParam(), aborted_waiters_body(), "aborted closed waiters"), 32);
}

// A responder that stops as soon as nobody will read its reply.
aspen::task<int> responder(aspen::oneshot_sender<int> tx, aspen::notify* never) {
    auto closed = tx.closed();
    auto work = never->notified();
    auto r = co_await aspen::select(std::move(closed), std::move(work));
    co_return static_cast<int>(r.index);
}

aspen::task<int> oneshot_body(bool from_thread) {
    aspen::notify never;
    auto [tx, rx] = aspen::oneshot_channel<int>();
    std::optional<aspen::oneshot_receiver<int>> held(std::move(rx));
    if (tx.is_closed()) co_return -1;
    aspen::join_handle<int> h = aspen::spawn(responder(std::move(tx), &never));
    co_await aspen::yield_now();
    if (from_thread) {
        std::thread t([&] { held.reset(); });
        t.join();
    } else {
        held.reset();
    }
    co_return co_await h;  // 0: closed() won
}

TEST_P(SenderClosed, OneshotClosedWinsASelectWhenTheReceiverGoes) {
    EXPECT_EQ(run_on(GetParam(), oneshot_body(false), "oneshot closed"), 0);
    EXPECT_EQ(run_on(GetParam(), oneshot_body(true), "oneshot closed thread"), 0);
}

aspen::task<int> oneshot_edges_body() {
    auto [tx, rx] = aspen::oneshot_channel<int>();
    {
        aspen::oneshot_receiver<int> gone = std::move(rx);
    }
    auto c = tx.closed();
    co_await std::move(c);  // receiver already gone: at once
    std::optional<int> back = tx.send(1);
    if (!back || *back != 1) co_return 1;
    try {
        auto used = tx.closed();  // the sender was consumed by send
        co_await std::move(used);
        co_return 2;
    } catch (const std::logic_error&) {
    }
    aspen::mpsc_sender<int> empty;
    try {
        (void)empty.closed();
        co_return 3;
    } catch (const std::logic_error&) {
    }
    co_return 0;
}

TEST_P(SenderClosed, ClosedOfAGoneReceiverIsReadyAndMisuseThrows) {
    EXPECT_EQ(run_on(GetParam(), oneshot_edges_body(), "closed edges"), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, SenderClosed, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
