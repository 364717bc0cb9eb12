// The C API (include/aspen/aspen.h), driven from C++ with C-style tasks:
// spawn and join, block_on, wakers from other threads, abort, shutdown,
// timers, the blocking pool, configuration errors and every misuse, on each
// kind of runtime (kind 0: current-thread; kind n: n workers).
#include <aspen/aspen.h>

#include "capi_util.hpp"
#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

const auto& kinds = aspen_test::runtime_kinds;
using aspen_test::kind_name;

using aspen_test::make_c_runtime;

// A task's bookkeeping: how often it was polled and dropped.
struct probe {
    std::atomic<int> polls{0};
    std::atomic<int> drops{0};
    aspen_status result = ASPEN_READY;  // what a ready poll returns
};

// relaxed (here and in the other counters): the test reads them after a
// join, a shutdown or a runtime's end, which order them.
void drop_probe(void* d) { static_cast<probe*>(d)->drops.fetch_add(1, std::memory_order_relaxed); }

aspen_status ready_probe(void* d, aspen_context*) {
    auto* p = static_cast<probe*>(d);
    p->polls.fetch_add(1, std::memory_order_relaxed);
    return p->result;
}

// Pending forever (stores no waker): only abort or shutdown ends it.
aspen_status pending_probe(void* d, aspen_context*) {
    static_cast<probe*>(d)->polls.fetch_add(1, std::memory_order_relaxed);
    return ASPEN_PENDING;
}

class capi : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override { rt = make_c_runtime(GetParam()); }
    void TearDown() override { EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK); }
    aspen_runtime* rt = nullptr;
};

TEST_P(capi, SpawnAndJoin) {
    probe p;
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, ready_probe, &p, drop_probe, &j), ASPEN_OK);
    ASSERT_NE(j, nullptr);
    EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
    EXPECT_EQ(aspen_join_is_finished(j), 1);
    EXPECT_EQ(p.polls.load(), 1);
    EXPECT_EQ(p.drops.load(), 1);  // drop has run by the time the join says so
    aspen_join_free(j);
}

TEST_P(capi, TheTaskStatusIsTheOutcome) {
    probe p;
    p.result = ASPEN_EINVAL;
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, ready_probe, &p, drop_probe, &j), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(j), ASPEN_EINVAL);
    aspen_join_free(j);
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &p, drop_probe), ASPEN_EINVAL);
    EXPECT_EQ(p.drops.load(), 2);
}

TEST_P(capi, BlockOn) {
    probe p;
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &p, drop_probe), ASPEN_OK);
    EXPECT_EQ(p.polls.load(), 1);
    EXPECT_EQ(p.drops.load(), 1);
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &p, nullptr), ASPEN_OK);  // drop is optional
    EXPECT_EQ(p.polls.load(), 2);
}

TEST_P(capi, ManyTasksEachPolledAndDroppedOnce) {
    constexpr int n = 100000;
    auto probes = std::make_unique<probe[]>(n);
    std::vector<aspen_join*> joins(n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(aspen_spawn(rt, ready_probe, &probes[i], drop_probe, &joins[i]), ASPEN_OK);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(aspen_join_wait(joins[i]), ASPEN_OK);
        aspen_join_free(joins[i]);
    }
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(probes[i].polls.load(), 1) << i;
        ASSERT_EQ(probes[i].drops.load(), 1) << i;
    }
}

TEST_P(capi, DetachedTasksRunToo) {
    constexpr int n = 10000;
    auto probes = std::make_unique<probe[]>(n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(aspen_spawn(rt, ready_probe, &probes[i], drop_probe, nullptr), ASPEN_OK);
    // A task spawned last, joined: on a current-thread runtime its wait
    // also runs the detached ones (FIFO).
    probe last;
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &last, drop_probe), ASPEN_OK);
    if (GetParam() == 0) {
        for (int i = 0; i < n; ++i) EXPECT_EQ(probes[i].drops.load(), 1) << i;
    }
    // Elsewhere some may still wait: shutdown drops those, before the
    // probes go out of scope.
    ASSERT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);
    for (int i = 0; i < n; ++i) EXPECT_EQ(probes[i].drops.load(), 1) << i;
}

// A parent spawns children from inside its poll (they go to its worker)
// and joins each with aspen_join_poll.
struct parent {
    int children = 0;
    std::vector<aspen_join*> joins;
    std::unique_ptr<probe[]> probes;
    size_t next = 0;
    std::atomic<int> drops{0};
};

aspen_status parent_poll(void* d, aspen_context* cx) {
    auto* p = static_cast<parent*>(d);
    if (p->joins.empty()) {
        p->probes = std::make_unique<probe[]>(p->children);
        p->joins.resize(p->children);
        for (int i = 0; i < p->children; ++i) {
            aspen_status s = aspen_spawn(aspen_context_runtime(cx), ready_probe, &p->probes[i], drop_probe, &p->joins[i]);
            if (s != ASPEN_OK) return s;
        }
    }
    for (; p->next < p->joins.size(); ++p->next) {
        aspen_status s = aspen_join_poll(p->joins[p->next], cx);
        if (s == ASPEN_PENDING) return s;
        if (s != ASPEN_OK) return s;
        aspen_join_free(p->joins[p->next]);
    }
    return ASPEN_READY;
}

void drop_parent(void* d) { static_cast<parent*>(d)->drops.fetch_add(1, std::memory_order_relaxed); }

// aspen_block_in_place: a C task spawns a child that sets a flag, then
// blocks in place until the flag is set. The child waits on the task's own
// worker: with one worker only the stand-in can run it, so the test hangs
// into its watchdog if the worker is not handed off.
struct in_place_task {
    std::atomic<bool> flag{false};
    aspen_join* child = nullptr;
    aspen_status inner = ASPEN_ERROR;  // what aspen_block_in_place returned
    std::string error;                 // aspen_last_error() right after it
    bool foreign_calls_ok = false;     // a blocking call inside fn worked
};

aspen_status set_flag_poll(void* d, aspen_context*) {
    static_cast<in_place_task*>(d)->flag.store(true);
    return ASPEN_READY;
}

aspen_status nothing_poll(void*, aspen_context*) { return ASPEN_READY; }

aspen_status wait_for_the_flag(void* d) {
    auto* t = static_cast<in_place_task*>(d);
    while (!t->flag.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    return ASPEN_EINVAL;  // any status: it is the call's result
}

aspen_status in_place_poll(void* d, aspen_context* cx) {
    auto* t = static_cast<in_place_task*>(d);
    if (!t->child) {
        aspen_runtime* rt = aspen_context_runtime(cx);
        aspen_status s = aspen_spawn(rt, set_flag_poll, t, nullptr, &t->child);
        if (s != ASPEN_OK) return s;
        t->inner = aspen_block_in_place(wait_for_the_flag, t);
        t->error = aspen_last_error();
        // Inside fn the thread counts as a foreign one: aspen_block_on works.
        struct ctx {
            aspen_runtime* rt;
            bool ok;
        } c{rt, false};
        aspen_block_in_place(
            [](void* p) {
                auto* c = static_cast<ctx*>(p);
                c->ok = aspen_block_on(c->rt, nothing_poll, nullptr, nullptr) == ASPEN_OK;
                return ASPEN_OK;
            },
            &c);
        t->foreign_calls_ok = c.ok;
    }
    aspen_status s = aspen_join_poll(t->child, cx);
    if (s == ASPEN_PENDING) return s;
    aspen_join_free(t->child);
    return s;
}

TEST_P(capi, BlockInPlaceRunsTheWorkersOtherTasks) {
    in_place_task t;
    aspen_status s = ASPEN_ERROR;
    aspen_test::within(std::chrono::seconds(60), "aspen_block_in_place waiting for a task of its worker",
                       [&] { s = aspen_block_on(rt, in_place_poll, &t, nullptr); });
    if (GetParam() == 0) {
        // A current-thread runtime's one thread runs every task: refused.
        EXPECT_EQ(t.inner, ASPEN_MISUSE);
        EXPECT_NE(t.error.find("current_thread"), std::string::npos) << t.error;
        EXPECT_EQ(s, ASPEN_OK);  // the child ran after the task's first poll
        return;
    }
    EXPECT_EQ(t.inner, ASPEN_EINVAL) << "fn's status is the call's";
    EXPECT_TRUE(t.foreign_calls_ok);
    EXPECT_EQ(s, ASPEN_OK);
}

TEST(capi_misuse, BlockInPlaceArguments) {
    EXPECT_EQ(aspen_block_in_place(nullptr, nullptr), ASPEN_EINVAL);
    EXPECT_STREQ(aspen_last_error(), "aspen_block_in_place: fn is NULL");
    // On a foreign thread it just calls fn.
    in_place_task t;
    t.flag = true;
    EXPECT_EQ(aspen_block_in_place(wait_for_the_flag, &t), ASPEN_EINVAL);
}

TEST_P(capi, SpawnAndJoinFromInsideATask) {
    parent p;
    p.children = 1000;
    EXPECT_EQ(aspen_block_on(rt, parent_poll, &p, drop_parent), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(p.drops.load(), 1);
    for (int i = 0; i < p.children; ++i) {
        EXPECT_EQ(p.probes[i].polls.load(), 1);
        EXPECT_EQ(p.probes[i].drops.load(), 1);
    }
}

// Ping-pong with a foreign thread: each round the thread publishes a
// number and wakes the task, then waits for the task to acknowledge it.
// A lost wakeup would hang the round (ctest's timeout reports it).
struct pinged {
    std::atomic<int> sent{0};
    std::atomic<int> acked{0};
    int rounds = 0;
    std::mutex m;
    aspen_waker* w = nullptr;  // under m
    std::atomic<int> drops{0};
};

aspen_status pinged_poll(void* d, aspen_context* cx) {
    auto* p = static_cast<pinged*>(d);
    {
        // Store the waker before looking at `sent`: a send after the look
        // then finds it.
        std::lock_guard g(p->m);
        aspen_waker_free(p->w);
        if (aspen_context_waker(cx, &p->w) != ASPEN_OK) return ASPEN_ENOMEM;
    }
    // acquire: pairs with the sender's release of `sent`.
    int s = p->sent.load(std::memory_order_acquire);
    // release: the sender may start the next round once it sees this.
    if (s > p->acked.load(std::memory_order_relaxed)) p->acked.store(s, std::memory_order_release);
    return s == p->rounds ? ASPEN_READY : ASPEN_PENDING;
}

void drop_pinged(void* d) {
    auto* p = static_cast<pinged*>(d);
    std::lock_guard g(p->m);
    aspen_waker_free(std::exchange(p->w, nullptr));
    p->drops.fetch_add(1, std::memory_order_relaxed);
}

void send_rounds(pinged& p, bool consume) {
    for (int i = 1; i <= p.rounds; ++i) {
        // release: the task's acquire of `sent` sees the round.
        p.sent.store(i, std::memory_order_release);
        aspen_waker* w = nullptr;
        {
            std::lock_guard g(p.m);
            if (p.w) aspen_waker_clone(p.w, &w);
        }
        if (w && consume) aspen_waker_wake(w);
        if (w && !consume) {
            aspen_waker_wake_by_ref(w);
            aspen_waker_free(w);
        }
        // acquire: the task's acknowledgement (and nothing else) we wait for.
        while (p.acked.load(std::memory_order_acquire) < i) std::this_thread::yield();
    }
}

TEST_P(capi, WakersFromAForeignThreadLoseNoWakeup) {
    for (bool consume : {true, false}) {
        pinged p;
        p.rounds = 2000;
        aspen_join* j = nullptr;
        ASSERT_EQ(aspen_spawn(rt, pinged_poll, &p, drop_pinged, &j), ASPEN_OK);
        std::thread sender([&] { send_rounds(p, consume); });
        EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
        sender.join();
        aspen_join_free(j);
        EXPECT_EQ(p.drops.load(), 1);
    }
}

// Keeps a clone of its waker past its end.
struct keeper {
    aspen_waker* w = nullptr;
    std::atomic<int> polls{0};
};

aspen_status keeper_poll(void* d, aspen_context* cx) {
    auto* k = static_cast<keeper*>(d);
    k->polls.fetch_add(1, std::memory_order_relaxed);
    return aspen_context_waker(cx, &k->w);
}

TEST_P(capi, WakeAfterTheTaskFinishedIsANoOp) {
    keeper k;
    ASSERT_EQ(aspen_block_on(rt, keeper_poll, &k, nullptr), ASPEN_OK);
    ASSERT_NE(k.w, nullptr);
    aspen_waker* clone = nullptr;
    ASSERT_EQ(aspen_waker_clone(k.w, &clone), ASPEN_OK);
    EXPECT_EQ(aspen_waker_wake_by_ref(k.w), ASPEN_OK);
    EXPECT_EQ(aspen_waker_wake(k.w), ASPEN_OK);
    probe p;  // the runtime still works, and nothing re-polled the keeper
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &p, drop_probe), ASPEN_OK);
    EXPECT_EQ(k.polls.load(), 1);
    // A waker may outlive its runtime.
    ASSERT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    rt = make_c_runtime(GetParam());
    EXPECT_EQ(aspen_waker_wake(clone), ASPEN_OK);
}

TEST_P(capi, AbortOfAPendingTaskDropsItOnce) {
    probe p;
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, pending_probe, &p, drop_probe, &j), ASPEN_OK);
    if (GetParam() > 0) {
        // acquire: nothing but progress depends on it.
        while (p.polls.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    }
    EXPECT_EQ(aspen_join_abort(j), ASPEN_OK);
    EXPECT_EQ(aspen_join_abort(j), ASPEN_OK);  // twice: no effect
    EXPECT_EQ(aspen_join_wait(j), ASPEN_CANCELLED);
    EXPECT_EQ(aspen_join_is_finished(j), 1);
    EXPECT_EQ(p.drops.load(), 1);
    EXPECT_EQ(aspen_join_abort(j), ASPEN_OK);  // after the end: no effect
    aspen_join_free(j);
    EXPECT_EQ(p.drops.load(), 1);
}

TEST_P(capi, AbortAfterTheTaskFinishedKeepsItsOutcome) {
    probe p;
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, ready_probe, &p, drop_probe, &j), ASPEN_OK);
    probe q;  // waits until the first has run (FIFO on one thread)
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &q, drop_probe), ASPEN_OK);
    while (aspen_join_is_finished(j) == 0) std::this_thread::yield();
    EXPECT_EQ(aspen_join_abort(j), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
    EXPECT_EQ(p.drops.load(), 1);
    aspen_join_free(j);
}

