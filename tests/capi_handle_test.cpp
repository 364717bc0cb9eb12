// aspen_handle (include/aspen/aspen.h, "handles"): threads that do not own
// a runtime spawn onto it through a handle, also while another thread frees
// it and after; every task's drop runs exactly once.
#include "capi_util.hpp"
#include "runtime_kinds.hpp"

#include <aspen/aspen.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using aspen_test::make_c_runtime;
using namespace std::chrono_literals;

struct counts {
    std::atomic<int> runs{0};
    std::atomic<int> drops{0};
};

// relaxed: read after joins, the threads' join or the runtime's free,
// which order them.
void drop_count(void* d) { static_cast<counts*>(d)->drops.fetch_add(1, std::memory_order_relaxed); }

aspen_status ready_task(void* d, aspen_context*) {
    static_cast<counts*>(d)->runs.fetch_add(1, std::memory_order_relaxed);
    return ASPEN_READY;
}

aspen_status blocking_fn(void* d) {
    static_cast<counts*>(d)->runs.fetch_add(1, std::memory_order_relaxed);
    return ASPEN_OK;
}

bool last_error_mentions(const char* text) { return std::string(aspen_last_error()).find(text) != std::string::npos; }

class capi_handle : public ::testing::TestWithParam<int> {};

// Plain threads holding only a clone of a handle spawn tasks and blocking
// functions and join them; then the runtime is freed and the handle
// refuses, dropping what it was given.
TEST_P(capi_handle, PlainThreadsSpawnThroughAHandleUntilTheRuntimeIsFreed) {
    aspen_runtime* rt = make_c_runtime(GetParam());
    aspen_handle* h = nullptr;
    ASSERT_EQ(aspen_runtime_handle(rt, &h), ASPEN_OK);
    constexpr int threads = 4, per_thread = 100;
    counts c;
    std::vector<std::thread> spawners;
    for (int i = 0; i < threads; ++i)
        spawners.emplace_back([&] {
            aspen_handle* mine = nullptr;
            ASSERT_EQ(aspen_handle_clone(h, &mine), ASPEN_OK);
            for (int k = 0; k < per_thread; ++k) {
                aspen_join* j = nullptr;
                aspen_status s = k % 4 == 0 ? aspen_handle_spawn_blocking(mine, blocking_fn, &c, drop_count, &j)
                                            : aspen_handle_spawn(mine, ready_task, &c, drop_count, &j);
                ASSERT_EQ(s, ASPEN_OK) << aspen_last_error();
                EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
                aspen_join_free(j);
            }
            aspen_handle_free(mine);
        });
    for (auto& t : spawners) t.join();
    EXPECT_EQ(c.runs.load(), threads * per_thread);
    EXPECT_EQ(c.drops.load(), threads * per_thread);

    ASSERT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    counts late;
    aspen_join* j = nullptr;
    EXPECT_EQ(aspen_handle_spawn(h, ready_task, &late, drop_count, &j), ASPEN_SHUT_DOWN);
    EXPECT_TRUE(last_error_mentions("aspen_handle_spawn: the handle's runtime was freed")) << aspen_last_error();
    EXPECT_EQ(j, nullptr);
    EXPECT_EQ(aspen_handle_spawn_blocking(h, blocking_fn, &late, drop_count, nullptr), ASPEN_SHUT_DOWN);
    EXPECT_EQ(late.runs.load(), 0);
    EXPECT_EQ(late.drops.load(), 2);
    aspen_handle_free(h);
}

// After a shutdown (the runtime not freed yet) a handle's spawns fail as
// aspen_spawn's do.
TEST_P(capi_handle, SpawnsAfterShutdownAreRefused) {
    aspen_runtime* rt = make_c_runtime(GetParam());
    aspen_handle* h = nullptr;
    ASSERT_EQ(aspen_runtime_handle(rt, &h), ASPEN_OK);
    ASSERT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);
    counts c;
    EXPECT_EQ(aspen_handle_spawn(h, ready_task, &c, drop_count, nullptr), ASPEN_SHUT_DOWN);
    EXPECT_EQ(aspen_handle_spawn_blocking(h, blocking_fn, &c, drop_count, nullptr), ASPEN_SHUT_DOWN);
    EXPECT_EQ(c.runs.load(), 0);
    EXPECT_EQ(c.drops.load(), 2);
    aspen_handle_free(h);  // before the runtime this time
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

