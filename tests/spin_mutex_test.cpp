// Tests for aspen::detail::spin_mutex, the lock of the sync primitives:
// mutual exclusion counted exactly with more threads than cores (so holders
// get preempted and the yield path runs), and try_lock's answers.

#include <aspen/detail/spin_mutex.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

#if defined(ASPEN_SANITIZED)
constexpr int rounds = 20'000;
#else
constexpr int rounds = 200'000;
#endif

TEST(SpinMutex, PlainCounterUnderTheLockIsExactWithMoreThreadsThanCores) {
    aspen::detail::spin_mutex m;
    // Two plain words changed inside the lock: a lost update or a torn pair
    // shows as a wrong total or a mismatch (and as a race under TSan).
    std::uint64_t count = 0;
    std::uint64_t mirror = 0;
    std::uint64_t mismatches = 0;
    constexpr int threads = 16;
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
        pool.emplace_back([&] {
            for (int r = 0; r < rounds; ++r) {
                std::lock_guard g(m);
                if (count != mirror) ++mismatches;
                ++count;
                mirror = count;
            }
        });
    }
    for (auto& t : pool) t.join();
    EXPECT_EQ(count, std::uint64_t{threads} * rounds);
    EXPECT_EQ(mirror, count);
    EXPECT_EQ(mismatches, 0u);
}

TEST(SpinMutex, TryLockFailsWhileHeldAndSucceedsOnceFree) {
    aspen::detail::spin_mutex m;
    ASSERT_TRUE(m.try_lock());
    bool other_got_it = true;
    std::thread([&] { other_got_it = m.try_lock(); }).join();
    EXPECT_FALSE(other_got_it);
    m.unlock();
    std::thread([&] {
        other_got_it = m.try_lock();
        if (other_got_it) m.unlock();
    }).join();
    EXPECT_TRUE(other_got_it);
}

TEST(SpinMutex, AWaiterGetsTheLockWhenTheHolderReleasesIt) {
    aspen::detail::spin_mutex m;
    std::uint64_t value = 0;
    m.lock();
    std::thread waiter([&] {
        std::lock_guard g(m);  // spins, then yields, until the unlock below
        value += 1;
    });
    // The waiter cannot get in while we hold the lock, however long that is.
    std::this_thread::yield();
    value = 41;
    m.unlock();
    waiter.join();
    EXPECT_EQ(value, 42u);
}

}  // namespace