TEST_P(capi, ShutdownDropsEveryUnfinishedTaskOnce) {
    constexpr int n = 1000;
    auto probes = std::make_unique<probe[]>(n);
    std::vector<aspen_join*> joins;
    for (int i = 0; i < n; ++i) {
        aspen_join** out = nullptr;
        if (i % 2 == 0) out = &joins.emplace_back();
        ASSERT_EQ(aspen_spawn(rt, pending_probe, &probes[i], drop_probe, out), ASPEN_OK);
    }
    ASSERT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);
    for (int i = 0; i < n; ++i) EXPECT_EQ(probes[i].drops.load(), 1) << i;
    for (aspen_join* j : joins) {
        EXPECT_EQ(aspen_join_is_finished(j), 1);
        EXPECT_EQ(aspen_join_wait(j), ASPEN_SHUT_DOWN);
    }
    // Joins may outlive the runtime.
    ASSERT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    rt = make_c_runtime(GetParam());
    for (aspen_join* j : joins) aspen_join_free(j);
    for (int i = 0; i < n; ++i) EXPECT_EQ(probes[i].drops.load(), 1) << i;
}

TEST_P(capi, SpawnAfterShutdownIsRefusedAndDrops) {
    ASSERT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);
    EXPECT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);  // twice: nothing more
    probe p;
    aspen_join* j = reinterpret_cast<aspen_join*>(&p);  // overwritten with NULL
    EXPECT_EQ(aspen_spawn(rt, ready_probe, &p, drop_probe, &j), ASPEN_SHUT_DOWN);
    EXPECT_EQ(j, nullptr);
    EXPECT_NE(std::strstr(aspen_last_error(), "shut down"), nullptr) << aspen_last_error();
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &p, drop_probe), ASPEN_SHUT_DOWN);
    EXPECT_EQ(p.polls.load(), 0);
    EXPECT_EQ(p.drops.load(), 2);
}

// Sleeps `rounds` times for `delay` ns, re-using one timer (reset).
struct sleeper {
    aspen_timer* t = nullptr;
    uint64_t delay = 0;
    int rounds = 0;
    uint64_t started = 0;
    uint64_t woke = 0;
    std::atomic<int> drops{0};
};

aspen_status sleeper_poll(void* d, aspen_context* cx) {
    auto* s = static_cast<sleeper*>(d);
    if (!s->t) {
        s->started = aspen_now_ns();
        if (aspen_status st = aspen_timer_new(s->delay, &s->t); st != ASPEN_OK) return st;
    }
    while (s->rounds > 0) {
        aspen_status st = aspen_timer_poll(s->t, cx);
        if (st != ASPEN_READY) return st;
        if (--s->rounds > 0) aspen_timer_reset(s->t, s->delay);
    }
    s->woke = aspen_now_ns();
    return ASPEN_READY;
}

void drop_sleeper(void* d) {
    auto* s = static_cast<sleeper*>(d);
    aspen_timer_free(std::exchange(s->t, nullptr));
    s->drops.fetch_add(1, std::memory_order_relaxed);
}

TEST_P(capi, TimersFireNeverEarly) {
    sleeper s;
    s.delay = 2'000'000;
    s.rounds = 3;
    EXPECT_EQ(aspen_block_on(rt, sleeper_poll, &s, drop_sleeper), ASPEN_OK) << aspen_last_error();
    EXPECT_GE(s.woke - s.started, 3 * s.delay);
    EXPECT_EQ(s.drops.load(), 1);
}

TEST_P(capi, ManySleepersAtOnce) {
    constexpr int n = 200;
    auto sleepers = std::make_unique<sleeper[]>(n);
    std::vector<aspen_join*> joins(n);
    for (int i = 0; i < n; ++i) {
        sleepers[i].delay = 1'000'000 * static_cast<uint64_t>(i % 5);
        sleepers[i].rounds = 2;
        ASSERT_EQ(aspen_spawn(rt, sleeper_poll, &sleepers[i], drop_sleeper, &joins[i]), ASPEN_OK);
    }
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(aspen_join_wait(joins[i]), ASPEN_OK);
        aspen_join_free(joins[i]);
        EXPECT_EQ(sleepers[i].drops.load(), 1);
    }
}

TEST_P(capi, AbortOfASleepingTaskDisarmsItsTimer) {
    sleeper s;
    s.delay = 3'600'000'000'000;  // an hour
    s.rounds = 1;
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, sleeper_poll, &s, drop_sleeper, &j), ASPEN_OK);
    probe p;  // after this, the sleeper has armed its timer (FIFO) or runs elsewhere
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &p, drop_probe), ASPEN_OK);
    EXPECT_EQ(aspen_join_abort(j), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(j), ASPEN_CANCELLED);
    EXPECT_EQ(s.drops.load(), 1);
    aspen_join_free(j);
}

// What a task saw when it misused the API from inside its poll.
struct misuser {
    aspen_runtime* rt = nullptr;
    aspen_join* other = nullptr;
    aspen_join* finished = nullptr;  // a task that has ended
    aspen_status wait = ASPEN_OK, block = ASPEN_OK, free_rt = ASPEN_OK, shutdown = ASPEN_OK;
    aspen_status finished_wait = ASPEN_OK;
    probe inner;
};

aspen_status misuser_poll(void* d, aspen_context*) {
    auto* m = static_cast<misuser*>(d);
    m->wait = aspen_join_wait(m->other);
    m->finished_wait = aspen_join_wait(m->finished);
    m->block = aspen_block_on(m->rt, ready_probe, &m->inner, drop_probe);
    m->free_rt = aspen_runtime_free(m->rt);
    m->shutdown = aspen_runtime_shutdown(m->rt);
    return ASPEN_READY;
}

TEST_P(capi, BlockingCallsFromInsideATaskAreMisuse) {
    misuser m;
    m.rt = rt;
    probe other;
    ASSERT_EQ(aspen_spawn(rt, pending_probe, &other, drop_probe, &m.other), ASPEN_OK);
    probe done;
    ASSERT_EQ(aspen_spawn(rt, ready_probe, &done, drop_probe, &m.finished), ASPEN_OK);
    probe first;  // after this, `done` has ended on a current-thread runtime (FIFO)
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &first, nullptr), ASPEN_OK);
    EXPECT_EQ(aspen_block_on(rt, misuser_poll, &m, nullptr), ASPEN_OK);
    EXPECT_EQ(m.wait, ASPEN_MISUSE);
    EXPECT_EQ(m.block, ASPEN_MISUSE);
    EXPECT_EQ(m.inner.polls.load(), 0);  // refused before it ran...
    EXPECT_EQ(m.inner.drops.load(), 1);  // ...and dropped
    EXPECT_EQ(m.free_rt, ASPEN_MISUSE);
    EXPECT_EQ(m.shutdown, ASPEN_MISUSE);
    EXPECT_EQ(m.finished_wait, ASPEN_MISUSE);
    EXPECT_EQ(aspen_join_wait(m.finished), ASPEN_OK);  // the refused wait took nothing
    aspen_join_free(m.finished);
    // The refused wait left the join usable.
    EXPECT_EQ(aspen_join_abort(m.other), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(m.other), ASPEN_CANCELLED);
    aspen_join_free(m.other);
}

TEST_P(capi, JoiningTwiceIsMisuse) {
    probe p;
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, ready_probe, &p, drop_probe, &j), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(j), ASPEN_MISUSE);
    EXPECT_NE(std::strstr(aspen_last_error(), "already joined"), nullptr) << aspen_last_error();
    aspen_join_free(j);
}

// Polls a join once, then (second poll) polls it again after it finished.
struct join_poller {
    aspen_join* j = nullptr;
    aspen_status first = ASPEN_OK, second = ASPEN_OK;
    std::atomic<bool> polled{false};
};

aspen_status join_poller_poll(void* d, aspen_context* cx) {
    auto* jp = static_cast<join_poller*>(d);
    jp->first = aspen_join_poll(jp->j, cx);
    // release: the test thread waits for the claim this poll made.
    jp->polled.store(true, std::memory_order_release);
    if (jp->first == ASPEN_PENDING) return ASPEN_PENDING;
    jp->second = aspen_join_poll(jp->j, cx);
    return ASPEN_READY;
}

TEST_P(capi, PollingAJoinAfterItsOutcomeWasTakenIsMisuse) {
    probe p;
    join_poller jp;
    ASSERT_EQ(aspen_spawn(rt, ready_probe, &p, drop_probe, &jp.j), ASPEN_OK);
    EXPECT_EQ(aspen_block_on(rt, join_poller_poll, &jp, nullptr), ASPEN_OK);
    EXPECT_EQ(jp.first, ASPEN_OK);
    EXPECT_EQ(jp.second, ASPEN_MISUSE);
    EXPECT_EQ(aspen_join_wait(jp.j), ASPEN_MISUSE);
    aspen_join_free(jp.j);
}

TEST_P(capi, WaitingOnAJoinATaskPollsIsMisuse) {
    probe p;
    join_poller jp;
    ASSERT_EQ(aspen_spawn(rt, pending_probe, &p, drop_probe, &jp.j), ASPEN_OK);
    aspen_join* poller = nullptr;
    ASSERT_EQ(aspen_spawn(rt, join_poller_poll, &jp, nullptr, &poller), ASPEN_OK);
    // Once the poller has registered, a wait on its join is refused.
    probe q;  // on a current-thread runtime: runs the poller first (FIFO)
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &q, nullptr), ASPEN_OK);
    // acquire: the poller's claim happened before it set the flag.
    while (!jp.polled.load(std::memory_order_acquire)) std::this_thread::yield();
    EXPECT_EQ(aspen_join_wait(jp.j), ASPEN_MISUSE);
    EXPECT_NE(std::strstr(aspen_last_error(), "polling"), nullptr) << aspen_last_error();
    EXPECT_EQ(aspen_join_abort(jp.j), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(poller), ASPEN_OK);
    EXPECT_EQ(jp.first, ASPEN_CANCELLED);
    aspen_join_free(poller);
    aspen_join_free(jp.j);
}

TEST_P(capi, APollThatThrowsEndsWithPanic) {
    probe p;
    auto thrower = [](void* d, aspen_context*) -> aspen_status {
        static_cast<probe*>(d)->polls.fetch_add(1, std::memory_order_relaxed);
        throw std::runtime_error("from a C++ callback");
    };
    EXPECT_EQ(aspen_block_on(rt, thrower, &p, drop_probe), ASPEN_PANIC);
    EXPECT_EQ(p.drops.load(), 1);
}

// The blocking pool: one thread, held by a first function until released,
// so a second one waits in the queue and can be aborted before it runs.
struct blocker {
    std::atomic<bool> started{false};
    std::atomic<bool> release{false};
    std::atomic<int> runs{0};
    std::atomic<int> drops{0};
};

aspen_status blocker_fn(void* d) {
    auto* b = static_cast<blocker*>(d);
    b->runs.fetch_add(1, std::memory_order_relaxed);
    // release / acquire: the test thread waits for this and we for it.
    b->started.store(true, std::memory_order_release);
    while (!b->release.load(std::memory_order_acquire)) std::this_thread::yield();
    return ASPEN_EINVAL;  // any status: it is the outcome
}

aspen_status quick_fn(void* d) {
    static_cast<blocker*>(d)->runs.fetch_add(1, std::memory_order_relaxed);
    return ASPEN_OK;
}

void drop_blocker(void* d) { static_cast<blocker*>(d)->drops.fetch_add(1, std::memory_order_relaxed); }

TEST_P(capi, SpawnBlocking) {
    blocker first, second, third;
    aspen_join *j1 = nullptr, *j2 = nullptr, *j3 = nullptr;
    ASSERT_EQ(aspen_spawn_blocking(rt, blocker_fn, &first, drop_blocker, &j1), ASPEN_OK);
    while (!first.started.load(std::memory_order_acquire)) std::this_thread::yield();
    ASSERT_EQ(aspen_spawn_blocking(rt, quick_fn, &third, drop_blocker, &j3), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(j3), ASPEN_OK);  // pool threads start on demand
    EXPECT_EQ(third.drops.load(), 1);
    ASSERT_EQ(aspen_spawn_blocking(rt, quick_fn, &second, drop_blocker, &j2), ASPEN_OK);
    first.release.store(true, std::memory_order_release);
    EXPECT_EQ(aspen_join_wait(j1), ASPEN_EINVAL);
    EXPECT_EQ(aspen_join_wait(j2), ASPEN_OK);
    EXPECT_EQ(first.runs.load(), 1);
    EXPECT_EQ(first.drops.load(), 1);
    EXPECT_EQ(second.drops.load(), 1);
    for (aspen_join* j : {j1, j2, j3}) aspen_join_free(j);
}

TEST_P(capi, ShutdownWaitsForBlockingAndDropsQueued) {
    // One pool thread, held; the queued function is dropped unrun.
    ASSERT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    aspen_config cfg;
    aspen_config_init(&cfg);
    cfg.current_thread = GetParam() == 0;
    if (GetParam() > 0) cfg.workers = static_cast<size_t>(GetParam());
    cfg.max_blocking_threads = 1;
    ASSERT_EQ(aspen_runtime_new(&cfg, &rt), ASPEN_OK);
    blocker held, queued;
    ASSERT_EQ(aspen_spawn_blocking(rt, blocker_fn, &held, drop_blocker, nullptr), ASPEN_OK);
    while (!held.started.load(std::memory_order_acquire)) std::this_thread::yield();
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn_blocking(rt, quick_fn, &queued, drop_blocker, &j), ASPEN_OK);
    aspen_metrics m;
    m.size = sizeof m;
    ASSERT_EQ(aspen_runtime_metrics(rt, &m), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(m.blocking_threads, 1u);  // the one thread, running `held`
    EXPECT_EQ(m.idle_blocking_threads, 0u);
    EXPECT_EQ(m.blocking_queue_depth, 1u);  // `queued` waits for it
    EXPECT_EQ(aspen_join_abort(j), ASPEN_OK);  // queued: it never runs
    EXPECT_EQ(aspen_join_wait(j), ASPEN_CANCELLED);
    EXPECT_EQ(queued.runs.load(), 0);
    EXPECT_EQ(queued.drops.load(), 1);
    std::thread releaser([&] { held.release.store(true, std::memory_order_release); });
    EXPECT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);
    releaser.join();
    EXPECT_EQ(held.drops.load(), 1);
    aspen_join_free(j);
}

// Wakes itself and returns pending: a yield, `left` times.
struct yielder {
    int left = 0;
    std::atomic<int> polls{0};
};

aspen_status yielder_poll(void* d, aspen_context* cx) {
    auto* y = static_cast<yielder*>(d);
    y->polls.fetch_add(1, std::memory_order_relaxed);
    if (y->left-- == 0) return ASPEN_READY;
    aspen_waker* w = nullptr;
    if (aspen_status s = aspen_context_waker(cx, &w); s != ASPEN_OK) return s;
    return aspen_waker_wake(w) == ASPEN_OK ? ASPEN_PENDING : ASPEN_ERROR;
}