INSTANTIATE_TEST_SUITE_P(Kinds, capi_handle, aspen_test::runtime_kinds, aspen_test::kind_name);

// Threads spawn through handles and wait for their joins while the main
// thread frees the runtime: no call touches a freed runtime (ASan, TSan),
// each spawn either succeeds (its join then reports the task's end: OK, or
// ASPEN_SHUT_DOWN if the free dropped it) or is refused, and every drop
// runs exactly once. Multi-threaded runtimes only: a join's wait on a
// current-thread runtime drives it, so it must not race with its free.
TEST(CapiHandleRace, SpawnsAndJoinsRacingTheRuntimesFree) {
    for (int workers : {1, 2, 8}) {
        for (int round = 0; round < 20; ++round) {
            aspen_runtime* rt = make_c_runtime(workers);
            aspen_handle* h = nullptr;
            ASSERT_EQ(aspen_runtime_handle(rt, &h), ASPEN_OK);
            counts c;
            std::atomic<int> accepted{0}, refused{0};
            std::vector<std::thread> spawners;
            for (int i = 0; i < 3; ++i)
                spawners.emplace_back([&, i] {
                    for (int k = 0; k < 200; ++k) {
                        aspen_join* j = nullptr;
                        aspen_status s = (i + k) % 5 == 0
                                             ? aspen_handle_spawn_blocking(h, blocking_fn, &c, drop_count, &j)
                                             : aspen_handle_spawn(h, ready_task, &c, drop_count, &j);
                        if (s == ASPEN_SHUT_DOWN) {
                            refused.fetch_add(1, std::memory_order_relaxed);
                            continue;
                        }
                        ASSERT_EQ(s, ASPEN_OK) << aspen_last_error();
                        accepted.fetch_add(1, std::memory_order_relaxed);
                        aspen_status o = aspen_join_wait(j);
                        EXPECT_TRUE(o == ASPEN_OK || o == ASPEN_SHUT_DOWN) << aspen_status_name(o);
                        aspen_join_free(j);
                    }
                });
            // Free in the middle of the spawning, not before it began.
            while (accepted.load(std::memory_order_relaxed) < 100) std::this_thread::yield();
            ASSERT_EQ(aspen_runtime_free(rt), ASPEN_OK);
            for (auto& t : spawners) t.join();
            aspen_handle_free(h);
            EXPECT_EQ(accepted.load() + refused.load(), 600);
            EXPECT_EQ(c.drops.load(), 600) << workers << " workers, round " << round;
            EXPECT_LE(c.runs.load(), accepted.load());
        }
    }
}

// Pending for ever (stores no waker): only an abort or the free ends it.
aspen_status pending_task(void* d, aspen_context*) {
    static_cast<counts*>(d)->runs.fetch_add(1, std::memory_order_relaxed);
    return ASPEN_PENDING;
}

// A thread waits on the join of a task that never ends by itself while
// another frees the runtime: the free drops the task and the wait returns
// ASPEN_SHUT_DOWN after the drop ran.
TEST(CapiHandleRace, TheFreeEndsAWaitOnAJoin) {
    for (int workers : {1, 2, 8}) {
        aspen_runtime* rt = make_c_runtime(workers);
        aspen_handle* h = nullptr;
        ASSERT_EQ(aspen_runtime_handle(rt, &h), ASPEN_OK);
        counts c;
        std::atomic<bool> waiting{false};
        aspen_status outcome = ASPEN_OK;
        std::thread waiter([&] {
            aspen_join* j = nullptr;
            ASSERT_EQ(aspen_handle_spawn(h, pending_task, &c, drop_count, &j), ASPEN_OK);
            waiting.store(true);
            outcome = aspen_join_wait(j);
            EXPECT_EQ(c.drops.load(), 1);  // the drop ran before the join reported
            aspen_join_free(j);
        });
        while (!waiting.load() || c.runs.load() == 0) std::this_thread::yield();
        ASSERT_EQ(aspen_runtime_free(rt), ASPEN_OK);
        waiter.join();
        EXPECT_EQ(outcome, ASPEN_SHUT_DOWN) << aspen_status_name(outcome);
        EXPECT_EQ(c.drops.load(), 1);
        aspen_handle_free(h);
    }
}

