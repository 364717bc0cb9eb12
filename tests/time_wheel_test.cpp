// Timer wheel: exact firing when stepping by next_expiration(), never early
// and never missed across random jumps spanning every level (and the
// overflow list), O(1) cancel of many timers.
#include "time/timer_wheel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

using aspen::detail::timer_entry;
using aspen::detail::timer_wheel;

namespace {

#ifdef ASPEN_SANITIZED
constexpr std::size_t scale = 10;
#else
constexpr std::size_t scale = 1;
#endif

// Log-uniform distance up to 2^max_bits: every level gets entries.
std::uint64_t random_distance(std::mt19937_64& rng, unsigned max_bits) {
    unsigned bits = std::uniform_int_distribution<unsigned>(0, max_bits)(rng);
    std::uint64_t hi = bits == 0 ? 1 : (std::uint64_t{1} << bits);
    return std::uniform_int_distribution<std::uint64_t>(0, hi)(rng);
}

std::size_t index_of(const timer_entry& e, const timer_entry* base) { return static_cast<std::size_t>(&e - base); }

}  // namespace

TEST(TimerWheel, EmptyHasNoExpiration) {
    timer_wheel w;
    EXPECT_FALSE(w.next_expiration());
    int fired = 0;
    w.advance(1'000'000, [&](timer_entry&) { ++fired; });
    EXPECT_EQ(fired, 0);
    EXPECT_EQ(w.elapsed(), 1'000'000u);
    EXPECT_FALSE(w.next_expiration());
}

TEST(TimerWheel, BoundaryDeadlinesFireExactlyAtTheirTick) {
    const std::uint64_t start = 12'345;  // not aligned to any level
    std::vector<std::uint64_t> distances = {1,
                                            2,
                                            63,
                                            64,
                                            65,
                                            4095,
                                            4096,
                                            4097,
                                            (1ull << 18) - 1,
                                            1ull << 18,
                                            (1ull << 24) + 3,
                                            (1ull << 30) + 7,
                                            (1ull << 36) - 1,
                                            1ull << 36,
                                            (1ull << 36) + 1,
                                            (1ull << 42) + 5};
    for (std::uint64_t d : distances) {
        timer_wheel w(start);
        timer_entry e;
        w.insert(e, start + d);
        std::uint64_t fired_at = 0;
        int steps = 0;
        while (auto next = w.next_expiration()) {
            ASSERT_LE(*next, start + d) << "next_expiration later than the deadline, d=" << d;
            ASSERT_GT(*next, w.elapsed()) << "d=" << d;
            w.advance(*next, [&](timer_entry& x) {
                EXPECT_EQ(&x, &e);
                fired_at = *next;
            });
            // <= 6 cascades, plus one step per 2^36 ms span for the overflow list.
            ASSERT_LT(++steps, 8 + static_cast<int>(d >> 36)) << "too many cascade steps, d=" << d;
        }
        EXPECT_EQ(fired_at, start + d) << "d=" << d;
        EXPECT_TRUE(w.empty());
        EXPECT_FALSE(e.is_linked());
    }
}

TEST(TimerWheel, RandomDeadlinesFireInOrderAtTheirTick) {
    const std::size_t n = 50'000 / scale;
    std::mt19937_64 rng(42);
    const std::uint64_t start = 987'654'321;
    timer_wheel w(start);
    auto entries = std::make_unique<timer_entry[]>(n);
    std::vector<std::uint64_t> deadline(n);
    for (std::size_t i = 0; i < n; ++i) {
        deadline[i] = start + random_distance(rng, 40);  // beyond 2^36: overflow list too
        w.insert(entries[i], deadline[i]);
    }
    std::vector<std::uint64_t> sorted = deadline;
    std::sort(sorted.begin(), sorted.end());
    std::size_t next_unfired = 0;  // entries fire in deadline order: sorted[next_unfired] is the earliest pending
    std::vector<bool> fired(n, false);
    std::uint64_t last = 0;
    while (auto next = w.next_expiration()) {
        ASSERT_LT(next_unfired, n);
        // Never later than the earliest pending deadline.
        ASSERT_LE(*next, sorted[next_unfired]);
        w.advance(*next, [&](timer_entry& e) {
            std::size_t i = index_of(e, entries.get());
            // Stepping by next_expiration: each entry fires exactly at its
            // deadline, so in deadline order.
            ASSERT_EQ(deadline[i], *next);
            ASSERT_GE(deadline[i], last);
            ASSERT_FALSE(fired[i]);
            ASSERT_EQ(sorted[next_unfired], deadline[i]);
            last = deadline[i];
            fired[i] = true;
            ++next_unfired;
        });
    }
    std::size_t fired_count = next_unfired;
    EXPECT_EQ(fired_count, n);
    EXPECT_TRUE(w.empty());
}