TEST_P(capi, AWakeFromItsOwnPollIsAYield) {
    yielder a, b;
    a.left = b.left = 1000;
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, yielder_poll, &b, nullptr, &j), ASPEN_OK);
    EXPECT_EQ(aspen_block_on(rt, yielder_poll, &a, nullptr), ASPEN_OK);
    EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
    aspen_join_free(j);
    EXPECT_EQ(a.polls.load(), 1001);
    EXPECT_EQ(b.polls.load(), 1001);
}

// A spawns two probes and yields once: the first probe is pushed out of
// the next slot into the queue by the second, so a plain self-wake would
// put A in front of it on one worker; aspen_yield puts A behind both.
struct two_spawner {
    aspen_runtime* rt = nullptr;
    probe first, second;
    aspen_join* joins[2] = {nullptr, nullptr};
    bool yielded = false;
    int seen_at_return = -1;  // probes polled when A ran again
};

aspen_status two_spawner_poll(void* d, aspen_context* cx) {
    auto* t = static_cast<two_spawner*>(d);
    if (!t->yielded) {
        aspen_runtime* rt = aspen_context_runtime(cx);
        if (aspen_spawn(rt, ready_probe, &t->first, nullptr, &t->joins[0]) != ASPEN_OK) return ASPEN_ERROR;
        if (aspen_spawn(rt, ready_probe, &t->second, nullptr, &t->joins[1]) != ASPEN_OK) return ASPEN_ERROR;
        t->yielded = true;
        return aspen_yield(cx);
    }
    t->seen_at_return = t->first.polls.load(std::memory_order_relaxed) + t->second.polls.load(std::memory_order_relaxed);
    return ASPEN_READY;
}

TEST_P(capi, YieldGoesBehindTheWorkThatIsReady) {
    two_spawner t;
    EXPECT_EQ(aspen_block_on(rt, two_spawner_poll, &t, nullptr), ASPEN_OK);
    for (aspen_join* j : t.joins) {
        EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
        aspen_join_free(j);
    }
    // With more workers a thief may take the yielded task and run it first.
    if (GetParam() <= 1) {
        EXPECT_EQ(t.seen_at_return, 2);
    }
    EXPECT_EQ(aspen_yield(nullptr), ASPEN_EINVAL);
}

TEST_P(capi, SeveralThreadsWaitAtOnce) {
    // On a current-thread runtime they take turns driving it.
    constexpr int threads = 4;
    yielder ys[threads];
    aspen_join* joins[threads];
    for (int i = 0; i < threads; ++i) {
        ys[i].left = 2000;
        ASSERT_EQ(aspen_spawn(rt, yielder_poll, &ys[i], nullptr, &joins[i]), ASPEN_OK);
    }
    std::vector<std::thread> waiters;
    aspen_status got[threads];
    for (int i = 0; i < threads; ++i) waiters.emplace_back([&, i] { got[i] = aspen_join_wait(joins[i]); });
    for (auto& t : waiters) t.join();
    for (int i = 0; i < threads; ++i) {
        EXPECT_EQ(got[i], ASPEN_OK);
        EXPECT_EQ(ys[i].polls.load(), 2001);
        aspen_join_free(joins[i]);
    }
}

// Its drop spawns another task on the runtime (as a language runtime's
// finaliser might) while that runtime shuts down.
struct respawner {
    aspen_runtime* rt = nullptr;
    probe inner;
    std::atomic<int> spawn_status{1};
};

void drop_respawner(void* d) {
    auto* r = static_cast<respawner*>(d);
    aspen_status s = aspen_spawn(r->rt, ready_probe, &r->inner, drop_probe, nullptr);
    r->spawn_status.store(s, std::memory_order_relaxed);  // read after shutdown
}

TEST_P(capi, ADropThatSpawnsDuringShutdown) {
    respawner r;
    r.rt = rt;
    auto forever = [](void*, aspen_context*) { return ASPEN_PENDING; };
    ASSERT_EQ(aspen_spawn(rt, forever, &r, drop_respawner, nullptr), ASPEN_OK);
    ASSERT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);
    EXPECT_EQ(r.spawn_status.load(), ASPEN_SHUT_DOWN);
    EXPECT_EQ(r.inner.drops.load(), 1);  // the refused task's
}

// Reads `want` bytes from a pipe through aspen_fd_poll.
struct pipe_reader {
    aspen_fd* fd = nullptr;
    char buf[64] = {};
    size_t got = 0;
    size_t want = 0;
    int pendings = 0;
};

long long read_some(void* arg, int fd) {
    auto* r = static_cast<pipe_reader*>(arg);
    return ::read(fd, r->buf + r->got, r->want - r->got);
}

aspen_status pipe_reader_poll(void* d, aspen_context* cx) {
    auto* r = static_cast<pipe_reader*>(d);
    while (r->got < r->want) {
        long long n = 0;
        aspen_status s = aspen_fd_poll(r->fd, ASPEN_FD_READ, read_some, r, &n, cx);
        if (s == ASPEN_PENDING) ++r->pendings;
        if (s != ASPEN_READY) return s;
        if (n == 0) return ASPEN_ERROR;  // end of file too early
        r->got += static_cast<size_t>(n);
    }
    return ASPEN_READY;
}

TEST_P(capi, FdReadinessFromAPipe) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    pipe_reader r;
    r.want = 10;
    ASSERT_EQ(aspen_fd_adopt(p[0], &r.fd), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(aspen_fd_native(r.fd), p[0]);
    aspen_metrics before;
    before.size = sizeof before;
    ASSERT_EQ(aspen_runtime_metrics(rt, &before), ASPEN_OK) << aspen_last_error();
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, pipe_reader_poll, &r, nullptr, &j), ASPEN_OK);
    std::thread writer([&] {
        for (const char* part : {"hello", " world"}) {
            // Written one after the other: the reader waits in between.
            ASSERT_GT(::write(p[1], part, std::strlen(part)), 0);
            std::this_thread::yield();
        }
    });
    EXPECT_EQ(aspen_join_wait(j), ASPEN_OK) << aspen_last_error();
    writer.join();
    aspen_join_free(j);
    aspen_metrics after;
    after.size = sizeof after;
    ASSERT_EQ(aspen_runtime_metrics(rt, &after), ASPEN_OK) << aspen_last_error();
    // Only a delivered event wakes the reader (nothing else wakes it here),
    // and each pending poll waited for a wake.
    EXPECT_GE(after.io_ready_events - before.io_ready_events, static_cast<std::uint64_t>(r.pendings));
    EXPECT_EQ(std::string(r.buf, r.got), "hello worl");
    aspen_fd_free(r.fd);  // closes p[0]
    ::close(p[1]);
}

long long failing_call(void*, int) {
    errno = EBADMSG;
    return -1;
}

struct fd_failer {
    aspen_fd* fd = nullptr;
    long long result = 0;
    aspen_status status = ASPEN_OK;
};

aspen_status fd_failer_poll(void* d, aspen_context* cx) {
    auto* f = static_cast<fd_failer*>(d);
    f->status = aspen_fd_poll(f->fd, ASPEN_FD_WRITE, failing_call, nullptr, &f->result, cx);
    return f->status == ASPEN_PENDING ? ASPEN_PENDING : ASPEN_READY;
}

TEST_P(capi, FdErrorsCarryTheErrno) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    fd_failer f;
    ASSERT_EQ(aspen_fd_adopt(p[1], &f.fd), ASPEN_OK);
    EXPECT_EQ(aspen_block_on(rt, fd_failer_poll, &f, nullptr), ASPEN_OK);
    EXPECT_EQ(f.status, ASPEN_ERROR);
    EXPECT_EQ(f.result, -EBADMSG);
    aspen_fd_free(f.fd);
    ::close(p[0]);
}

// ---- readiness only: aspen_fd_ready_poll / aspen_fd_clear_ready ------------------

// A task that does its own read(2), as a language runtime would: waits
// until the pipe is readable, reads until EAGAIN, clears the readiness and
// waits again, until it has "abc". The writer thread writes "a" once the
// task waits with nothing read, "c" once it waits with "ab". "b" the task
// writes itself, right after the EAGAIN that follows "a", and then sleeps
// on a timer before it clears: a runtime harvests epoll before it fires a
// timer (driver::park / poll), so the edge of "b" is delivered between the
// EAGAIN and the clear. A clear that dropped it would leave the task
// waiting with "a" for an edge that never comes, and the writer waiting for
// "ab": a hang (ctest's timeout). A ready poll that stored no waker hangs
// at "a" already.
struct own_reader {
    aspen_fd* fd = nullptr;
    int write_end = -1;
    std::string got;
    aspen_status first = ASPEN_ERROR;  // the very first ready poll's status
    int eagains = 0;
    bool wrote_b = false;
    aspen_timer* timer = nullptr;  // armed: between the EAGAIN after "a" and its clear
    // How many bytes the task had when it last went pending (-1: never).
    std::atomic<int> waiting_with{-1};
};

aspen_status own_reader_poll(void* d, aspen_context* cx) {
    auto* r = static_cast<own_reader*>(d);
    for (;;) {
        if (r->timer) {
            aspen_status s = aspen_timer_poll(r->timer, cx);
            if (s != ASPEN_READY) return s;
            aspen_timer_free(r->timer);
            r->timer = nullptr;
            if (aspen_fd_clear_ready(r->fd, ASPEN_FD_READ) != ASPEN_OK) return ASPEN_ERROR;
        }
        aspen_status s = aspen_fd_ready_poll(r->fd, ASPEN_FD_READ, cx);
        if (r->first == ASPEN_ERROR) r->first = s;
        if (s == ASPEN_PENDING) {
            // release: pairs with the writer thread's acquire load, so the
            // waker this poll stored happens before the write: its edge
            // finds a task that waits, the case this test is about (a write
            // that came earlier would be fine too, the reactor re-checks).
            r->waiting_with.store(static_cast<int>(r->got.size()), std::memory_order_release);
            return s;
        }
        if (s != ASPEN_OK) return s;
        char buf[8];
        ssize_t n = ::read(aspen_fd_native(r->fd), buf, sizeof buf);
        if (n > 0) {
            r->got.append(buf, static_cast<size_t>(n));
            if (r->got.size() >= 3) return ASPEN_READY;
            continue;
        }
        if (n == 0 || errno != EAGAIN) return ASPEN_ERROR;  // end of file or a real error: not expected
        ++r->eagains;
        if (r->got == "a" && !r->wrote_b) {
            r->wrote_b = true;
            if (::write(r->write_end, "b", 1) != 1) return ASPEN_ERROR;
            if (aspen_timer_new(1000000, &r->timer) != ASPEN_OK) return ASPEN_ENOMEM;
            continue;  // sleeps in the timer poll above, then clears
        }
        if (aspen_fd_clear_ready(r->fd, ASPEN_FD_READ) != ASPEN_OK) return ASPEN_ERROR;
    }
}

// Until the task went pending holding `n` bytes.
void wait_until_waiting_with(const own_reader& r, int n) {
    // acquire: pairs with the task's release store.
    while (r.waiting_with.load(std::memory_order_acquire) != n) std::this_thread::yield();
}

TEST_P(capi, FdReadyPollWaitsClearsAndSeesTheNextEdge) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    own_reader r;
    r.write_end = p[1];
    ASSERT_EQ(aspen_fd_adopt(p[0], &r.fd), ASPEN_OK) << aspen_last_error();
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, own_reader_poll, &r, nullptr, &j), ASPEN_OK);
    std::thread writer([&] {
        wait_until_waiting_with(r, 0);
        EXPECT_EQ(::write(p[1], "a", 1), 1);
        wait_until_waiting_with(r, 2);
        EXPECT_EQ(::write(p[1], "c", 1), 1);
    });
    EXPECT_EQ(aspen_join_wait(j), ASPEN_OK) << aspen_last_error();
    writer.join();
    aspen_join_free(j);
    EXPECT_EQ(r.first, ASPEN_PENDING);  // nothing was written yet
    EXPECT_EQ(r.got, "abc");
    // After "a" and after "b", and no more: a clear that works makes the
    // next ready poll wait for a new edge (one that cleared nothing would
    // let the loop meet EAGAIN again and again until its budget ran out).
    EXPECT_EQ(r.eagains, 2);
    aspen_timer_free(r.timer);
    aspen_fd_free(r.fd);
    ::close(p[1]);
}

// A task that writes into a full pipe with its own write(2): writable only
// once the reader thread drained some of it.
struct own_writer {
    aspen_fd* fd = nullptr;
    size_t to_write = 0;
    size_t written = 0;
    aspen_status first = ASPEN_ERROR;
    std::atomic<bool> waited{false};
};

aspen_status own_writer_poll(void* d, aspen_context* cx) {
    auto* w = static_cast<own_writer*>(d);
    char buf[512] = {};
    while (w->written < w->to_write) {
        aspen_status s = aspen_fd_ready_poll(w->fd, ASPEN_FD_WRITE, cx);
        if (w->first == ASPEN_ERROR) w->first = s;
        if (s == ASPEN_PENDING) {
            // release: the reader thread starts draining only after this
            // (its acquire load), so the first poll met a full pipe.
            w->waited.store(true, std::memory_order_release);
            return s;
        }
        if (s != ASPEN_OK) return s;
        ssize_t n = ::write(aspen_fd_native(w->fd), buf, std::min(sizeof buf, w->to_write - w->written));
        if (n > 0) {
            w->written += static_cast<size_t>(n);
        } else if (n < 0 && errno == EAGAIN) {
            if (aspen_fd_clear_ready(w->fd, ASPEN_FD_WRITE) != ASPEN_OK) return ASPEN_ERROR;
        } else {
            return ASPEN_ERROR;
        }
    }
    return ASPEN_READY;
}

TEST_P(capi, FdReadyPollWaitsForAFullPipeToDrain) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    ASSERT_EQ(::fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    size_t filled = 0;
    char chunk[4096] = {};
    for (size_t size : {sizeof chunk, size_t{1}}) {
        for (ssize_t n; (n = ::write(p[1], chunk, size)) > 0;) filled += static_cast<size_t>(n);
        ASSERT_EQ(errno, EAGAIN);
    }
    own_writer w;
    w.to_write = 2 * filled;
    ASSERT_EQ(aspen_fd_adopt(p[1], &w.fd), ASPEN_OK) << aspen_last_error();
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, own_writer_poll, &w, nullptr, &j), ASPEN_OK);
    size_t drained = 0;
    std::thread reader([&] {
        // acquire: see own_writer_poll.
        while (!w.waited.load(std::memory_order_acquire)) std::this_thread::yield();
        while (drained < filled + w.to_write) {
            ssize_t n = ::read(p[0], chunk, sizeof chunk);  // p[0] blocks
            if (n <= 0) break;
            drained += static_cast<size_t>(n);
        }
    });
    EXPECT_EQ(aspen_join_wait(j), ASPEN_OK) << aspen_last_error();
    reader.join();
    aspen_join_free(j);
    EXPECT_EQ(w.first, ASPEN_PENDING);  // the pipe was full
    EXPECT_EQ(w.written, w.to_write);
    EXPECT_EQ(drained, filled + w.to_write);
    aspen_fd_free(w.fd);
    ::close(p[0]);
}