// Two plain threads wait on joins of one current_thread runtime at once:
// one drives, the other waits, its task runs in that drive, and its wait
// returns when that task ends, while the drive goes on. a's task ends only
// after b's thread has returned from its wait; b's task waits for the main
// thread, which lets it go 20 ms after b's thread started, by when that
// thread is in its wait. (Before the hand-over, C waits on a current_thread
// runtime queued on a mutex, so b's wait could not return while a's drive
// ran: this hung into its watchdog.)
struct meeting {
    std::mutex m;
    bool b_may_run = false, b_returned = false;
    aspen_waker* a_waker = nullptr;
    aspen_waker* b_waker = nullptr;
    std::atomic<bool> a_polled{false};
};

aspen_status wait_in(bool ready, aspen_waker** slot, aspen_context* cx) {
    if (ready) return ASPEN_READY;
    if (!*slot && aspen_context_waker(cx, slot) != ASPEN_OK) return ASPEN_ERROR;
    return ASPEN_PENDING;
}

void wake_out(aspen_waker** slot) {
    if (*slot) aspen_waker_wake(std::exchange(*slot, nullptr));
}

aspen_status meet_a(void* d, aspen_context* cx) {
    auto* m = static_cast<meeting*>(d);
    std::lock_guard lock(m->m);
    m->a_polled.store(true);
    return wait_in(m->b_returned, &m->a_waker, cx);
}

aspen_status meet_b(void* d, aspen_context* cx) {
    auto* m = static_cast<meeting*>(d);
    std::lock_guard lock(m->m);
    return wait_in(m->b_may_run, &m->b_waker, cx);
}

TEST(CapiCurrentThread, TwoThreadsWaitOnJoinsOfOneRuntimeAtOnce) {
    aspen_runtime* rt = make_c_runtime(0);
    aspen_handle* h = nullptr;
    ASSERT_EQ(aspen_runtime_handle(rt, &h), ASPEN_OK);
    meeting m;
    aspen_status a_outcome = ASPEN_ERROR, b_outcome = ASPEN_ERROR;
    auto wait_on = [&](aspen_poll_fn poll, aspen_status* outcome) {
        aspen_join* j = nullptr;
        ASSERT_EQ(aspen_handle_spawn(h, poll, &m, nullptr, &j), ASPEN_OK);
        *outcome = aspen_join_wait(j);
        aspen_join_free(j);
    };
    aspen_test::within(60s, "two C waits on one current_thread runtime", [&] {
        std::thread a(wait_on, meet_a, &a_outcome);
        while (!m.a_polled.load()) std::this_thread::yield();  // a's thread drives
        std::thread b([&] {
            wait_on(meet_b, &b_outcome);
            std::lock_guard lock(m.m);
            m.b_returned = true;
            wake_out(&m.a_waker);
        });
        std::this_thread::sleep_for(20ms);
        {
            std::lock_guard lock(m.m);
            m.b_may_run = true;
            wake_out(&m.b_waker);
        }
        a.join();
        b.join();
    });
    EXPECT_EQ(a_outcome, ASPEN_OK) << aspen_status_name(a_outcome);
    EXPECT_EQ(b_outcome, ASPEN_OK) << aspen_status_name(b_outcome);
    aspen_handle_free(h);
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

TEST(CapiHandleMisuse, NullArgumentsAreErrorsAndDropTheData) {
    aspen_handle* h = reinterpret_cast<aspen_handle*>(&h);  // must be overwritten
    EXPECT_EQ(aspen_runtime_handle(nullptr, &h), ASPEN_EINVAL);
    EXPECT_EQ(h, nullptr);
    EXPECT_EQ(aspen_runtime_handle(nullptr, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_handle_clone(nullptr, &h), ASPEN_EINVAL);
    counts c;
    EXPECT_EQ(aspen_handle_spawn(nullptr, ready_task, &c, drop_count, nullptr), ASPEN_EINVAL);
    EXPECT_TRUE(last_error_mentions("aspen_handle_spawn: h is NULL")) << aspen_last_error();
    EXPECT_EQ(aspen_handle_spawn_blocking(nullptr, blocking_fn, &c, drop_count, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(c.drops.load(), 2);
    aspen_handle_free(nullptr);

    aspen_runtime* rt = make_c_runtime(1);
    ASSERT_EQ(aspen_runtime_handle(rt, &h), ASPEN_OK);
    EXPECT_EQ(aspen_handle_spawn(h, nullptr, &c, drop_count, nullptr), ASPEN_EINVAL);  // no poll function
    EXPECT_EQ(c.drops.load(), 3);
    aspen_handle_free(h);
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

}  // namespace
