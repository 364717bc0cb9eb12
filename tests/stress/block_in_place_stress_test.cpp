// aspen::block_in_place and aspen::unconstrained under stress, at 1, 2, 8
// and 16 workers: tasks hand their workers off (functions that spin, sleep,
// call block_in_place again, spawn through the handle and block_on it)
// while other tasks spawn, steal, sleep on timers, trade messages over a
// bounded channel and are aborted at random; children that block in place
// while a joiner runs them nested; chains of stand-ins whose tasks hand
// the worker on again; runtimes destroyed while functions block; and
// unconstrained bodies that suspend and are aborted while a task joins
// them. Counted exactly: every task's frame is destroyed once, every
// function that began returned, every message counted as sent was
// received, and no task is left alive.
#include "../runtime_kinds.hpp"
#include "splitmix.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using aspen_test::counted;
using aspen_test::within;
using aspen_test::workers;
using stress_util::splitmix;

#ifdef ASPEN_SANITIZED
constexpr int actors = 24;
constexpr int steps = 6;
constexpr int shutdown_rounds = 6;
#else
constexpr int actors = 96;
constexpr int steps = 10;
constexpr int shutdown_rounds = 20;
#endif

// Spins for about `ns` nanoseconds (0..): a function that returns at once
// or soon, the hand-back racing the stand-in's way to sleep.
void spin_for(std::uint64_t ns) {
    auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
    while (std::chrono::steady_clock::now() < end) {
    }
}

void wait_for_flag(const std::atomic<bool>& flag) {
    while (!flag.load()) std::this_thread::sleep_for(50us);
}

// What every actor counts.
struct tally {
    std::atomic<long> fn_began{0}, fn_returned{0};
    std::atomic<long> sent{0}, received{0};
    std::atomic<long> finished{0}, cancelled{0};
    // Task frames given a token, and tokens destroyed with their frames.
    std::atomic<long> made{0}, destroyed{0};
};

// The token of one more task frame.
counted token(tally* t) {
    t->made.fetch_add(1);
    return counted(&t->destroyed);
}

aspen::task<int> leaf(counted) { co_return 1; }

// A child that hands its worker off; run nested when its spawner joins it
// at once (the join's fast path takes it from the next slot).
aspen::task<int> blocking_child(tally* t, counted, std::uint64_t ns) {
    t->fn_began.fetch_add(1);
    int r = aspen::block_in_place([&] {
        spin_for(ns);
        return 1;
    });
    t->fn_returned.fetch_add(1);
    co_return r;
}

aspen::task<void> consumer(aspen::mpsc_receiver<int> rx, tally* t) {
    // Awaited into a variable, never in a condition: README, "Compiler
    // caveats" (g++ 12 never runs the body of `while (co_await ...)`).
    for (;;) {
        std::optional<int> v = co_await rx.recv();
        if (!v) break;
        t->received.fetch_add(1);
    }
}