long long read_byte(void* buf, int fd) { return ::read(fd, buf, 1); }

// The misuse a task can commit, one poll after the other: a bad direction
// (where cx is valid), a ready poll and an aspen_fd_poll pending in one
// direction at once (either way round), a ready poll from a thread that is
// not the task's (cx handed over while the poll runs), and an fd epoll
// refuses (/dev/null).
struct ready_misuse {
    aspen_fd* fd = nullptr;  // a pipe's read end
    aspen_fd* dev_null = nullptr;
    int write_end = -1;
    int step = 0;
    unsigned char byte = 0;
    aspen_status fd_poll_while_waiting = ASPEN_OK, ready_while_fd_poll = ASPEN_OK;
    aspen_status from_another_thread = ASPEN_OK, refused = ASPEN_OK;
    aspen_status bad_direction[2] = {ASPEN_OK, ASPEN_OK};
    std::string bad_direction_error, fd_poll_while_waiting_error, ready_while_fd_poll_error, from_another_thread_error, refused_error;
};

aspen_status ready_misuse_poll(void* d, aspen_context* cx) {
    auto* m = static_cast<ready_misuse*>(d);
    long long n = 0;
    switch (m->step) {
        case 0: {
            m->bad_direction[0] = aspen_fd_ready_poll(m->fd, -1, cx);
            m->bad_direction[1] = aspen_fd_ready_poll(m->fd, 2, cx);
            m->bad_direction_error = aspen_last_error();
            if (aspen_fd_ready_poll(m->fd, ASPEN_FD_READ, cx) != ASPEN_PENDING) return ASPEN_ERROR;
            m->fd_poll_while_waiting = aspen_fd_poll(m->fd, ASPEN_FD_READ, read_byte, &m->byte, &n, cx);
            m->fd_poll_while_waiting_error = aspen_last_error();
            std::thread other([&] {
                m->from_another_thread = aspen_fd_ready_poll(m->dev_null, ASPEN_FD_READ, cx);
                m->from_another_thread_error = aspen_last_error();
            });
            other.join();
            m->refused = aspen_fd_ready_poll(m->dev_null, ASPEN_FD_READ, cx);
            m->refused_error = aspen_last_error();
            m->step = 1;
            if (::write(m->write_end, "x", 1) != 1) return ASPEN_ERROR;  // its edge wakes us
            return ASPEN_PENDING;
        }
        case 1: {
            aspen_status s = aspen_fd_ready_poll(m->fd, ASPEN_FD_READ, cx);
            if (s != ASPEN_OK) return s;  // pending until the edge came
            // The wait is over: an fd_poll in that direction is fine again.
            if (aspen_fd_poll(m->fd, ASPEN_FD_READ, read_byte, &m->byte, &n, cx) != ASPEN_READY || n != 1)
                return ASPEN_ERROR;
            if (aspen_fd_poll(m->fd, ASPEN_FD_READ, read_byte, &m->byte, &n, cx) != ASPEN_PENDING)
                return ASPEN_ERROR;  // empty now
            m->ready_while_fd_poll = aspen_fd_ready_poll(m->fd, ASPEN_FD_READ, cx);
            m->ready_while_fd_poll_error = aspen_last_error();
            m->step = 2;
            if (::write(m->write_end, "y", 1) != 1) return ASPEN_ERROR;
            return ASPEN_PENDING;
        }
        default: {
            aspen_status s = aspen_fd_poll(m->fd, ASPEN_FD_READ, read_byte, &m->byte, &n, cx);
            if (s != ASPEN_READY) return s;
            return n == 1 && m->byte == 'y' ? ASPEN_READY : ASPEN_ERROR;
        }
    }
}

TEST_P(capi, FdReadyPollMisuseInsideATask) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    int null_fd = ::open("/dev/null", O_RDONLY);
    ASSERT_GE(null_fd, 0);
    ready_misuse m;
    m.write_end = p[1];
    ASSERT_EQ(aspen_fd_adopt(p[0], &m.fd), ASPEN_OK) << aspen_last_error();
    ASSERT_EQ(aspen_fd_adopt(null_fd, &m.dev_null), ASPEN_OK) << aspen_last_error();  // a character device
    EXPECT_EQ(aspen_block_on(rt, ready_misuse_poll, &m, nullptr), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(m.bad_direction[0], ASPEN_EINVAL);
    EXPECT_EQ(m.bad_direction[1], ASPEN_EINVAL);
    EXPECT_EQ(m.bad_direction_error, "aspen_fd_ready_poll: direction must be ASPEN_FD_READ or ASPEN_FD_WRITE");
    EXPECT_EQ(m.fd_poll_while_waiting, ASPEN_MISUSE);
    EXPECT_NE(m.fd_poll_while_waiting_error.find("aspen_fd_ready_poll is pending"), std::string::npos)
        << m.fd_poll_while_waiting_error;
    EXPECT_EQ(m.ready_while_fd_poll, ASPEN_MISUSE);
    EXPECT_NE(m.ready_while_fd_poll_error.find("aspen_fd_poll is pending"), std::string::npos)
        << m.ready_while_fd_poll_error;
    EXPECT_EQ(m.from_another_thread, ASPEN_MISUSE);
    EXPECT_NE(m.from_another_thread_error.find("outside a task"), std::string::npos) << m.from_another_thread_error;
    EXPECT_EQ(m.refused, ASPEN_ERROR);  // epoll_ctl: EPERM
    EXPECT_NE(m.refused_error.find("aspen_fd_ready_poll: aspen reactor: epoll_ctl(ADD)"), std::string::npos)
        << m.refused_error;
    EXPECT_EQ(aspen_fd_clear_ready(m.dev_null, ASPEN_FD_READ), ASPEN_OK);  // never registered: nothing to clear
    aspen_fd_free(m.dev_null);
    aspen_fd_free(m.fd);
    ::close(p[1]);
}