TEST(TimerWheel, RandomJumpsInsertsAndCancelsNeverEarlyNeverMissed) {
    const std::size_t n = 20'000 / scale;
    std::mt19937_64 rng(7);
    timer_wheel w(5);
    auto entries = std::make_unique<timer_entry[]>(n);
    std::vector<std::uint64_t> deadline(n, 0);
    std::set<std::pair<std::uint64_t, std::size_t>> pending;  // (deadline, index)
    std::vector<std::size_t> idle(n);
    std::iota(idle.begin(), idle.end(), 0);
    std::size_t fires = 0;

    for (int round = 0; round < 4000; ++round) {
        // Arm a few idle entries, some already due (deadline <= elapsed).
        for (int k = 0; k < 8 && !idle.empty(); ++k) {
            std::size_t pick = std::uniform_int_distribution<std::size_t>(0, idle.size() - 1)(rng);
            std::size_t i = idle[pick];
            idle[pick] = idle.back();
            idle.pop_back();
            std::uint64_t base = w.elapsed();
            if (rng() % 16 == 0)
                deadline[i] = base - std::min<std::uint64_t>(base, rng() % 3);
            else
                deadline[i] = base + random_distance(rng, 38);
            w.insert(entries[i], deadline[i]);
            pending.emplace(deadline[i], i);
        }
        // Cancel a few.
        for (int k = 0; k < 2 && !pending.empty(); ++k) {
            auto it = pending.begin();
            std::advance(it, static_cast<long>(rng() % std::min<std::size_t>(pending.size(), 64)));
            std::size_t i = it->second;
            w.remove(entries[i]);
            w.remove(entries[i]);  // second cancel is a no-op
            EXPECT_FALSE(entries[i].is_linked());
            pending.erase(it);
            idle.push_back(i);
        }
        ASSERT_EQ(w.size(), pending.size());
        if (auto next = w.next_expiration()) {
            ASSERT_FALSE(pending.empty());
            // Already-due entries (deadline < elapsed) are reported as elapsed.
            ASSERT_LE(*next, std::max(pending.begin()->first, w.elapsed()))
                << "next_expiration after the earliest deadline";
        } else {
            ASSERT_TRUE(pending.empty());
        }
        // Jump: sometimes 0, sometimes small, sometimes across levels.
        std::uint64_t now = w.elapsed() + (rng() % 4 == 0 ? 0 : random_distance(rng, 37));
        w.advance(now, [&](timer_entry& e) {
            std::size_t i = index_of(e, entries.get());
            ASSERT_LE(deadline[i], now) << "fired early";
            ASSERT_EQ(pending.erase({deadline[i], i}), 1u) << "fired twice or after cancel";
            idle.push_back(i);
            ++fires;
        });
        ASSERT_EQ(w.elapsed(), now);
        // Never missed: nothing pending is due.
        ASSERT_TRUE(pending.empty() || pending.begin()->first > now) << "due entry not fired";
    }
    EXPECT_GT(fires, 0u);
    for (auto& [d, i] : pending) w.remove(entries[i]);
    EXPECT_TRUE(w.empty());
}

TEST(TimerWheel, AlreadyDueInsertFiresOnNextAdvance) {
    timer_wheel w(1000);
    timer_entry a, b;
    w.insert(a, 1000);
    w.insert(b, 3);
    ASSERT_TRUE(w.next_expiration());
    EXPECT_EQ(*w.next_expiration(), 1000u);
    int fired = 0;
    w.advance(1000, [&](timer_entry&) { ++fired; });
    EXPECT_EQ(fired, 2);
    EXPECT_TRUE(w.empty());
}

TEST(TimerWheel, RemoveAfterFireIsNoopAndReinsertWorks) {
    timer_wheel w;
    timer_entry e;
    w.insert(e, 10);
    int fired = 0;
    w.advance(10, [&](timer_entry&) { ++fired; });
    ASSERT_EQ(fired, 1);
    w.remove(e);  // already fired
    EXPECT_TRUE(w.empty());
    w.insert(e, 200);
    w.advance(199, [&](timer_entry&) { ++fired; });
    EXPECT_EQ(fired, 1);
    w.advance(200, [&](timer_entry&) { ++fired; });
    EXPECT_EQ(fired, 2);
}

TEST(TimerWheel, FireCallbackMayInsertAndRemove) {
    timer_wheel w;
    timer_entry a, b, c;
    w.insert(a, 5);
    w.insert(b, 5);
    w.insert(c, 100);
    std::vector<timer_entry*> order;
    w.advance(50, [&](timer_entry& e) {
        order.push_back(&e);
        if (&e == &a || &e == &b) {
            w.remove(&e == &a ? b : a);  // cancel the sibling if still armed
            w.remove(c);
            w.insert(c, 40);  // due within this same advance
        }
    });
    ASSERT_EQ(order.size(), 2u);
    EXPECT_EQ(order[1], &c);
    EXPECT_TRUE(w.empty());
}

TEST(TimerWheel, CancelManyTimersLeavesWheelEmpty) {
#ifdef ASPEN_SANITIZED
    const std::size_t n = 100'000;
#else
    const std::size_t n = 1'000'000;
#endif
    std::mt19937_64 rng(1);
    timer_wheel w(777);
    auto entries = std::make_unique<timer_entry[]>(n);
    for (std::size_t i = 0; i < n; ++i) w.insert(entries[i], 700 + random_distance(rng, 40));
    ASSERT_EQ(w.size(), n);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i : order) w.remove(entries[i]);
    EXPECT_EQ(w.size(), 0u);
    EXPECT_TRUE(w.empty());
    EXPECT_FALSE(w.next_expiration());
    std::size_t fired = 0;
    w.advance(~std::uint64_t{0} >> 1, [&](timer_entry&) { ++fired; });
    EXPECT_EQ(fired, 0u);
    for (std::size_t i = 0; i < n; ++i) ASSERT_FALSE(entries[i].is_linked());
}