aspen::task<void> actor(tally* t, counted, std::uint64_t key, aspen::mpsc_sender<int> tx) {
    splitmix r{key};
    for (int s = 0; s < steps; ++s) {
        switch (r() % 8) {
            case 0: {  // a short function
                t->fn_began.fetch_add(1);
                aspen::block_in_place([&] { spin_for(r() % 30'000); });
                t->fn_returned.fetch_add(1);
                break;
            }
            case 1: {  // a function that sleeps, nests, and uses the handle
                std::uint64_t mode = r() % 3;
                t->fn_began.fetch_add(1);
                std::optional<aspen::join_handle<int>> remote;
                int v = aspen::block_in_place([&] {
                    std::this_thread::sleep_for(std::chrono::microseconds(r() % 300));
                    if (mode == 0) return aspen::block_in_place([] { return 1; });  // runs directly
                    aspen::runtime_handle h = aspen::runtime_handle::current();
                    if (mode == 1) return h.block_on(leaf(token(t)));
                    remote.emplace(h.spawn(leaf(token(t))));
                    return 1;
                });
                t->fn_returned.fetch_add(1);
                if (v != 1) throw std::logic_error("block_in_place: wrong result");
                if (remote) {
                    int got = co_await *remote;
                    if (got != 1) throw std::logic_error("remote spawn: wrong result");
                }
                break;
            }
            case 2: {  // a child run nested by this joiner hands off
                auto h = aspen::spawn(blocking_child(t, token(t), r() % 20'000));
                int got = co_await h;
                if (got != 1) throw std::logic_error("blocking child: wrong result");
                break;
            }
            case 3: {  // fan out for the thieves
                std::vector<aspen::join_handle<int>> hs;
                for (int k = 0; k < 4; ++k) hs.push_back(aspen::spawn(leaf(token(t))));
                for (auto& h : hs) co_await h;
                break;
            }
            case 4:
                co_await aspen::sleep(std::chrono::microseconds(r() % 400));
                break;
            case 5:
                co_await aspen::yield_now();
                break;
            default: {  // bounded channel traffic (capacity 2: senders wait)
                for (int k = 0; k < 3; ++k) {
                    // Cancel-safe: an aborted send sent nothing.
                    auto back = co_await tx.send(k);
                    if (back) throw std::logic_error("channel closed early");
                    t->sent.fetch_add(1);
                }
                break;
            }
        }
    }
    t->finished.fetch_add(1);
}

// Aborts a random third of the actors at random moments, then joins all.
aspen::task<void> mixed(tally* t, std::uint64_t seed) {
    auto ch = aspen::mpsc_channel<int>(2);
    auto sink = aspen::spawn(consumer(std::move(ch.second), t));
    std::vector<aspen::join_handle<void>> hs;
    splitmix r{seed};
    for (int i = 0; i < actors; ++i) hs.push_back(aspen::spawn(actor(t, token(t), r(), ch.first)));
    { auto last = std::move(ch.first); }  // the actors hold the rest
    for (int i = 0; i < actors; ++i) {
        if (r() % 3 != 0) continue;
        if (r() % 2) co_await aspen::yield_now();
        else co_await aspen::sleep(std::chrono::microseconds(r() % 200));
        hs[r() % hs.size()].abort();
    }
    for (auto& h : hs) {
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            t->cancelled.fetch_add(1);
        }
    }
    co_await sink;
}

// The children of an aborted actor were detached, not aborted: they may
// still be finishing when the actors are joined.
void wait_until_no_task_is_alive(aspen::runtime& rt) {
    while (rt.metrics().tasks_alive != 0) std::this_thread::sleep_for(100us);
}

class BlockInPlaceStress : public ::testing::TestWithParam<int> {};

TEST_P(BlockInPlaceStress, MixedWorkloadWithAbortsCountsEveryTaskOnce) {
    const auto n = static_cast<std::size_t>(GetParam());
    for (std::uint64_t seed : {1u, 2u, 3u}) {
        tally t;
        {
            aspen::runtime rt(workers(n));
            within(120s, "block_in_place mixed workload", [&] {
                rt.block_on(mixed(&t, seed * 7919 + n));
                wait_until_no_task_is_alive(rt);
            });
        }
        EXPECT_EQ(t.finished.load() + t.cancelled.load(), actors) << "seed " << seed;
        EXPECT_EQ(t.fn_began.load(), t.fn_returned.load()) << "seed " << seed;
        EXPECT_EQ(t.sent.load(), t.received.load()) << "seed " << seed;
        EXPECT_EQ(t.destroyed.load(), t.made.load()) << "seed " << seed;
    }
}

// A chain of handoffs: task k spawns task k+1, sets the flag its parent's
// function waits for, and blocks in place until task k+1 sets its own. With
// one worker every link is a stand-in of the one before (B hands w on to
// C, C to D...), and each hand-back must wait for the inner poll to end.
aspen::task<int> link(std::vector<std::atomic<bool>>* flags, std::size_t k, tally* t, counted) {
    (*flags)[k].store(true);  // our parent's function may return now
    if (k + 1 == flags->size()) co_return 1;
    auto next = aspen::spawn(link(flags, k + 1, t, token(t)));
    t->fn_began.fetch_add(1);
    aspen::block_in_place([&] { wait_for_flag((*flags)[k + 1]); });
    t->fn_returned.fetch_add(1);
    co_return 1 + co_await next;
}

TEST_P(BlockInPlaceStress, NestedHandoffChainsUnwind) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    for (std::size_t depth : {2u, 5u, 9u}) {
        for (int round = 0; round < 5; ++round) {
            tally t;
            std::vector<std::atomic<bool>> flags(depth);
            int got = 0;
            within(60s, "a chain of nested block_in_place handoffs",
                   [&] { got = rt.block_on(link(&flags, 0, &t, token(&t))); });
            EXPECT_EQ(got, static_cast<int>(depth));
            EXPECT_EQ(t.fn_began.load(), static_cast<long>(depth) - 1);
            EXPECT_EQ(t.fn_returned.load(), t.fn_began.load());
            EXPECT_EQ(t.made.load(), static_cast<long>(depth));
            EXPECT_EQ(t.destroyed.load(), t.made.load());
        }
    }
    EXPECT_EQ(rt.metrics().tasks_alive, 0u);
}

// A child joined at once (so run nested in its parent's poll) blocks in
// place until a sibling queued behind it on the same worker has run; the
// child itself joins a grandchild that does the same, two joins deep.
aspen::task<void> set_flag(std::atomic<bool>* f) {
    f->store(true);
    co_return;
}

aspen::task<int> nested_blocker(int depth, tally* t, counted) {
    std::atomic<bool> sibling_ran{false};
    auto sibling = aspen::spawn(set_flag(&sibling_ran));
    int below = 0;
    if (depth > 0) {
        aspen::join_handle<int> child = aspen::spawn(nested_blocker(depth - 1, t, token(t)));
        below = co_await child;
    }
    t->fn_began.fetch_add(1);
    aspen::block_in_place([&] { wait_for_flag(sibling_ran); });
    t->fn_returned.fetch_add(1);
    co_await sibling;
    co_return below + 1;
}

aspen::task<int> nested_joiners(tally* t, int n) {
    std::vector<aspen::join_handle<int>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(aspen::spawn(nested_blocker(i % 3, t, token(t))));
    int sum = 0;
    for (auto& h : hs) sum += co_await h;
    // And one joined at once from here, nested in this poll.
    aspen::join_handle<int> last = aspen::spawn(nested_blocker(2, t, token(t)));
    sum += co_await last;
    co_return sum;
}

TEST_P(BlockInPlaceStress, ChildRunNestedByItsJoinerHandsOff) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    constexpr int n = 12;
    for (int round = 0; round < 4; ++round) {
        tally t;
        int sum = 0;
        within(60s, "block_in_place in children run nested by their joiners",
               [&] { sum = rt.block_on(nested_joiners(&t, n)); });
        // Depth d makes d + 1 blockers: n/3 each of depth 0, 1, 2, then one of 2.
        const int blockers = (n / 3) * (1 + 2 + 3) + 3;
        EXPECT_EQ(sum, blockers);
        EXPECT_EQ(t.fn_began.load(), blockers);
        EXPECT_EQ(t.fn_returned.load(), blockers);
        EXPECT_EQ(t.made.load(), blockers);
        EXPECT_EQ(t.destroyed.load(), blockers);
    }
    EXPECT_EQ(rt.metrics().tasks_alive, 0u);
}

// The runtime is destroyed while tasks hand off over and over, their
// functions spawning and blocking on the runtime through the handle (which
// then throws runtime_shut_down, or task_cancelled when shutdown cancels
// the task it waits for): the destruction waits for every function, and
// every frame is destroyed exactly once.
aspen::task<void> hands_off_forever(tally* t, counted, std::uint64_t key) {
    splitmix r{key};
    for (;;) {
        t->fn_began.fetch_add(1);
        std::optional<aspen::join_handle<int>> remote;
        aspen::block_in_place([&] {
            std::uint64_t mode = r() % 4;
            if (mode == 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(r() % 200));
            } else if (mode == 1) {
                spin_for(r() % 20'000);
            } else {
                try {
                    aspen::runtime_handle h = aspen::runtime_handle::current();
                    if (mode == 2) (void)h.block_on(leaf(token(t)));
                    else remote.emplace(h.spawn(leaf(token(t))));
                } catch (const aspen::runtime_shut_down&) {  // refused: shutdown began
                } catch (const aspen::task_cancelled&) {     // accepted, then cancelled by shutdown
                }
            }
        });
        t->fn_returned.fetch_add(1);
        if (remote) co_await *remote;
        if (r() % 2) co_await aspen::yield_now();
        else co_await aspen::sleep(std::chrono::microseconds(r() % 100));
    }
}

TEST_P(BlockInPlaceStress, DestructionRacesHandoffs) {
    const auto n = static_cast<std::size_t>(GetParam());
    splitmix r{n};
    for (int round = 0; round < shutdown_rounds; ++round) {
        tally t;
        const int tasks = 2 * static_cast<int>(n) + 1;
        within(60s, "destroying a runtime while tasks block in place", [&] {
            aspen::runtime rt(workers(n));
            for (int i = 0; i < tasks; ++i) rt.spawn(hands_off_forever(&t, token(&t), r())).detach();
            std::this_thread::sleep_for(std::chrono::microseconds(r() % 3000));
        });
        EXPECT_EQ(t.fn_began.load(), t.fn_returned.load()) << "round " << round;
        // The loops and every leaf, accepted or refused, are destroyed once.
        EXPECT_EQ(t.destroyed.load(), t.made.load()) << "round " << round;
    }
}

// Unconstrained bodies that suspend (receive, sleep, hand off) are aborted
// while another task joins them; others finish. Every frame goes once and
// every joiner sees a value or task_cancelled.
aspen::task<int> unconstrained_body(aspen::mpsc_receiver<int>* rx, tally* t, counted, std::uint64_t key) {
    splitmix r{key};
    int got = 0;
    for (int i = 0; i < 4; ++i) {
        for (int k = 0; k < 50; ++k) co_await aspen::consume_budget();  // never yields here
        if (!aspen::has_budget_remaining()) throw std::logic_error("unconstrained: no budget left");
        switch (r() % 3) {
            case 0: {
                std::optional<int> v = co_await rx->recv();
                if (v) ++got;
                break;
            }
            case 1:
                co_await aspen::sleep(std::chrono::microseconds(r() % 300));
                break;
            default:
                t->fn_began.fetch_add(1);
                aspen::block_in_place([&] { spin_for(r() % 10'000); });
                t->fn_returned.fetch_add(1);
                break;
        }
    }
    co_return got;
}

aspen::task<int> runs_unconstrained(aspen::mpsc_receiver<int> rx, tally* t, counted, std::uint64_t key) {
    aspen::task<int> body = aspen::unconstrained(unconstrained_body(&rx, t, token(t), key));
    int got = co_await std::move(body);
    // Constrained again: the budget is back within one poll's.
    for (int k = 0; k < 3; ++k) co_await aspen::consume_budget();
    t->finished.fetch_add(1);
    co_return got;
}

aspen::task<void> joiner(aspen::join_handle<int> h, tally* t) {
    try {
        (void)co_await h;
    } catch (const aspen::task_cancelled&) {
        t->cancelled.fetch_add(1);
    }
}

aspen::task<void> unconstrained_aborts(tally* t, int n, std::uint64_t seed) {
    splitmix r{seed};
    std::vector<aspen::mpsc_sender<int>> txs;
    std::vector<aspen::abort_handle> aborts;
    std::vector<aspen::join_handle<void>> joiners;
    for (int i = 0; i < n; ++i) {
        auto [tx, rx] = aspen::mpsc_channel<int>(4);
        txs.push_back(std::move(tx));
        auto h = aspen::spawn(runs_unconstrained(std::move(rx), t, token(t), r()));
        aborts.push_back(h.abort_handle());
        joiners.push_back(aspen::spawn(joiner(std::move(h), t)));
    }
    for (int i = 0; i < n; ++i) {
        // try_send: a message or not, never a wait.
        for (auto& tx : txs) (void)tx.try_send(i);
        if (r() % 2) co_await aspen::sleep(std::chrono::microseconds(r() % 200));
        else co_await aspen::yield_now();
        if (r() % 3 == 0) aborts[r() % aborts.size()].abort();
    }
    txs.clear();  // the receivers see end of stream: every body ends
    for (auto& j : joiners) co_await j;
}

TEST_P(BlockInPlaceStress, UnconstrainedBodiesAbortedWhileJoined) {
    const auto n = static_cast<std::size_t>(GetParam());
    aspen::config cfg = workers(n);
    cfg.coop_budget = 8;
    aspen::runtime rt(cfg);
    constexpr int bodies = 16;
    for (std::uint64_t seed : {11u, 12u, 13u}) {
        tally t;
        within(60s, "unconstrained bodies aborted while joined",
               [&] { rt.block_on(unconstrained_aborts(&t, bodies, seed * 31 + n)); });
        EXPECT_EQ(t.finished.load() + t.cancelled.load(), bodies) << "seed " << seed;
        EXPECT_EQ(t.fn_began.load(), t.fn_returned.load()) << "seed " << seed;
        EXPECT_EQ(t.destroyed.load(), t.made.load()) << "seed " << seed;
        EXPECT_EQ(rt.metrics().tasks_alive, 0u) << "seed " << seed;
    }
}

INSTANTIATE_TEST_SUITE_P(Workers, BlockInPlaceStress, ::testing::Values(1, 2, 8, 16),
                         [](const ::testing::TestParamInfo<int>& info) { return "workers" + std::to_string(info.param); });

// The runtime is destroyed while a function waits for a task of that
// runtime that only shutdown ends (a long sleep): through the handle's
// block_on, or in blocking_recv on a channel whose sender that task holds.
// Shutdown must cancel the task rather than wait for the function first
// (it used to hang: the task was cancelled only after the workers' threads,
// the function's among them, were joined).
aspen::task<void> long_sleep() { co_await aspen::sleep(1h); }

aspen::task<void> holds_sender(aspen::mpsc_sender<int> tx) {
    co_await aspen::sleep(1h);
    (void)co_await tx.send(1);
}

aspen::task<void> waits_on_the_runtime(bool via_channel, std::atomic<bool>* entered, std::atomic<int>* outcome) {
    std::optional<aspen::mpsc_receiver<int>> rx;
    if (via_channel) {
        auto ch = aspen::mpsc_channel<int>(1);
        aspen::spawn(holds_sender(std::move(ch.first))).detach();
        rx.emplace(std::move(ch.second));
    }
    aspen::block_in_place([&] {
        aspen::runtime_handle h = aspen::runtime_handle::current();
        entered->store(true);
        if (via_channel) {
            outcome->store(rx->blocking_recv() ? 1 : 4);  // 4: end of stream
            return;
        }
        try {
            h.block_on(long_sleep());
            outcome->store(1);
        } catch (const aspen::task_cancelled&) {
            outcome->store(2);
        } catch (const aspen::runtime_shut_down&) {
            outcome->store(3);
        }
    });
    co_return;
}

TEST(BlockInPlaceShutdownStress, DestructionWhileTheFunctionWaitsOnTheRuntime) {
    for (bool via_channel : {false, true}) {
        for (std::size_t n : {1u, 2u, 8u}) {
            std::atomic<bool> entered{false};
            std::atomic<int> outcome{0};
            within(60s, "destroying a runtime while a block_in_place function waits on it", [&] {
                aspen::runtime rt(workers(n));
                rt.spawn(waits_on_the_runtime(via_channel, &entered, &outcome)).detach();
                wait_for_flag(entered);
            });
            // block_on: its task cancelled (or, had shutdown begun before
            // it, refused); blocking_recv: the sender gone.
            if (via_channel) EXPECT_EQ(outcome.load(), 4) << n << " workers";
            else EXPECT_TRUE(outcome.load() == 2 || outcome.load() == 3) << n << " workers: " << outcome.load();
        }
    }
}

}  // namespace