TEST_P(capi, MetricsCountTheTasks) {
    constexpr int n = 100;
    std::vector<probe> probes(n);
    std::vector<aspen_join*> joins(n, nullptr);
    for (int i = 0; i < n; ++i) ASSERT_EQ(aspen_spawn(rt, ready_probe, &probes[i], drop_probe, &joins[i]), ASPEN_OK);
    for (aspen_join* j : joins) {
        EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
        aspen_join_free(j);
    }
    aspen_metrics total;
    total.size = sizeof total;
    ASSERT_EQ(aspen_runtime_metrics(rt, &total), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(total.size, sizeof total);
    EXPECT_EQ(total.workers, GetParam() == 0 ? 1u : static_cast<size_t>(GetParam()));
    EXPECT_GE(total.tasks_spawned + total.remote_spawns, static_cast<uint64_t>(n));
    EXPECT_GE(total.polls, static_cast<uint64_t>(n));
    // Every task has ended and nothing runs: the workers' counters add up
    // to the totals.
    uint64_t polls = 0;
    for (size_t w = 0; w < total.workers; ++w) {
        aspen_metrics one;
        one.size = sizeof one;
        ASSERT_EQ(aspen_runtime_worker_metrics(rt, w, &one), ASPEN_OK) << aspen_last_error();
        polls += one.polls;
    }
    EXPECT_EQ(polls, total.polls);
}

INSTANTIATE_TEST_SUITE_P(Kinds, capi, kinds, kind_name);

TEST(capi_misuse, MetricsArguments) {
    aspen_runtime* rt = make_c_runtime(2);
    aspen_metrics m;
    m.size = sizeof m;
    EXPECT_EQ(aspen_runtime_metrics(nullptr, &m), ASPEN_EINVAL);
    EXPECT_EQ(aspen_runtime_metrics(rt, nullptr), ASPEN_EINVAL);
    m.size = 3;  // not even `workers`
    EXPECT_EQ(aspen_runtime_metrics(rt, &m), ASPEN_EINVAL);
    EXPECT_NE(std::string(aspen_last_error()).find("size"), std::string::npos) << aspen_last_error();
    m.size = sizeof m;
    EXPECT_EQ(aspen_runtime_worker_metrics(rt, 2, &m), ASPEN_EINVAL);
    EXPECT_NE(std::string(aspen_last_error()).find("out of range"), std::string::npos) << aspen_last_error();
    // A caller built against an older, shorter struct: only its bytes are written.
    unsigned char buf[sizeof(aspen_metrics) + 16];
    std::memset(buf, 0xAB, sizeof buf);
    aspen_metrics* old = reinterpret_cast<aspen_metrics*>(buf);
    const size_t old_size = offsetof(aspen_metrics, tasks_spawned);
    old->size = old_size;
    ASSERT_EQ(aspen_runtime_metrics(rt, old), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(old->size, old_size);
    EXPECT_EQ(old->workers, 2u);
    for (size_t i = old_size; i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

TEST(capi_config, DefaultsMatchTheCppConfig) {
    aspen_config cfg;
    ASSERT_EQ(aspen_config_init(&cfg), ASPEN_OK);
    EXPECT_EQ(cfg.size, sizeof(aspen_config));
    EXPECT_EQ(cfg.current_thread, 0);
    EXPECT_GE(cfg.workers, 1u);
    EXPECT_EQ(cfg.local_queue_capacity, 256u);
    EXPECT_EQ(cfg.global_queue_interval, 61u);
    EXPECT_EQ(cfg.coop_budget, 128u);
    EXPECT_EQ(cfg.thread_name, nullptr);
    EXPECT_EQ(cfg.start_paused, 0);
    EXPECT_EQ(cfg.poll_time_histogram, 0);
    aspen_runtime* rt = nullptr;
    ASSERT_EQ(aspen_runtime_new(nullptr, &rt), ASPEN_OK);  // NULL config: defaults
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

void expect_invalid(void (*edit)(aspen_config&), const char* field) {
    aspen_config cfg;
    aspen_config_init(&cfg);
    edit(cfg);
    aspen_runtime* rt = reinterpret_cast<aspen_runtime*>(&cfg);  // overwritten with NULL
    EXPECT_EQ(aspen_runtime_new(&cfg, &rt), ASPEN_EINVAL) << field;
    EXPECT_EQ(rt, nullptr);
    EXPECT_NE(std::strstr(aspen_last_error(), field), nullptr) << aspen_last_error();
}

TEST(capi_config, InvalidValuesNameTheField) {
    expect_invalid([](aspen_config& c) { c.workers = 0; }, "workers");
    expect_invalid([](aspen_config& c) { c.local_queue_capacity = 3; }, "local_queue_capacity");
    expect_invalid([](aspen_config& c) { c.global_queue_interval = 0; }, "global_queue_interval");
    expect_invalid([](aspen_config& c) { c.coop_budget = 0; }, "coop_budget");
    expect_invalid([](aspen_config& c) { c.size = 4; }, "size");
    expect_invalid(
        [](aspen_config& c) {
            c.current_thread = 1;
            c.coop_budget = 0;
        },
        "coop_budget");
}

TEST(capi_config, SizeAllowsOlderAndNewerCallers) {
    // An older caller's shorter struct: the missing fields take defaults.
    aspen_config cfg;
    aspen_config_init(&cfg);
    cfg.size = offsetof(aspen_config, workers);
    cfg.workers = 0;  // beyond size: ignored
    aspen_runtime* rt = nullptr;
    ASSERT_EQ(aspen_runtime_new(&cfg, &rt), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    // A newer caller's longer struct: unknown fields must be zero.
    struct newer {
        aspen_config base;
        uint64_t extra;
    } n{};
    aspen_config_init(&n.base);
    n.base.size = sizeof n;
    n.base.workers = 1;
    ASSERT_EQ(aspen_runtime_new(&n.base, &rt), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    n.extra = 1;
    EXPECT_EQ(aspen_runtime_new(&n.base, &rt), ASPEN_EINVAL);
    EXPECT_NE(std::strstr(aspen_last_error(), "does not know"), nullptr) << aspen_last_error();
}

struct hooks {
    std::atomic<int> started{0};
    std::atomic<int> stopped{0};
};

struct park_hooks {
    std::atomic<int> parks{0};
    std::atomic<int> unparks{0};
};

// block_on of a 20 ms timer (the runtime sleeps meanwhile), then shutdown;
// returns the runtime's parks, then frees it. The timer starts in the
// task's first poll: one made before block_on could already be due there
// on a loaded machine (the ASan build once saw no park at all with a 1 ms
// timer made beforehand), and then nobody would park.
uint64_t sleep_once_and_count_parks(aspen_runtime* rt) {
    aspen_timer* t = nullptr;
    auto poll = [](void* d, aspen_context* cx) {
        auto& timer = *static_cast<aspen_timer**>(d);
        if (!timer && aspen_timer_new(20'000'000, &timer) != ASPEN_OK) return ASPEN_ERROR;
        return aspen_timer_poll(timer, cx);
    };
    EXPECT_EQ(aspen_block_on(rt, poll, &t, nullptr), ASPEN_OK);
    aspen_timer_free(t);
    EXPECT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);
    aspen_metrics m;
    m.size = sizeof m;
    EXPECT_EQ(aspen_runtime_metrics(rt, &m), ASPEN_OK);
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    EXPECT_EQ(m.parks, m.unparks);
    return m.parks;
}

// The park hooks run once per metrics park / unpark, with hook_data; a
// struct of the header before them (its size ends at poll_time_histogram)
// gets none, whatever its memory holds beyond.
TEST(capi_config, ParkHooksPairWithTheMetrics) {
    for (int kind : {0, 1, 2}) {
        park_hooks h;
        aspen_config cfg;
        aspen_config_init(&cfg);
        cfg.current_thread = kind == 0;
        cfg.workers = kind == 0 ? 1 : static_cast<size_t>(kind);
        cfg.hook_data = &h;
        // relaxed: read after the runtime's shutdown joined its threads.
        cfg.on_thread_park = [](void* d) { static_cast<park_hooks*>(d)->parks.fetch_add(1, std::memory_order_relaxed); };
        cfg.on_thread_unpark = [](void* d) {
            static_cast<park_hooks*>(d)->unparks.fetch_add(1, std::memory_order_relaxed);
        };
        aspen_runtime* rt = nullptr;
        ASSERT_EQ(aspen_runtime_new(&cfg, &rt), ASPEN_OK) << aspen_last_error();
        uint64_t parks = sleep_once_and_count_parks(rt);
        EXPECT_GE(parks, 1u) << "kind " << kind;
        EXPECT_EQ(static_cast<uint64_t>(h.parks.load()), parks) << "kind " << kind;
        EXPECT_EQ(static_cast<uint64_t>(h.unparks.load()), parks) << "kind " << kind;
    }
    park_hooks h;
    aspen_config old;
    aspen_config_init(&old);
    old.size = offsetof(aspen_config, on_thread_park);
    old.workers = 1;
    old.hook_data = &h;
    old.on_thread_park = [](void* d) { static_cast<park_hooks*>(d)->parks.fetch_add(1, std::memory_order_relaxed); };
    aspen_runtime* rt = nullptr;
    ASSERT_EQ(aspen_runtime_new(&old, &rt), ASPEN_OK) << aspen_last_error();
    EXPECT_GE(sleep_once_and_count_parks(rt), 1u);
    EXPECT_EQ(h.parks.load(), 0);  // beyond its size: not read
}

TEST(capi_config, ThreadHooksAndName) {
    hooks h;
    aspen_config cfg;
    aspen_config_init(&cfg);
    cfg.workers = 3;
    cfg.thread_name = "lang-vm";
    cfg.hook_data = &h;
    // relaxed: read after the runtime joined its threads.
    cfg.on_thread_start = [](void* d, size_t) { static_cast<hooks*>(d)->started.fetch_add(1, std::memory_order_relaxed); };
    cfg.on_thread_stop = [](void* d, size_t) { static_cast<hooks*>(d)->stopped.fetch_add(1, std::memory_order_relaxed); };
    aspen_runtime* rt = nullptr;
    ASSERT_EQ(aspen_runtime_new(&cfg, &rt), ASPEN_OK);
    probe p;
    EXPECT_EQ(aspen_block_on(rt, ready_probe, &p, nullptr), ASPEN_OK);
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    EXPECT_EQ(h.started.load(), 3);
    EXPECT_EQ(h.stopped.load(), 3);
}

TEST(capi_misuse, NullArgumentsAreEinval) {
    aspen_runtime* rt = make_c_runtime(1);
    probe p;
    aspen_join* j = nullptr;
    aspen_waker* w = nullptr;
    aspen_timer* t = nullptr;
    EXPECT_EQ(aspen_config_init(nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_runtime_new(nullptr, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_runtime_shutdown(nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_runtime_free(nullptr), ASPEN_OK);  // as free(NULL)
    EXPECT_EQ(aspen_spawn(nullptr, ready_probe, &p, drop_probe, &j), ASPEN_EINVAL);
    EXPECT_EQ(aspen_spawn(rt, nullptr, &p, drop_probe, &j), ASPEN_EINVAL);
    EXPECT_EQ(aspen_block_on(nullptr, ready_probe, &p, drop_probe), ASPEN_EINVAL);
    EXPECT_EQ(aspen_block_on(rt, nullptr, &p, drop_probe), ASPEN_EINVAL);
    EXPECT_EQ(aspen_spawn_blocking(nullptr, quick_fn, &p, drop_probe, &j), ASPEN_EINVAL);
    EXPECT_EQ(aspen_spawn_blocking(rt, nullptr, &p, drop_probe, &j), ASPEN_EINVAL);
    EXPECT_EQ(p.polls.load(), 0);
    EXPECT_EQ(p.drops.load(), 6);  // ownership of data passed in every case
    EXPECT_EQ(j, nullptr);
    EXPECT_NE(std::strstr(aspen_last_error(), "NULL"), nullptr) << aspen_last_error();
    EXPECT_EQ(aspen_join_wait(nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_join_poll(nullptr, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_join_abort(nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_join_is_finished(nullptr), -1);
    EXPECT_EQ(aspen_context_runtime(nullptr), nullptr);
    EXPECT_EQ(aspen_context_waker(nullptr, &w), ASPEN_EINVAL);
    EXPECT_EQ(aspen_context_waker(nullptr, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_waker_clone(nullptr, &w), ASPEN_EINVAL);
    EXPECT_EQ(aspen_waker_wake(nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_waker_wake_by_ref(nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_timer_new(1, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_timer_poll(nullptr, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_timer_reset(nullptr, 1), ASPEN_EINVAL);
    ASSERT_EQ(aspen_timer_new(1, &t), ASPEN_OK);
    EXPECT_EQ(aspen_timer_poll(t, nullptr), ASPEN_EINVAL);
    aspen_timer_free(t);  // never armed
    aspen_join_free(nullptr);
    aspen_waker_free(nullptr);
    aspen_timer_free(nullptr);
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

TEST(capi_misuse, FdArguments) {
    std::FILE* file = std::tmpfile();
    ASSERT_NE(file, nullptr);
    aspen_fd* fd = nullptr;
    EXPECT_EQ(aspen_fd_adopt(fileno(file), &fd), ASPEN_EINVAL);  // epoll cannot watch a regular file
    EXPECT_EQ(fd, nullptr);
    std::fclose(file);
    EXPECT_EQ(aspen_fd_adopt(-1, &fd), ASPEN_EINVAL);
    EXPECT_EQ(aspen_fd_adopt(0, nullptr), ASPEN_EINVAL);
    long long n = 0;
    EXPECT_EQ(aspen_fd_poll(nullptr, ASPEN_FD_READ, read_some, nullptr, &n, nullptr), ASPEN_EINVAL);
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    ASSERT_EQ(aspen_fd_adopt(p[0], &fd), ASPEN_OK);
    EXPECT_EQ(aspen_fd_poll(fd, ASPEN_FD_READ, read_some, nullptr, &n, nullptr), ASPEN_EINVAL);  // no cx
    EXPECT_EQ(aspen_fd_native(nullptr), -1);
    aspen_fd_free(fd);
    aspen_fd_free(nullptr);
    ::close(p[1]);
}

TEST(capi_misuse, FdReadyArguments) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    aspen_fd* fd = nullptr;
    ASSERT_EQ(aspen_fd_adopt(p[0], &fd), ASPEN_OK);
    EXPECT_EQ(aspen_fd_ready_poll(nullptr, ASPEN_FD_READ, nullptr), ASPEN_EINVAL);
    EXPECT_STREQ(aspen_last_error(), "aspen_fd_ready_poll: fd is NULL");
    EXPECT_EQ(aspen_fd_ready_poll(fd, ASPEN_FD_READ, nullptr), ASPEN_EINVAL);  // no cx: not in a task
    EXPECT_STREQ(aspen_last_error(), "aspen_fd_ready_poll: cx is NULL");
    EXPECT_EQ(aspen_fd_clear_ready(nullptr, ASPEN_FD_READ), ASPEN_EINVAL);
    EXPECT_STREQ(aspen_last_error(), "aspen_fd_clear_ready: fd is NULL");
    for (int bad : {-1, 2}) {
        EXPECT_EQ(aspen_fd_clear_ready(fd, bad), ASPEN_EINVAL);
        EXPECT_STREQ(aspen_last_error(), "aspen_fd_clear_ready: direction must be ASPEN_FD_READ or ASPEN_FD_WRITE");
    }
    // Nothing reported yet (never polled, not registered): nothing to clear.
    EXPECT_EQ(aspen_fd_clear_ready(fd, ASPEN_FD_READ), ASPEN_OK);
    EXPECT_EQ(aspen_fd_clear_ready(fd, ASPEN_FD_WRITE), ASPEN_OK);
    aspen_fd_free(fd);
    ::close(p[1]);
}

TEST(capi_misuse, StatusNames) {
    EXPECT_STREQ(aspen_status_name(ASPEN_OK), "ASPEN_OK");
    EXPECT_STREQ(aspen_status_name(ASPEN_PENDING), "ASPEN_PENDING");
    EXPECT_STREQ(aspen_status_name(ASPEN_SHUT_DOWN), "ASPEN_SHUT_DOWN");
    EXPECT_STREQ(aspen_status_name(ASPEN_CLOSED), "ASPEN_CLOSED");
    EXPECT_STREQ(aspen_status_name(ASPEN_WOULD_BLOCK), "ASPEN_WOULD_BLOCK");
    EXPECT_STREQ(aspen_status_name(static_cast<aspen_status>(42)), "(unknown aspen_status)");
}

TEST(capi_misuse, ConcurrentWaitersOnOneJoin) {
    // Two threads wait on one join: one gets the outcome, the other
    // ASPEN_MISUSE (at once, or after the first took it).
    aspen_runtime* rt = make_c_runtime(2);
    for (int round = 0; round < 200; ++round) {
        probe p;
        aspen_join* j = nullptr;
        ASSERT_EQ(aspen_spawn(rt, ready_probe, &p, drop_probe, &j), ASPEN_OK);
        aspen_status a = ASPEN_ERROR, b = ASPEN_ERROR;
        std::thread other([&] { a = aspen_join_wait(j); });
        b = aspen_join_wait(j);
        other.join();
        EXPECT_TRUE((a == ASPEN_OK && b == ASPEN_MISUSE) || (a == ASPEN_MISUSE && b == ASPEN_OK))
            << aspen_status_name(a) << " " << aspen_status_name(b);
        aspen_join_free(j);
    }
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}


// ---- the paused clock ---------------------------------------------------------

aspen_runtime* make_paused_runtime(int kind, bool paused = true) {
    return make_c_runtime(kind, [paused](aspen_config& c) { c.start_paused = paused ? 1 : 0; });
}

constexpr uint64_t hour_ns = 3600ull * 1000 * 1000 * 1000;

// Waits on a timer of `delay` and notes the task's clock before and after.
struct hour_sleeper {
    uint64_t delay = hour_ns;
    aspen_timer* timer = nullptr;
    uint64_t start = 0;
    uint64_t end = 0;
    std::atomic<bool> armed{false};
};

aspen_status hour_sleeper_poll(void* d, aspen_context* cx) {
    auto* s = static_cast<hour_sleeper*>(d);
    if (!s->timer) {
        s->start = aspen_now_ns();
        if (aspen_status st = aspen_timer_new(s->delay, &s->timer); st != ASPEN_OK) return st;
    }
    aspen_status st = aspen_timer_poll(s->timer, cx);
    // release: the advancing task's acquire then knows the timer is armed.
    s->armed.store(true, std::memory_order_release);
    if (st != ASPEN_READY) return st;
    s->end = aspen_now_ns();
    return ASPEN_READY;
}

void drop_hour_sleeper(void* d) {
    auto* s = static_cast<hour_sleeper*>(d);
    aspen_timer_free(s->timer);
    s->timer = nullptr;
}

class capi_paused : public ::testing::TestWithParam<int> {};

TEST_P(capi_paused, AnHourTimerCompletesAtOnceAndTheClockMovedByTheHour) {
    aspen_runtime* rt = make_paused_runtime(GetParam());
    hour_sleeper s;
    // Only the idle runtime's jump to the next timer can end this wait.
    ASSERT_EQ(aspen_block_on(rt, hour_sleeper_poll, &s, drop_hour_sleeper), ASPEN_OK) << aspen_last_error();
    EXPECT_GE(s.end - s.start, hour_ns);
    EXPECT_LT(s.end - s.start, hour_ns + 2'000'000);  // the deadline's tick, on the paused clock
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

// Spawns an hour_sleeper, waits until its timer is armed (yielding, so the
// runtime is never idle and cannot jump by itself), advances the clock by
// the hour, then joins the sleeper.
struct advancer {
    hour_sleeper sleeper;
    aspen_join* child = nullptr;
    aspen_advance* adv = nullptr;
    uint64_t before = 0;
    uint64_t after = 0;
    bool child_done_after_advance = false;
};

aspen_status yield_now(aspen_context* cx) {
    aspen_waker* w = nullptr;
    if (aspen_status st = aspen_context_waker(cx, &w); st != ASPEN_OK) return st;
    aspen_waker_wake(w);
    return ASPEN_PENDING;
}

aspen_status advancer_poll(void* d, aspen_context* cx) {
    auto* a = static_cast<advancer*>(d);
    if (!a->child) {
        aspen_status st = aspen_spawn(aspen_context_runtime(cx), hour_sleeper_poll, &a->sleeper, drop_hour_sleeper,
                                      &a->child);
        if (st != ASPEN_OK) return st;
    }
    if (!a->adv) {
        // acquire: pairs with the sleeper's release.
        if (!a->sleeper.armed.load(std::memory_order_acquire)) return yield_now(cx);
        a->before = aspen_now_ns();
        if (aspen_status st = aspen_advance_new(hour_ns, &a->adv); st != ASPEN_OK) return st;
    }
    aspen_status st = aspen_advance_poll(a->adv, cx);
    if (st != ASPEN_READY) return st;
    if (a->after == 0) {
        a->after = aspen_now_ns();
        a->child_done_after_advance = aspen_join_is_finished(a->child) == 1;
    }
    return aspen_join_poll(a->child, cx);
}

void drop_advancer(void* d) {
    auto* a = static_cast<advancer*>(d);
    aspen_advance_free(a->adv);
    aspen_join_free(a->child);
}

TEST_P(capi_paused, AdvanceFiresTheTimerAndYieldsToItsTask) {
    aspen_runtime* rt = make_paused_runtime(GetParam());
    advancer a;
    ASSERT_EQ(aspen_block_on(rt, advancer_poll, &a, drop_advancer), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(a.after - a.before, hour_ns);  // nothing else moved the paused clock
    EXPECT_EQ(a.sleeper.end - a.sleeper.start, hour_ns);
    // One thread: the advance's yield let the woken sleeper finish first.
    if (GetParam() <= 1) {
        EXPECT_TRUE(a.child_done_after_advance);
    }
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

// Polls an advance to its end; keeps the message of a failure (which is
// recorded on the worker's thread).
struct one_advance {
    aspen_advance* adv = nullptr;
    std::string error;
};

aspen_status one_advance_poll(void* d, aspen_context* cx) {
    auto* o = static_cast<one_advance*>(d);
    aspen_status st = aspen_advance_poll(o->adv, cx);
    if (st < 0) o->error = aspen_last_error();
    return st;
}

void drop_one_advance(void* d) { aspen_advance_free(static_cast<one_advance*>(d)->adv); }

TEST_P(capi_paused, AdvanceOnARunningClockIsMisuse) {
    aspen_runtime* rt = make_paused_runtime(GetParam(), false);
    one_advance o;
    ASSERT_EQ(aspen_advance_new(hour_ns, &o.adv), ASPEN_OK);
    const uint64_t before = aspen_now_ns();
    EXPECT_EQ(aspen_block_on(rt, one_advance_poll, &o, drop_one_advance), ASPEN_MISUSE);
    EXPECT_NE(o.error.find("not paused"), std::string::npos) << o.error;
    EXPECT_LT(aspen_now_ns() - before, hour_ns);  // the clock was left alone
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

INSTANTIATE_TEST_SUITE_P(Kinds, capi_paused, kinds, kind_name);

TEST(capi_misuse, AdvanceArguments) {
    aspen_advance* adv = nullptr;
    EXPECT_EQ(aspen_advance_new(1, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_advance_poll(nullptr, nullptr), ASPEN_EINVAL);
    ASSERT_EQ(aspen_advance_new(1, &adv), ASPEN_OK);
    EXPECT_EQ(aspen_advance_poll(adv, nullptr), ASPEN_EINVAL);
    aspen_advance_free(adv);
    aspen_advance_free(nullptr);
}

// ---- channels -------------------------------------------------------------------

// Messages are small numbers disguised as pointers (id + 1, so none is NULL).
void* msg_of(size_t id) { return reinterpret_cast<void*>(static_cast<uintptr_t>(id + 1)); }
size_t id_of(void* m) { return static_cast<size_t>(reinterpret_cast<uintptr_t>(m)) - 1; }

constexpr size_t producers = 4;
constexpr size_t per_producer = 300;

struct producer {
    aspen_sender* tx = nullptr;
    size_t first = 0;  // sends ids first .. first + per_producer - 1, in order
    size_t next = 0;
};

aspen_status producer_poll(void* d, aspen_context* cx) {
    auto* p = static_cast<producer*>(d);
    while (p->next < per_producer) {
        aspen_status st = aspen_send_poll(p->tx, msg_of(p->first + p->next), cx);
        if (st != ASPEN_READY) return st;
        ++p->next;
    }
    aspen_sender_free(p->tx);  // the last one ends the stream
    p->tx = nullptr;
    return ASPEN_READY;
}

void drop_producer(void* d) {
    auto* p = static_cast<producer*>(d);
    aspen_sender_free(p->tx);
    p->tx = nullptr;
}

struct consumer {
    aspen_receiver* rx = nullptr;
    std::vector<int> seen = std::vector<int>(producers * per_producer, 0);
    std::vector<size_t> last = std::vector<size_t>(producers, 0);  // next expected index per producer
    bool in_order = true;
    size_t received = 0;
    std::atomic<int> pendings{0};  // polls that returned pending
};

// Counts a received message; false for one that was never sent.
bool record(consumer& c, void* m) {
    size_t id = id_of(m);
    if (id >= c.seen.size()) return false;
    ++c.seen[id];
    size_t who = id / per_producer;
    if (id % per_producer != c.last[who]) c.in_order = false;
    c.last[who] = id % per_producer + 1;
    ++c.received;
    return true;
}

aspen_status consumer_poll(void* d, aspen_context* cx) {
    auto* c = static_cast<consumer*>(d);
    for (;;) {
        void* m = nullptr;
        aspen_status st = aspen_recv_poll(c->rx, cx, &m);
        if (st == ASPEN_CLOSED) return ASPEN_READY;  // end of stream
        // release: a test thread's acquire sees the receive waiting.
        if (st == ASPEN_PENDING) c->pendings.fetch_add(1, std::memory_order_release);
        if (st != ASPEN_READY) return st;
        if (!record(*c, m)) return ASPEN_ERROR;
    }
}

void drop_consumer(void* d) {
    auto* c = static_cast<consumer*>(d);
    aspen_receiver_free(c->rx);
    c->rx = nullptr;
}

void expect_each_once(const consumer& c) {
    EXPECT_EQ(c.received, producers * per_producer);
    EXPECT_TRUE(c.in_order);  // one sender's messages arrive in its order
    for (size_t i = 0; i < c.seen.size(); ++i) ASSERT_EQ(c.seen[i], 1) << "message " << i;
}

class capi_channel : public ::testing::TestWithParam<std::tuple<int, size_t>> {
protected:
    void SetUp() override { rt = make_c_runtime(std::get<0>(GetParam())); }
    void TearDown() override { EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK); }
    size_t capacity() const { return std::get<1>(GetParam()); }
    // A channel of the test's capacity whose receiver c's task (joined by
    // cj) drains; returns its first sender.
    aspen_sender* start_consumer(consumer& c, aspen_join*& cj) {
        aspen_sender* tx = nullptr;
        EXPECT_EQ(aspen_channel_new(capacity(), nullptr, &tx, &c.rx), ASPEN_OK);
        EXPECT_EQ(aspen_spawn(rt, consumer_poll, &c, drop_consumer, &cj), ASPEN_OK);
        return tx;
    }
    // C producer tasks, each with a clone of tx, send their ids; tx is freed
    // (the producers hold the only senders) and every producer joined.
    void run_producer_tasks(aspen_sender* tx) {
        producer ps[producers];
        aspen_join* pj[producers];
        for (size_t i = 0; i < producers; ++i) {
            ps[i].first = i * per_producer;
            ASSERT_EQ(aspen_sender_clone(tx, &ps[i].tx), ASPEN_OK);
            ASSERT_EQ(aspen_spawn(rt, producer_poll, &ps[i], drop_producer, &pj[i]), ASPEN_OK);
        }
        aspen_sender_free(tx);
        for (aspen_join* j : pj) {
            EXPECT_EQ(aspen_join_wait(j), ASPEN_OK) << aspen_last_error();
            aspen_join_free(j);
        }
    }
    aspen_runtime* rt = nullptr;
};

TEST_P(capi_channel, ProducerTasksAndAConsumerTaskCountEveryMessageOnce) {
    consumer c;
    aspen_join* cj = nullptr;
    aspen_sender* tx = start_consumer(c, cj);
    ASSERT_NE(tx, nullptr);
    run_producer_tasks(tx);
    EXPECT_EQ(aspen_join_wait(cj), ASPEN_OK) << aspen_last_error();
    aspen_join_free(cj);
    expect_each_once(c);
}

// Foreign threads send with aspen_try_send (yielding while the channel is
// full) or aspen_blocking_send (sleeping while it is); a C task receives.
void foreign_producers_to_consumer_task(aspen_runtime* rt, size_t capacity, bool blocking) {
    consumer c;
    aspen_join* cj = nullptr;
    aspen_sender* tx = nullptr;
    ASSERT_EQ(aspen_channel_new(capacity, nullptr, &tx, &c.rx), ASPEN_OK);
    ASSERT_EQ(aspen_spawn(rt, consumer_poll, &c, drop_consumer, &cj), ASPEN_OK);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < producers; ++i) {
        aspen_sender* mine = nullptr;
        ASSERT_EQ(aspen_sender_clone(tx, &mine), ASPEN_OK);
        threads.emplace_back([mine, i, blocking] {
            for (size_t k = 0; k < per_producer;) {
                void* m = msg_of(i * per_producer + k);
                aspen_status st = blocking ? aspen_blocking_send(mine, m) : aspen_try_send(mine, m);
                if (st == ASPEN_OK) ++k;
                else if (st == ASPEN_WOULD_BLOCK && !blocking) std::this_thread::yield();  // full: the consumer drains
                else {
                    ADD_FAILURE() << aspen_status_name(st) << ": " << aspen_last_error();
                    break;
                }
            }
            aspen_sender_free(mine);
        });
    }
    aspen_sender_free(tx);
    // The consumer ends when every thread freed its sender; a current-thread
    // runtime runs it only in here.
    EXPECT_EQ(aspen_join_wait(cj), ASPEN_OK);
    for (auto& t : threads) t.join();
    aspen_join_free(cj);
    expect_each_once(c);
}

TEST_P(capi_channel, ForeignThreadsTrySendToAConsumerTask) {
    foreign_producers_to_consumer_task(rt, capacity(), false);
}

TEST_P(capi_channel, ForeignThreadsBlockingSendToAConsumerTask) {
    foreign_producers_to_consumer_task(rt, capacity(), true);
}

// C producer tasks; a foreign thread receives with aspen_blocking_recv
// until the end of the stream.
TEST_P(capi_channel, ForeignThreadBlockingRecvFromProducerTasks) {
    consumer c;
    aspen_sender* tx = nullptr;
    ASSERT_EQ(aspen_channel_new(capacity(), nullptr, &tx, &c.rx), ASPEN_OK);
    aspen_status last = ASPEN_OK;
    bool all_known = true;
    std::thread drain([&] {
        void* m = nullptr;
        while ((last = aspen_blocking_recv(c.rx, &m)) == ASPEN_OK) all_known = record(c, m) && all_known;
    });
    run_producer_tasks(tx);
    drain.join();
    EXPECT_EQ(last, ASPEN_CLOSED);
    EXPECT_TRUE(all_known);
    aspen_receiver_free(c.rx);
    expect_each_once(c);
}

INSTANTIATE_TEST_SUITE_P(Kinds, capi_channel, ::testing::Combine(kinds, ::testing::Values(size_t{1}, size_t{16}, size_t{0})),
                         [](const ::testing::TestParamInfo<std::tuple<int, size_t>>& info) {
                             int kind = std::get<0>(info.param);
                             size_t cap = std::get<1>(info.param);
                             return (kind == 0 ? std::string("current_thread") : "workers" + std::to_string(kind)) +
                                    (cap == 0 ? std::string("_unbounded") : "_capacity" + std::to_string(cap));
                         });

// A consumer task pending on an empty channel: the last sender's free,
// from another thread once the receive waits, must wake it with the end
// of the stream (without the receive's waker in the channel it sleeps on).
TEST_P(capi, TheLastSenderFreeEndsAWaitingReceive) {
    aspen_sender* tx = nullptr;
    aspen_sender* tx2 = nullptr;
    consumer c;
    ASSERT_EQ(aspen_channel_new(4, nullptr, &tx, &c.rx), ASPEN_OK);
    ASSERT_EQ(aspen_sender_clone(tx, &tx2), ASPEN_OK);
    ASSERT_EQ(aspen_try_send(tx, msg_of(0)), ASPEN_OK);
    aspen_sender_free(tx);
    aspen_join* cj = nullptr;
    ASSERT_EQ(aspen_spawn(rt, consumer_poll, &c, drop_consumer, &cj), ASPEN_OK);
    std::thread last([tx2, &c] {
        // acquire: pairs with the consumer's release. No time bound: on a
        // current-thread runtime the consumer runs in aspen_join_wait below.
        while (c.pendings.load(std::memory_order_acquire) == 0) std::this_thread::yield();
        aspen_sender_free(tx2);
    });
    EXPECT_EQ(aspen_join_wait(cj), ASPEN_OK);
    last.join();
    aspen_join_free(cj);
    EXPECT_EQ(c.received, 1u);
}

TEST(capi_channel_ends, TryRecvSeesEmptyThenEndOfStream) {
    aspen_sender* tx = nullptr;
    aspen_sender* tx2 = nullptr;
    aspen_receiver* rx = nullptr;
    ASSERT_EQ(aspen_channel_new(2, nullptr, &tx, &rx), ASPEN_OK);
    ASSERT_EQ(aspen_sender_clone(tx, &tx2), ASPEN_OK);
    void* m = nullptr;
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_WOULD_BLOCK);
    EXPECT_EQ(aspen_try_send(tx, msg_of(1)), ASPEN_OK);
    EXPECT_EQ(aspen_try_send(tx2, msg_of(2)), ASPEN_OK);
    EXPECT_EQ(aspen_try_send(tx2, msg_of(3)), ASPEN_WOULD_BLOCK);  // full: still ours
    aspen_sender_free(tx);
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_OK);
    EXPECT_EQ(m, msg_of(1));
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_OK);
    EXPECT_EQ(m, msg_of(2));
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_WOULD_BLOCK);  // tx2 is still there
    aspen_sender_free(tx2);
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_CLOSED);
    EXPECT_NE(std::strstr(aspen_last_error(), "end of stream"), nullptr) << aspen_last_error();
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_CLOSED);  // and it stays ended
    aspen_receiver_free(rx);
}

// Heap messages with a count of how often each was dropped.
struct tracked {
    std::vector<int>* drops;
    size_t id;
};

void drop_tracked(void* m) {
    auto* t = static_cast<tracked*>(m);
    ++(*t->drops)[t->id];
    delete t;
}

TEST(capi_channel_ends, MessagesLeftAtReceiverFreeAreDroppedOnce) {
    for (size_t capacity : {size_t{0}, size_t{1}, size_t{64}}) {  // 64: the receiver takes batches of 4
        const size_t n = capacity == 1 ? 1 : 10;
        std::vector<int> drops(n, 0);
        aspen_sender* tx = nullptr;
        aspen_receiver* rx = nullptr;
        ASSERT_EQ(aspen_channel_new(capacity, drop_tracked, &tx, &rx), ASPEN_OK);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(aspen_try_send(tx, new tracked{&drops, i}), ASPEN_OK);
        size_t taken = 0;
        if (n > 1) {
            void* m = nullptr;
            ASSERT_EQ(aspen_try_recv(rx, &m), ASPEN_OK);  // received: ours, not the channel's
            EXPECT_EQ(static_cast<tracked*>(m)->id, 0u);
            delete static_cast<tracked*>(m);
            taken = 1;
        }
        aspen_receiver_free(rx);
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(drops[i], i < taken ? 0 : 1) << "capacity " << capacity << " message " << i;
        // The receiver is gone: a send is refused and the message stays the caller's.
        tracked* late = new tracked{&drops, 0};
        EXPECT_EQ(aspen_try_send(tx, late), ASPEN_CLOSED);
        EXPECT_NE(std::strstr(aspen_last_error(), "receiver is gone"), nullptr) << aspen_last_error();
        delete late;
        aspen_sender_free(tx);
    }
}

// Sends one message with aspen_send_poll; its outcome is the task's.
struct one_send {
    aspen_sender* tx = nullptr;
    void* msg = nullptr;
    std::atomic<int> pending_polls{0};
};

aspen_status one_send_poll(void* d, aspen_context* cx) {
    auto* s = static_cast<one_send*>(d);
    aspen_status st = aspen_send_poll(s->tx, s->msg, cx);
    // release: the test thread's acquire sees the task is waiting.
    if (st == ASPEN_PENDING) s->pending_polls.fetch_add(1, std::memory_order_release);
    return st;
}

void drop_one_send(void* d) {
    auto* s = static_cast<one_send*>(d);
    aspen_sender_free(s->tx);
    s->tx = nullptr;
}

TEST_P(capi, AWaitingSendGetsClosedWhenTheReceiverIsFreed) {
    std::vector<int> drops(2, 0);
    aspen_sender* tx = nullptr;
    aspen_receiver* rx = nullptr;
    ASSERT_EQ(aspen_channel_new(1, drop_tracked, &tx, &rx), ASPEN_OK);
    ASSERT_EQ(aspen_try_send(tx, new tracked{&drops, 0}), ASPEN_OK);  // full now
    auto* second = new tracked{&drops, 1};
    one_send s;
    s.msg = second;
    ASSERT_EQ(aspen_sender_clone(tx, &s.tx), ASPEN_OK);
    aspen_join* j = nullptr;
    ASSERT_EQ(aspen_spawn(rt, one_send_poll, &s, drop_one_send, &j), ASPEN_OK);
    if (GetParam() != 0) {
        // acquire: pairs with the task's release. Waits (no time bound) until
        // the send is queued, so the free below meets a waiting sender.
        while (s.pending_polls.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    }
    aspen_receiver_free(rx);  // drops message 0, wakes the waiting send
    EXPECT_EQ(aspen_join_wait(j), ASPEN_CLOSED);
    aspen_join_free(j);
    EXPECT_EQ(drops[0], 1);
    EXPECT_EQ(drops[1], 0);  // never sent: still ours
    delete second;
    aspen_sender_free(tx);
}

// A send pending with one message, polled again with another: misuse.
struct switcher {
    aspen_sender* tx = nullptr;
    int polls = 0;
    aspen_status second = ASPEN_OK;
};

aspen_status switcher_poll(void* d, aspen_context* cx) {
    auto* s = static_cast<switcher*>(d);
    aspen_status st = aspen_send_poll(s->tx, msg_of(s->polls), cx);
    if (s->polls++ == 0) {
        if (st != ASPEN_PENDING) return ASPEN_ERROR;
        s->second = aspen_send_poll(s->tx, msg_of(7), cx);
    }
    return ASPEN_READY;
}

TEST_P(capi, ASendPolledWithAnotherMessageIsMisuse) {
    aspen_sender* tx = nullptr;
    aspen_receiver* rx = nullptr;
    ASSERT_EQ(aspen_channel_new(1, nullptr, &tx, &rx), ASPEN_OK);
    ASSERT_EQ(aspen_try_send(tx, msg_of(9)), ASPEN_OK);
    switcher s;
    s.tx = tx;
    EXPECT_EQ(aspen_block_on(rt, switcher_poll, &s, nullptr), ASPEN_OK);
    EXPECT_EQ(s.second, ASPEN_MISUSE);
    void* m = nullptr;
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_OK);
    EXPECT_EQ(m, msg_of(9));
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_WOULD_BLOCK);  // the pending send never went through
    aspen_sender_free(tx);  // gives the pending send up
    EXPECT_EQ(aspen_try_recv(rx, &m), ASPEN_CLOSED);
    aspen_receiver_free(rx);
}

// Inside a C task the blocking calls would stop the worker: ASPEN_MISUSE,
// and nothing is taken or sent.
struct blocking_in_task {
    aspen_sender* tx = nullptr;
    aspen_receiver* rx = nullptr;
    aspen_status send_st = ASPEN_OK, recv_st = ASPEN_OK;
    std::string send_error, recv_error;
};

aspen_status blocking_in_task_poll(void* d, aspen_context*) {
    auto* b = static_cast<blocking_in_task*>(d);
    void* m = nullptr;
    b->recv_st = aspen_blocking_recv(b->rx, &m);
    b->recv_error = aspen_last_error();
    b->send_st = aspen_blocking_send(b->tx, msg_of(7));
    b->send_error = aspen_last_error();
    return ASPEN_READY;
}

void drop_blocking_in_task(void*) {}

TEST_P(capi, ChannelBlockingCallsInsideATaskAreMisuse) {
    for (size_t capacity : {size_t{4}, size_t{0}}) {
        blocking_in_task b;
        ASSERT_EQ(aspen_channel_new(capacity, nullptr, &b.tx, &b.rx), ASPEN_OK);
        ASSERT_EQ(aspen_try_send(b.tx, msg_of(1)), ASPEN_OK);
        aspen_join* j = nullptr;
        ASSERT_EQ(aspen_spawn(rt, blocking_in_task_poll, &b, drop_blocking_in_task, &j), ASPEN_OK);
        EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
        aspen_join_free(j);
        EXPECT_EQ(b.recv_st, ASPEN_MISUSE);
        EXPECT_NE(b.recv_error.find("aspen_blocking_recv"), std::string::npos) << b.recv_error;
        EXPECT_EQ(b.send_st, ASPEN_MISUSE);
        EXPECT_NE(b.send_error.find("aspen_blocking_send"), std::string::npos) << b.send_error;
        void* m = nullptr;
        EXPECT_EQ(aspen_try_recv(b.rx, &m), ASPEN_OK);
        EXPECT_EQ(m, msg_of(1));
        EXPECT_EQ(aspen_try_recv(b.rx, &m), ASPEN_WOULD_BLOCK);  // 7 was not sent
        aspen_sender_free(b.tx);
        aspen_receiver_free(b.rx);
    }
}

TEST(capi_channel_ends, BlockingCallsOnAClosedChannel) {
    aspen_sender* tx = nullptr;
    aspen_receiver* rx = nullptr;
    ASSERT_EQ(aspen_channel_new(1, nullptr, &tx, &rx), ASPEN_OK);
    EXPECT_EQ(aspen_blocking_send(tx, msg_of(1)), ASPEN_OK);
    ASSERT_EQ(aspen_receiver_close(rx), ASPEN_OK);
    EXPECT_EQ(aspen_blocking_send(tx, msg_of(2)), ASPEN_CLOSED);  // still ours
    void* m = nullptr;
    EXPECT_EQ(aspen_blocking_recv(rx, &m), ASPEN_OK);
    EXPECT_EQ(m, msg_of(1));
    EXPECT_EQ(aspen_blocking_recv(rx, &m), ASPEN_CLOSED);
    aspen_sender_free(tx);
    aspen_receiver_free(rx);
}

TEST(capi_misuse, ChannelArguments) {
    aspen_sender* tx = nullptr;
    aspen_receiver* rx = nullptr;
    aspen_sender* tx2 = nullptr;
    void* m = nullptr;
    EXPECT_EQ(aspen_channel_new(0, nullptr, nullptr, &rx), ASPEN_EINVAL);
    EXPECT_EQ(rx, nullptr);
    EXPECT_EQ(aspen_channel_new(0, nullptr, &tx, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(tx, nullptr);
    ASSERT_EQ(aspen_channel_new(3, nullptr, &tx, &rx), ASPEN_OK);
    EXPECT_EQ(aspen_sender_clone(nullptr, &tx2), ASPEN_EINVAL);
    EXPECT_EQ(tx2, nullptr);
    EXPECT_EQ(aspen_sender_clone(tx, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_try_send(nullptr, msg_of(0)), ASPEN_EINVAL);
    EXPECT_EQ(aspen_send_poll(nullptr, msg_of(0), nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_send_poll(tx, msg_of(0), nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_recv_poll(nullptr, nullptr, &m), ASPEN_EINVAL);
    EXPECT_EQ(aspen_recv_poll(rx, nullptr, &m), ASPEN_EINVAL);
    EXPECT_EQ(aspen_try_recv(nullptr, &m), ASPEN_EINVAL);
    EXPECT_EQ(aspen_try_recv(rx, nullptr), ASPEN_EINVAL);
    EXPECT_EQ(aspen_blocking_send(nullptr, msg_of(0)), ASPEN_EINVAL);
    EXPECT_EQ(aspen_blocking_recv(nullptr, &m), ASPEN_EINVAL);
    EXPECT_EQ(aspen_blocking_recv(rx, nullptr), ASPEN_EINVAL);
    EXPECT_NE(std::strstr(aspen_last_error(), "NULL"), nullptr) << aspen_last_error();
    aspen_sender_free(tx);
    aspen_receiver_free(rx);
    aspen_sender_free(nullptr);
    aspen_receiver_free(nullptr);
}

// ---- the coop budget of C polls ----------------------------------------------------

constexpr uint32_t small_budget = 4;
constexpr size_t loop_ops = 1000;  // operations a loop does; every one is ready at once

// A C task that does `target` operations that are all ready at once, in a
// loop inside one poll call; it returns only when an operation is pending,
// which with everything ready can only be the coop budget's yield. Its
// first poll spawns two tasks onto its worker: the second takes the next
// slot and pushes the first into the ring, where a plain self-wake would
// requeue the loop in front of it (the owner pops the newest end).
struct ready_loop {
    aspen_status (*step)(ready_loop&, aspen_context*) = nullptr;
    size_t target = loop_ops;
    size_t done = 0;
    size_t in_this_poll = 0;
    size_t most_in_one_poll = 0;
    size_t pendings = 0;
    bool in_order = true;  // each operation gave what the one before left next
    probe others[2];
    aspen_join* other_joins[2] = {nullptr, nullptr};
    int others_run_at_end = -1;  // how many of the two had run when the loop ended
    // What the steps work on.
    aspen_sender* tx = nullptr;
    aspen_receiver* rx = nullptr;
    aspen_timer* timer = nullptr;
    aspen_fd* fd = nullptr;
    unsigned char byte = 0;  // an fd read's buffer: a pending read keeps its arg
};

aspen_status ready_loop_poll(void* d, aspen_context* cx) {
    auto* l = static_cast<ready_loop*>(d);
    for (size_t i = 0; i < 2; ++i) {
        if (l->other_joins[i]) continue;
        aspen_status s = aspen_spawn(aspen_context_runtime(cx), ready_probe, &l->others[i], nullptr, &l->other_joins[i]);
        if (s != ASPEN_OK) return s;
    }
    l->in_this_poll = 0;
    while (l->done < l->target) {
        aspen_status s = l->step(*l, cx);
        if (s == ASPEN_PENDING) ++l->pendings;
        if (s != ASPEN_READY) return s;
        ++l->done;
        l->most_in_one_poll = std::max(l->most_in_one_poll, ++l->in_this_poll);
    }
    // relaxed: read only where this task shares the others' one thread.
    l->others_run_at_end = l->others[0].polls.load(std::memory_order_relaxed) +
                           l->others[1].polls.load(std::memory_order_relaxed);
    return ASPEN_READY;
}

class capi_coop : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        rt = make_c_runtime(GetParam(), [](aspen_config& c) { c.coop_budget = small_budget; });
    }
    void TearDown() override { EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK); }

    // Runs l to its end: every operation done, in order, none lost; no poll
    // did more than the budget; and where the loop shares one thread with
    // the two tasks it spawned, both ran before it ended. Each pending was
    // a yield for the spent budget (budget_forced_yields), except, where
    // `may_wait`, ones that waited for readiness.
    void run(ready_loop& l, const char* what, bool may_wait = false) {
        aspen_metrics before;
        before.size = sizeof before;
        ASSERT_EQ(aspen_runtime_metrics(rt, &before), ASPEN_OK) << aspen_last_error();
        ASSERT_EQ(aspen_block_on(rt, ready_loop_poll, &l, nullptr), ASPEN_OK) << what << ": " << aspen_last_error();
        aspen_metrics after;
        after.size = sizeof after;
        ASSERT_EQ(aspen_runtime_metrics(rt, &after), ASPEN_OK) << aspen_last_error();
        const std::uint64_t forced = after.budget_forced_yields - before.budget_forced_yields;
        if (may_wait) {
            EXPECT_LE(forced, l.pendings) << what;
            EXPECT_GE(forced, l.target / small_budget - 1) << what;
        } else {
            EXPECT_EQ(forced, l.pendings) << what;
        }
        for (aspen_join* j : l.other_joins) {
            EXPECT_EQ(aspen_join_wait(j), ASPEN_OK);
            aspen_join_free(j);
        }
        EXPECT_EQ(l.done, l.target) << what;
        EXPECT_TRUE(l.in_order) << what;
        EXPECT_LE(l.most_in_one_poll, size_t{small_budget}) << what;
        EXPECT_GE(l.pendings, l.target / small_budget - 1) << what;
        if (GetParam() <= 1) {
            EXPECT_EQ(l.others_run_at_end, 2) << what;
        }
    }
    // run() with `step` reading one byte at a time from a pipe that holds
    // loop_ops bytes (0, 1, 2, ...: in order), then checks none is left.
    void run_on_a_full_pipe(aspen_status (*step)(ready_loop&, aspen_context*), const char* what) {
        int p[2];
        ASSERT_EQ(::pipe(p), 0);
        for (size_t i = 0; i < loop_ops; ++i) {
            auto b = static_cast<unsigned char>(i);
            ASSERT_EQ(::write(p[1], &b, 1), 1);
        }
        ready_loop l;
        l.step = step;
        ASSERT_EQ(aspen_fd_adopt(p[0], &l.fd), ASPEN_OK);
        run(l, what, true);  // the first read may wait for the reactor's first report
        unsigned char b = 0;
        EXPECT_EQ(::read(aspen_fd_native(l.fd), &b, 1), -1) << what;  // every byte was read by the loop, once
        EXPECT_EQ(errno, EAGAIN) << what;
        aspen_fd_free(l.fd);
        ::close(p[1]);
    }
    aspen_runtime* rt = nullptr;
};

aspen_status recv_step(ready_loop& l, aspen_context* cx) {
    void* m = nullptr;
    aspen_status s = aspen_recv_poll(l.rx, cx, &m);
    if (s == ASPEN_READY && id_of(m) != l.done) l.in_order = false;
    return s;
}

TEST_P(capi_coop, ARecvLoopOnAFullChannelYieldsAndTakesEveryMessageOnce) {
    for (size_t capacity : {size_t{0}, loop_ops}) {
        ready_loop l;
        l.step = recv_step;
        ASSERT_EQ(aspen_channel_new(capacity, nullptr, &l.tx, &l.rx), ASPEN_OK);
        for (size_t i = 0; i < loop_ops; ++i) ASSERT_EQ(aspen_try_send(l.tx, msg_of(i)), ASPEN_OK);
        aspen_sender_free(l.tx);
        run(l, capacity == 0 ? "unbounded" : "bounded");
        void* m = nullptr;
        EXPECT_EQ(aspen_try_recv(l.rx, &m), ASPEN_CLOSED);  // nothing left behind, nothing taken twice
        aspen_receiver_free(l.rx);
    }
}

aspen_status send_step(ready_loop& l, aspen_context* cx) { return aspen_send_poll(l.tx, msg_of(l.done), cx); }

TEST_P(capi_coop, ASendLoopWithRoomYieldsAndSendsEveryMessageOnce) {
    for (size_t capacity : {size_t{0}, loop_ops}) {
        ready_loop l;
        l.step = send_step;
        ASSERT_EQ(aspen_channel_new(capacity, nullptr, &l.tx, &l.rx), ASPEN_OK);
        run(l, capacity == 0 ? "unbounded" : "bounded");
        aspen_sender_free(l.tx);
        void* m = nullptr;
        for (size_t i = 0; i < loop_ops; ++i) {
            ASSERT_EQ(aspen_try_recv(l.rx, &m), ASPEN_OK) << i;
            ASSERT_EQ(id_of(m), i);
        }
        EXPECT_EQ(aspen_try_recv(l.rx, &m), ASPEN_CLOSED);
        aspen_receiver_free(l.rx);
    }
}

aspen_status timer_step(ready_loop& l, aspen_context* cx) {
    aspen_status s = aspen_timer_poll(l.timer, cx);
    if (s == ASPEN_READY) aspen_timer_reset(l.timer, 0);  // due again at once
    return s;
}

TEST_P(capi_coop, ALoopOnADueTimerYields) {
    ready_loop l;
    l.step = timer_step;
    ASSERT_EQ(aspen_timer_new(0, &l.timer), ASPEN_OK);
    run(l, "timer");
    aspen_timer_free(l.timer);
}

long long read_one(void* buf, int fd) { return ::read(fd, buf, 1); }

aspen_status fd_step(ready_loop& l, aspen_context* cx) {
    long long r = 0;
    aspen_status s = aspen_fd_poll(l.fd, ASPEN_FD_READ, read_one, &l.byte, &r, cx);
    if (s == ASPEN_READY && (r != 1 || l.byte != static_cast<unsigned char>(l.done))) l.in_order = false;
    return s;
}

TEST_P(capi_coop, AReadLoopOnAFullPipeYieldsAndReadsEveryByteOnce) { run_on_a_full_pipe(fd_step, "fd"); }

// The readiness-only loop of a language runtime on a pipe that stays
// readable: ready poll, then its own read of one byte. The ready polls
// spend the budget, so the loop yields as the fd_poll loop does.
aspen_status fd_ready_step(ready_loop& l, aspen_context* cx) {
    aspen_status s = aspen_fd_ready_poll(l.fd, ASPEN_FD_READ, cx);
    if (s != ASPEN_OK) return s;
    unsigned char b = 0;
    if (::read(aspen_fd_native(l.fd), &b, 1) != 1 || b != static_cast<unsigned char>(l.done)) l.in_order = false;
    return ASPEN_READY;
}

TEST_P(capi_coop, AReadyPollLoopOnAFullPipeYieldsAndReadsEveryByteOnce) {
    run_on_a_full_pipe(fd_ready_step, "fd ready");
}

INSTANTIATE_TEST_SUITE_P(Kinds, capi_coop, kinds, kind_name);

// ---- closing a channel from the receiver's side -----------------------------------

// Spawns a task that sends on a full channel and, once that send waits,
// closes the receiver; its outcome is the send's.
struct closer {
    one_send sender;
    aspen_receiver* rx = nullptr;
    aspen_join* sj = nullptr;
};

aspen_status closer_poll(void* d, aspen_context* cx) {
    auto* c = static_cast<closer*>(d);
    if (!c->sj) {
        aspen_status s = aspen_spawn(aspen_context_runtime(cx), one_send_poll, &c->sender, drop_one_send, &c->sj);
        if (s != ASPEN_OK) return s;
    }
    // acquire: pairs with the sender's release once its send is queued.
    if (c->sender.pending_polls.load(std::memory_order_acquire) == 0) return yield_now(cx);
    if (aspen_status s = aspen_receiver_close(c->rx); s != ASPEN_OK) return s;
    return aspen_join_poll(c->sj, cx);
}

void drop_closer(void* d) { aspen_join_free(static_cast<closer*>(d)->sj); }

TEST_P(capi, ReceiverCloseReleasesAWaitingSenderWithItsMessage) {
    std::vector<int> drops(2, 0);
    aspen_sender* tx = nullptr;
    closer c;
    ASSERT_EQ(aspen_channel_new(1, drop_tracked, &tx, &c.rx), ASPEN_OK);
    ASSERT_EQ(aspen_try_send(tx, new tracked{&drops, 0}), ASPEN_OK);  // full now
    auto* second = new tracked{&drops, 1};
    c.sender.msg = second;
    ASSERT_EQ(aspen_sender_clone(tx, &c.sender.tx), ASPEN_OK);
    EXPECT_EQ(aspen_block_on(rt, closer_poll, &c, drop_closer), ASPEN_CLOSED);  // the waiting send's outcome
    EXPECT_EQ(drops[1], 0);  // never sent: it came back to the caller
    delete second;
    // Closed for sending; the message that was in it is still there.
    EXPECT_EQ(aspen_try_send(tx, msg_of(5)), ASPEN_CLOSED);
    void* m = nullptr;
    ASSERT_EQ(aspen_try_recv(c.rx, &m), ASPEN_OK);
    EXPECT_EQ(static_cast<tracked*>(m)->id, 0u);
    delete static_cast<tracked*>(m);
    EXPECT_EQ(aspen_try_recv(c.rx, &m), ASPEN_CLOSED);  // tx lives, yet the stream ended
    EXPECT_NE(std::strstr(aspen_last_error(), "end of stream"), nullptr) << aspen_last_error();
    aspen_receiver_free(c.rx);
    EXPECT_EQ(drops[0], 0);  // received, so not the channel's to drop
    aspen_sender_free(tx);
}

TEST_P(capi, ReceiverCloseKeepsTheMessagesForRecvPollThenEndsTheStream) {
    for (size_t capacity : {size_t{0}, size_t{1}, size_t{64}}) {  // 64: the receiver takes batches of 4
        const size_t n = capacity == 1 ? 1 : 10;
        consumer c;
        aspen_sender* tx = nullptr;
        ASSERT_EQ(aspen_channel_new(capacity, nullptr, &tx, &c.rx), ASPEN_OK);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(aspen_try_send(tx, msg_of(i)), ASPEN_OK);
        EXPECT_EQ(aspen_receiver_close(c.rx), ASPEN_OK);
        EXPECT_EQ(aspen_receiver_close(c.rx), ASPEN_OK);  // a second close changes nothing
        EXPECT_EQ(aspen_try_send(tx, msg_of(n)), ASPEN_CLOSED);
        one_send late;
        late.msg = msg_of(n);
        ASSERT_EQ(aspen_sender_clone(tx, &late.tx), ASPEN_OK);
        EXPECT_EQ(aspen_block_on(rt, one_send_poll, &late, drop_one_send), ASPEN_CLOSED) << capacity;
        // tx still lives: only the close can end the stream after the n messages.
        EXPECT_EQ(aspen_block_on(rt, consumer_poll, &c, nullptr), ASPEN_OK) << capacity;
        EXPECT_EQ(c.received, n) << capacity;
        EXPECT_TRUE(c.in_order);
        aspen_receiver_free(c.rx);
        aspen_sender_free(tx);
    }
}

TEST(capi_channel_ends, MessagesLeftAfterACloseAreDroppedOnceAtFree) {
    std::vector<int> drops(10, 0);
    aspen_sender* tx = nullptr;
    aspen_receiver* rx = nullptr;
    ASSERT_EQ(aspen_channel_new(64, drop_tracked, &tx, &rx), ASPEN_OK);
    for (size_t i = 0; i < drops.size(); ++i) ASSERT_EQ(aspen_try_send(tx, new tracked{&drops, i}), ASPEN_OK);
    ASSERT_EQ(aspen_receiver_close(rx), ASPEN_OK);
    for (size_t i = 0; i < 3; ++i) {
        void* m = nullptr;
        ASSERT_EQ(aspen_try_recv(rx, &m), ASPEN_OK);
        EXPECT_EQ(static_cast<tracked*>(m)->id, i);
        delete static_cast<tracked*>(m);
    }
    aspen_receiver_free(rx);
    for (size_t i = 0; i < drops.size(); ++i) EXPECT_EQ(drops[i], i < 3 ? 0 : 1) << "message " << i;
    aspen_sender_free(tx);
}

TEST(capi_misuse, ReceiverCloseArguments) {
    EXPECT_EQ(aspen_receiver_close(nullptr), ASPEN_EINVAL);
    EXPECT_NE(std::strstr(aspen_last_error(), "NULL"), nullptr) << aspen_last_error();
}

// ---- the poll-time histogram ------------------------------------------------------

uint64_t bucket_sum(const aspen_metrics& m) {
    uint64_t n = 0;
    for (uint64_t b : m.poll_time_histogram) n += b;
    return n;
}

// Some polls: a parent joining its children, and a task that yields.
void make_polls(aspen_runtime* rt) {
    parent p;
    p.children = 200;
    EXPECT_EQ(aspen_block_on(rt, parent_poll, &p, drop_parent), ASPEN_OK) << aspen_last_error();
    yielder y;
    y.left = 100;
    EXPECT_EQ(aspen_block_on(rt, yielder_poll, &y, nullptr), ASPEN_OK);
}

class capi_histogram : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(capi_histogram, EveryPollLandsInExactlyOneBucketWhenAskedFor) {
    const auto [kind, on] = GetParam();
    aspen_runtime* rt = make_c_runtime(kind, [on = on](aspen_config& c) { c.poll_time_histogram = on ? 1 : 0; });
    make_polls(rt);
    ASSERT_EQ(aspen_runtime_shutdown(rt), ASPEN_OK);  // nothing runs now: the counters add up
    aspen_metrics total;
    total.size = sizeof total;
    ASSERT_EQ(aspen_runtime_metrics(rt, &total), ASPEN_OK) << aspen_last_error();
    EXPECT_GE(total.polls, 300u);
    if (on) {
        EXPECT_EQ(bucket_sum(total), total.polls);
        EXPECT_GT(total.poll_time_ns, 0u);
        EXPECT_LE(total.longest_poll_ns, total.poll_time_ns);
    } else {
        EXPECT_EQ(bucket_sum(total), 0u);
        EXPECT_EQ(total.poll_time_ns, 0u);
        EXPECT_EQ(total.longest_poll_ns, 0u);
    }
    uint64_t time_ns = 0, longest = 0;
    for (size_t w = 0; w < total.workers; ++w) {
        aspen_metrics one;
        one.size = sizeof one;
        ASSERT_EQ(aspen_runtime_worker_metrics(rt, w, &one), ASPEN_OK) << aspen_last_error();
        EXPECT_EQ(bucket_sum(one), on ? one.polls : 0u) << "worker " << w;
        time_ns += one.poll_time_ns;
        longest = std::max(longest, one.longest_poll_ns);
    }
    EXPECT_EQ(time_ns, total.poll_time_ns);
    EXPECT_EQ(longest, total.longest_poll_ns);
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

INSTANTIATE_TEST_SUITE_P(Kinds, capi_histogram, ::testing::Combine(kinds, ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
                             int kind = std::get<0>(info.param);
                             return (kind == 0 ? std::string("current_thread") : "workers" + std::to_string(kind)) +
                                    (std::get<1>(info.param) ? "_on" : "_off");
                         });

TEST(capi_histogram_abi, AnOlderMetricsStructIsNotWrittenPastItsEnd) {
    aspen_runtime* rt = make_c_runtime(2, [](aspen_config& c) { c.poll_time_histogram = 1; });
    make_polls(rt);
    // The struct as it was before the histogram was appended, before
    // budget_forced_yields and the four after it were, before the two
    // I/O counts were, and before busy_ns was.
    for (const size_t old_size : {offsetof(aspen_metrics, poll_time_histogram),
                                  offsetof(aspen_metrics, budget_forced_yields), offsetof(aspen_metrics, io_would_block),
                                  offsetof(aspen_metrics, busy_ns)}) {
        for (int worker = -1; worker < 2; ++worker) {
            unsigned char buf[sizeof(aspen_metrics) + 16];
            std::memset(buf, 0xAB, sizeof buf);
            auto* old = reinterpret_cast<aspen_metrics*>(buf);
            old->size = old_size;
            aspen_status s = worker < 0 ? aspen_runtime_metrics(rt, old)
                                        : aspen_runtime_worker_metrics(rt, static_cast<size_t>(worker), old);
            ASSERT_EQ(s, ASPEN_OK) << aspen_last_error();
            EXPECT_EQ(old->size, old_size);
            EXPECT_EQ(old->workers, 2u);
            if (worker < 0) {
                EXPECT_GE(old->polls, 300u);
            }
            for (size_t i = old_size; i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
        }
    }
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
}

TEST(capi_histogram_abi, AnOlderConfigWithoutTheFieldGetsTheDefault) {
    for (bool old : {true, false}) {
        aspen_runtime* rt = make_c_runtime(1, [old](aspen_config& c) {
            c.poll_time_histogram = 1;
            if (old) c.size = offsetof(aspen_config, poll_time_histogram);  // beyond its size: not read
        });
        make_polls(rt);
        aspen_metrics m;
        m.size = sizeof m;
        ASSERT_EQ(aspen_runtime_metrics(rt, &m), ASPEN_OK) << aspen_last_error();
        EXPECT_GT(m.busy_ns, 0u) << "the worker ran the polls";
        if (old) {
            EXPECT_EQ(bucket_sum(m), 0u);
        } else {
            EXPECT_GT(bucket_sum(m), 0u);
        }
        EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    }
}

// aspen_config_init writes only the caller's sizeof(aspen_config) (the
// macro passes it): a struct of an older, shorter header is not written
// past its end, and the runtime reads the defaults for what it lacks; a
// newer, longer struct gets its unknown tail zeroed, which the runtime
// accepts; a size that cannot hold the first fields is refused.
TEST(capi_config, InitWritesOnlyTheCallersStruct) {
    constexpr std::size_t before_start_paused = offsetof(aspen_config, start_paused);
    unsigned char buf[sizeof(aspen_config) + 16];
    std::memset(buf, 0xAB, sizeof buf);
    auto* cfg = reinterpret_cast<aspen_config*>(buf);
    ASSERT_EQ(aspen_config_init_sized(cfg, before_start_paused), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(cfg->size, before_start_paused);
    EXPECT_TRUE(std::all_of(buf + before_start_paused, buf + sizeof buf, [](unsigned char b) { return b == 0xAB; }));
    cfg->workers = 1;
    aspen_runtime* rt = nullptr;
    ASSERT_EQ(aspen_runtime_new(cfg, &rt), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);

    ASSERT_EQ(aspen_config_init_sized(cfg, sizeof buf), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(cfg->size, sizeof buf);
    EXPECT_TRUE(std::all_of(buf + sizeof(aspen_config), buf + sizeof buf, [](unsigned char b) { return b == 0; }));
    cfg->workers = 1;
    ASSERT_EQ(aspen_runtime_new(cfg, &rt), ASPEN_OK) << aspen_last_error();
    EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);

    EXPECT_EQ(aspen_config_init_sized(cfg, sizeof(size_t)), ASPEN_EINVAL);
    EXPECT_NE(std::strstr(aspen_last_error(), "too small"), nullptr) << aspen_last_error();
    EXPECT_EQ(aspen_config_init_sized(nullptr, sizeof(aspen_config)), ASPEN_EINVAL);
    aspen_config whole;
    EXPECT_EQ((aspen_config_init)(&whole), ASPEN_OK);  // the function, as older programs call it
    EXPECT_EQ(whole.size, sizeof whole);
}

}  // namespace
