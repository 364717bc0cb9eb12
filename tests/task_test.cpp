// task<T>, spawn, join_handle, exceptions, abort, misuse and config errors,
// on both runtimes.
#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using aspen_test::workers;

aspen::task<int> answer() { co_return 42; }
aspen::task<int> add(int a, int b) { co_return co_await answer() - 42 + a + b; }
aspen::task<void> throws_logic() {
    throw std::logic_error("boom");
    co_return;
}

TEST(Task, BlockOnReturnsValue) {
    aspen::runtime rt(workers(2));
    EXPECT_EQ(rt.block_on(add(1, 2)), 3);
}

TEST(Task, FrameAddressFollowsHeader) {
    // The runtime finds a spawned root's header just before the coroutine's
    // address, so that address must be the block operator new returned.
    struct own_address {
        void* address = nullptr;
        bool await_ready() const noexcept { return false; }
        bool await_suspend(std::coroutine_handle<> h) noexcept {
            address = h.address();
            return false;  // resume at once
        }
        void* await_resume() const noexcept { return address; }
    };
    auto probe = []() -> aspen::task<bool> {
        void* self = co_await own_address{};
        co_return self == aspen::detail::current_task()->frame();
    };
    aspen::runtime rt(workers(1));
    EXPECT_TRUE(rt.block_on(probe()));
}

TEST(Task, SpawnAndJoin) {
    aspen::runtime rt(workers(2));
    auto outer = []() -> aspen::task<int> {
        auto h = aspen::spawn(answer());
        int x = co_await h;
        co_return x + 1;
    };
    EXPECT_EQ(rt.block_on(outer()), 43);
}

TEST(Task, ExceptionPropagatesInlineAndThroughHandle) {
    aspen::runtime rt(workers(2));
    auto inline_await = []() -> aspen::task<std::string> {
        try {
            co_await throws_logic();
        } catch (const std::logic_error& e) {
            co_return e.what();
        }
        co_return "no exception";
    };
    EXPECT_EQ(rt.block_on(inline_await()), "boom");
    auto via_handle = []() -> aspen::task<std::string> {
        auto h = aspen::spawn(throws_logic());
        try {
            co_await h;
        } catch (const std::logic_error& e) {
            co_return e.what();
        }
        co_return "no exception";
    };
    EXPECT_EQ(rt.block_on(via_handle()), "boom");
    EXPECT_THROW(rt.block_on(throws_logic()), std::logic_error);
}

TEST(Task, AwaitingHandleTwiceThrowsLogicError) {
    aspen::runtime rt(workers(2));
    auto body = []() -> aspen::task<int> {
        auto h = aspen::spawn(answer());
        co_await h;
        int caught = 0;
        try {
            co_await h;
        } catch (const std::logic_error&) {
            ++caught;
        }
        aspen::join_handle<int> moved = std::move(h);
        try {
            co_await h;  // moved-from
        } catch (const std::logic_error&) {
            ++caught;
        }
        co_return caught;
    };
    EXPECT_EQ(rt.block_on(body()), 2);
}

// An empty handle's word is not zero (join_handle.hpp, "One word"): every
// way of making one (default, moved from a live or a given-back handle,
// detached) must give the same empty handle, and every call on it must
// refuse or do nothing.
int empty_handle_faults(aspen::join_handle<int>& h) {
    int faults = 0;
    faults += h.valid();
    faults += h.is_finished();
    faults += h.header() != nullptr;
    h.abort();   // nothing to cancel
    h.detach();  // nothing to let go
    faults += h.valid();
    try {
        (void)h.id();
        ++faults;
    } catch (const std::logic_error&) {
    }
    try {
        (void)h.abort_handle();
        ++faults;
    } catch (const std::logic_error&) {
    }
    return faults;
}

aspen::task<int> empty_handle_misuse() {
    int faults = 0;
    std::array<aspen::join_handle<int>, 16> many;  // built empty, as a group
    for (auto& h : many) faults += empty_handle_faults(h);
    many[3] = aspen::spawn(answer());
    aspen::join_handle<int> live = std::move(many[3]);  // holds the block
    faults += empty_handle_faults(many[3]);
    faults += co_await live != 42;
    aspen::join_handle<int> taken = std::move(live);  // awaited: given back or the block
    faults += empty_handle_faults(live);
    faults += !taken.valid() || !taken.is_finished();
    aspen::join_handle<int> detached = aspen::spawn(answer());
    detached.detach();
    faults += empty_handle_faults(detached);
    for (auto* h : {&many[0], &live, &detached}) {
        try {
            (void)co_await *h;
            ++faults;
        } catch (const std::logic_error&) {
        }
    }
    co_return faults;
}

TEST(Task, EmptyHandlesRefuseEveryUse) {
    aspen::runtime rt(workers(2));
    EXPECT_EQ(rt.block_on(empty_handle_misuse()), 0);
    aspen::current_thread_runtime ct;
    EXPECT_EQ(ct.block_on(empty_handle_misuse()), 0);
    aspen::join_handle<int> outside;
    EXPECT_EQ(empty_handle_faults(outside), 0);
}

TEST(Task, AwaitingTaskTwiceThrowsLogicError) {
    aspen::runtime rt(workers(1));
    auto body = []() -> aspen::task<int> {
        auto t = answer();
        co_await t;
        try {
            co_await t;
        } catch (const std::logic_error&) {
            co_return 1;
        }
        co_return 0;
    };
    EXPECT_EQ(rt.block_on(body()), 1);
}

TEST(Task, SpawnOutsideRuntimeThrows) {
    EXPECT_THROW((void)aspen::spawn(answer()), std::logic_error);
}

// Spawning a moved-from task, or one that already ran to its end, is a
// misuse reported as std::logic_error, from inside a task (aspen::spawn)
// and from outside (runtime::spawn) alike; the runtime goes on.
std::string logic_error_of(const std::function<void()>& spawn_it) {
    try {
        spawn_it();
    } catch (const std::logic_error& e) {
        return e.what();
    }
    return "no exception";
}

template <class Runtime>
void expect_unspawnable_tasks_refused(Runtime& rt) {
    auto body = []() -> aspen::task<int> {
        aspen::task<int> t = answer();
        aspen::task<int> moved = std::move(t);
        std::string empty = logic_error_of([&] { (void)aspen::spawn(std::move(t)); });
        EXPECT_NE(empty.find("the task is empty"), std::string::npos) << empty;
        int v = co_await moved;
        std::string ran = logic_error_of([&] { (void)aspen::spawn(std::move(moved)); });
        EXPECT_NE(ran.find("the task has already run"), std::string::npos) << ran;
        co_return v;
    };
    EXPECT_EQ(rt.block_on(body()), 42);
    aspen::task<int> t = answer();
    aspen::task<int> moved = std::move(t);
    std::string outside = logic_error_of([&] { (void)rt.spawn(std::move(t)); });
    EXPECT_NE(outside.find("the task is empty"), std::string::npos) << outside;
    EXPECT_EQ(rt.block_on(std::move(moved)), 42);
}

TEST(Task, SpawningAnEmptyOrFinishedTaskThrows) {
    aspen::runtime rt(workers(2));
    expect_unspawnable_tasks_refused(rt);
}

TEST(CurrentThread, SpawningAnEmptyOrFinishedTaskThrows) {
    aspen::current_thread_runtime rt;
    expect_unspawnable_tasks_refused(rt);
}

TEST(Task, BlockOnInsideTaskThrows) {
    aspen::runtime rt(workers(1));
    auto body = [&]() -> aspen::task<bool> {
        try {
            rt.block_on(answer());
        } catch (const std::logic_error&) {
            co_return true;
        }
        co_return false;
    };
    EXPECT_TRUE(rt.block_on(body()));
}

TEST(Task, AbortWaitingTaskDestroysFrameNow) {
    // One worker: when body sees `waiting`, forever's poll has returned, so
    // forever is idle (not merely inside its poll) when abort() is called.
    aspen::runtime rt(workers(1));
    struct flag_on_destroy {
        std::atomic<int>* f;
        ~flag_on_destroy() { f->fetch_add(1); }
    };
    std::atomic<int> destroyed{0};
    std::atomic<bool> waiting{false};
    auto forever = [&]() -> aspen::task<int> {
        flag_on_destroy guard{&destroyed};
        co_await aspen::poll_fn([&](aspen::context&) -> aspen::poll<int> {
            waiting.store(true);
            return aspen::pending;
        });
        co_return 1;
    };
    auto body = [&]() -> aspen::task<bool> {
        auto h = aspen::spawn(forever());
        while (!waiting.load()) co_await aspen::yield_now();
        h.abort();  // idle: its frame is destroyed right here, on this thread
        bool destroyed_now = destroyed.load() == 1;
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            co_return destroyed_now;
        }
        co_return false;
    };
    EXPECT_TRUE(rt.block_on(body()));
    EXPECT_EQ(destroyed.load(), 1);
}

// A spawned task's frame is destroyed through destroy_root_frame, which
// marks it so that its free keeps the block (the handle reads the outcome
// there). A destructor in that frame may destroy another spawned frame (an
// abort of an idle task, nested) and inline frames: each block must stay
// or go as its own kind says. Both handles read their outcome afterwards;
// the ASan build (no frame pool) reports a block freed too early.
TEST(Task, AbortFromADestructorWhileASpawnedFrameIsDestroyed) {
    aspen::runtime rt(workers(1));  // both tasks idle when the abort comes
    std::atomic<int> waiting{0};
    struct abort_on_destroy {
        aspen::join_handle<int>* other;
        ~abort_on_destroy() {
            if (!other) return;
            other->abort();  // idle: its frame is destroyed now, nested
            aspen::task<int> never_awaited = answer();  // an inline frame freed here
        }
    };
    auto pending_forever = [&](aspen::join_handle<int>* other) -> aspen::task<int> {
        abort_on_destroy guard{other};
        co_await aspen::poll_fn([&](aspen::context&) -> aspen::poll<int> {
            waiting.fetch_add(1);
            return aspen::pending;
        });
        co_return 1;
    };
    auto body = [&]() -> aspen::task<int> {
        aspen::join_handle<int> inner = aspen::spawn(pending_forever(nullptr));
        aspen::join_handle<int> outer = aspen::spawn(pending_forever(&inner));
        while (waiting.load() < 2) co_await aspen::yield_now();
        outer.abort();
        int cancelled = 0;
        for (aspen::join_handle<int>* h : {&outer, &inner}) {
            try {
                co_await *h;
            } catch (const aspen::task_cancelled&) {
                ++cancelled;
            }
        }
        co_return cancelled;
    };
    EXPECT_EQ(rt.block_on(body()), 2);
}

TEST(Task, AbortBeforeStartNeverRuns) {
    aspen::runtime rt(workers(2));
    std::atomic<int> ran{0};
    auto body = [&]() -> aspen::task<bool> {
        auto h = aspen::spawn([](std::atomic<int>& r) -> aspen::task<void> {
            r.fetch_add(1);
            co_return;
        }(ran));
        h.abort();  // still queued in this worker's next slot: never starts
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
            co_return true;
        }
        co_return false;
    };
    EXPECT_TRUE(rt.block_on(body()));
    EXPECT_EQ(ran.load(), 0);
}

TEST(Task, AbortAfterCompletionKeepsResult) {
    aspen::runtime rt(workers(2));
    auto body = []() -> aspen::task<int> {
        auto h = aspen::spawn(answer());
        while (!h.is_finished()) co_await aspen::yield_now();
        h.abort();
        co_return co_await h;
    };
    EXPECT_EQ(rt.block_on(body()), 42);
}

TEST(Task, DetachedExceptionGoesToHandler) {
    std::atomic<int> reported{0};
    aspen::config c = workers(2);
    c.unhandled_exception_handler = [&](std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::logic_error&) {
            reported.fetch_add(1);
        }
    };
    {
        aspen::runtime rt(c);
        rt.spawn(throws_logic()).detach();
        auto dropped = rt.spawn(throws_logic());  // dropped after completion, unobserved
        auto observed = rt.spawn(throws_logic());
        EXPECT_THROW(rt.block_on([](aspen::join_handle<void> h) -> aspen::task<void> { co_await h; }(std::move(observed))),
                     std::logic_error);
        while (!dropped.is_finished()) std::this_thread::yield();
        dropped = {};
        EXPECT_EQ(rt.block_on(answer()), 42);  // runtime keeps running
    }
    EXPECT_EQ(reported.load(), 2);
}

// A handle detached before its task started (one worker, which runs the
// spawner) gives up its interest and reference at once: with a plain store
// while the task still sits in the next slot (b), with one CAS once a later
// spawn pushed it out (a). The task's own completion must then report the
// exception, and free the task (LSan).
TEST(Task, ExceptionOfATaskDetachedBeforeItStartedGoesToTheHandler) {
    std::atomic<int> reported{0};
    aspen::config c = workers(1);
    c.unhandled_exception_handler = [&](std::exception_ptr) { reported.fetch_add(1); };
    aspen::runtime rt(c);
    auto body = [&]() -> aspen::task<int> {
        for (int i = 0; i < 5; ++i) {
            aspen::join_handle<void> a = aspen::spawn(throws_logic());
            aspen::join_handle<void> b = aspen::spawn(throws_logic());
            EXPECT_FALSE(a.is_finished());
            EXPECT_FALSE(b.is_finished());
            a.detach();
            b.detach();
        }
        while (reported.load() < 10) co_await aspen::yield_now();  // the children run first
        co_return reported.load();
    };
    aspen_test::within(std::chrono::seconds(60), "every detached child reports", [&] { EXPECT_EQ(rt.block_on(body()), 10); });
    EXPECT_EQ(rt.metrics().tasks_alive, 0u);
}

TEST(Config, InvalidValuesThrowNamingTheField) {
    auto expect_invalid = [](aspen::config c, const std::string& field) {
        try {
            aspen::runtime rt(c);
            ADD_FAILURE() << "accepted invalid " << field;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        }
    };
    aspen::config c;
    c.workers = 0;
    expect_invalid(c, "workers");
    c = {};
    c.local_queue_capacity = 100;
    expect_invalid(c, "local_queue_capacity");
    c = {};
    c.local_queue_capacity = 1;
    expect_invalid(c, "local_queue_capacity");
    c = {};
    c.steal_attempts = 0;
    expect_invalid(c, "steal_attempts");
    c = {};
    c.global_queue_interval = 0;
    expect_invalid(c, "global_queue_interval");
    c = {};
    c.coop_budget = 0;
    expect_invalid(c, "coop_budget");
}

TEST(Config, DefaultsAreDocumentedValues) {
    aspen::config c;
    EXPECT_EQ(c.workers, aspen::default_workers());
    EXPECT_EQ(c.local_queue_capacity, 256u);
    EXPECT_EQ(c.steal_attempts, 32u);
    EXPECT_EQ(c.global_queue_interval, 61u);
    EXPECT_EQ(c.coop_budget, 128u);
}

TEST(Task, ThreadHooksAndName) {
    std::atomic<int> started{0}, stopped{0};
    aspen::config c = workers(3);
    c.on_thread_start = [&](std::size_t) { started.fetch_add(1); };
    c.on_thread_stop = [&](std::size_t) { stopped.fetch_add(1); };
    c.thread_name = "aspen-test";
    {
        aspen::runtime rt(c);
        auto name = []() -> aspen::task<std::string> {
            char buf[16] = {};
            pthread_getname_np(pthread_self(), buf, sizeof buf);
            co_return buf;
        };
        EXPECT_EQ(rt.block_on(name()), "aspen-test");
    }
    EXPECT_EQ(started.load(), 3);
    EXPECT_EQ(stopped.load(), 3);
}

TEST(Task, SpawnAfterShutdownThrows) {
    aspen::runtime rt(workers(2));
    rt.shutdown();
    EXPECT_THROW((void)rt.spawn(answer()), aspen::runtime_shut_down);
    EXPECT_THROW(rt.block_on(answer()), aspen::runtime_shut_down);
    aspen::current_thread_runtime ct;
    ct.shutdown();
    EXPECT_THROW((void)ct.spawn(answer()), aspen::runtime_shut_down);
}

// ---- deep chains ------------------------------------------------------------------
aspen::task<long> nested(int depth) {
    if (depth == 0) co_return 0;
    co_return 1 + co_await nested(depth - 1);
}

aspen::task<long> sequential(int count) {
    long sum = 0;
    for (int i = 0; i < count; ++i) sum += co_await answer();
    co_return sum;
}

TEST(Task, MillionNestedSynchronousAwaitsDoNotOverflow) {
    aspen::runtime rt(workers(1));
    EXPECT_EQ(rt.block_on(nested(1'000'000)), 1'000'000);
}

TEST(Task, MillionSequentialSynchronousAwaits) {
    aspen::runtime rt(workers(1));
    EXPECT_EQ(rt.block_on(sequential(1'000'000)), 42'000'000);
}

// ---- poll_fn and wakers -------------------------------------------------------------
struct slot {
    std::atomic<bool> ready{false};
    std::mutex m;
    aspen::waker w;
    void set() {
        ready.store(true);
        aspen::waker taken;
        {
            std::lock_guard l(m);
            taken = std::move(w);
        }
        taken.wake();
    }
    aspen::poll<int> poll(aspen::context& cx) {
        if (ready.load()) return aspen::ready(7);
        std::lock_guard l(m);
        w = cx.waker();
        if (ready.load()) return aspen::ready(7);
        return aspen::pending;
    }
};

TEST(PollFn, WokenFromForeignThread) {
    aspen::runtime rt(workers(2));
    slot s;
    std::atomic<int> polls{0};
    auto body = [&]() -> aspen::task<int> {
        co_return co_await aspen::poll_fn([&](aspen::context& cx) {
            polls.fetch_add(1);
            return s.poll(cx);
        });
    };
    auto h = rt.spawn(body());
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        s.set();
    });
    EXPECT_EQ(rt.block_on([](aspen::join_handle<int> h) -> aspen::task<int> { co_return co_await h; }(std::move(h))),
              7);
    t.join();
    // Polled when awaited and after the wake, not in between.
    EXPECT_LE(polls.load(), 3);
    EXPECT_GE(polls.load(), 1);
}

TEST(PollFn, WakeAfterTaskFinishedIsNoop) {
    aspen::runtime rt(workers(2));
    aspen::waker kept;
    auto body = [&]() -> aspen::task<int> {
        co_return co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
            kept = cx.waker();
            return aspen::ready(1);
        });
    };
    EXPECT_EQ(rt.block_on(body()), 1);
    aspen::waker copy = kept;
    copy.wake();
    kept.wake_by_ref();
    kept.wake();
    EXPECT_FALSE(static_cast<bool>(kept));
}

// A detached task is started and freed by its own poller without an RMW
// when nobody else holds it (start_poll, try_complete_alone); a waker
// clone and an abort_handle are such holders. Here the clone outlives the
// task, so its end must see three references and keep the block for the
// clone: waking and dropping it afterwards touches live memory (ASan,
// without the frame pool, checks). A second task drops its clone before it
// ends and is freed at its end. A third is held by an abort_handle from
// before its first poll, which must then see three references too.
TEST(PollFn, WakerCloneOrAbortHandleOutlivesADetachedTask) {
    aspen::runtime rt(workers(1));
    aspen::waker kept;
    aspen::waker dropped;
    std::atomic<int> bodies_done{0};
    auto child = [&bodies_done](aspen::waker& out, bool keep) -> aspen::task<void> {
        co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
            out = cx.waker();
            return aspen::ready(1);
        });
        co_await aspen::yield_now();
        if (!keep) out = {};
        bodies_done.fetch_add(1, std::memory_order_release);  // `out` to the test thread
    };
    aspen::waker unused;
    aspen::abort_handle unstarted;
    auto body = [&]() -> aspen::task<void> {
        aspen::spawn(child(kept, true)).detach();  // still in the next slot: the plain-store detach
        aspen::spawn(child(dropped, false)).detach();
        aspen::join_handle<void> h = aspen::spawn(child(unused, false));
        unstarted = h.abort_handle();
        h.detach();
        co_return;
    };
    rt.block_on(body());
    aspen_test::within(std::chrono::seconds(60), "the detached tasks finish", [&] {
        while (bodies_done.load(std::memory_order_acquire) != 3 || rt.metrics().tasks_alive != 0)
            std::this_thread::yield();
    });
    EXPECT_TRUE(unstarted.is_finished());
    unstarted.abort();  // no effect on a finished task, on its live block
    unstarted = {};
    EXPECT_TRUE(static_cast<bool>(kept));
    EXPECT_FALSE(static_cast<bool>(dropped));
    kept.wake_by_ref();  // the task is complete: a no-op on its live block
    kept.wake();         // and the last reference frees it (LSan)
    EXPECT_FALSE(static_cast<bool>(kept));
}

TEST(PollFn, ExceptionInPollReachesAwaiter) {
    aspen::runtime rt(workers(1));
    auto body = []() -> aspen::task<bool> {
        try {
            co_await aspen::poll_fn([](aspen::context&) -> aspen::poll<int> { throw std::runtime_error("x"); });
        } catch (const std::runtime_error&) {
            co_return true;
        }
        co_return false;
    };
    EXPECT_TRUE(rt.block_on(body()));
}

TEST(PollFn, OutsideTaskThrows) {
    auto a = aspen::poll_fn([](aspen::context&) -> aspen::poll<int> { return aspen::ready(1); });
    EXPECT_THROW(a.await_ready(), std::logic_error);
}

// ---- current_thread_runtime ------------------------------------------------------------
TEST(CurrentThread, RunsEverythingOnCallingThread) {
    aspen::current_thread_runtime rt;
    auto me = std::this_thread::get_id();
    auto body = [me]() -> aspen::task<int> {
        std::vector<aspen::join_handle<bool>> hs;
        for (int i = 0; i < 100; ++i)
            hs.push_back(aspen::spawn([](std::thread::id me) -> aspen::task<bool> {
                co_await aspen::yield_now();
                co_return std::this_thread::get_id() == me;
            }(me)));
        int same = 0;
        for (auto& h : hs) same += co_await h;
        co_return same;
    };
    EXPECT_EQ(rt.block_on(body()), 100);
    EXPECT_EQ(rt.block_on(nested(100'000)), 100'000);
}

TEST(CurrentThread, ForeignWake) {
    aspen::current_thread_runtime rt;
    slot s;
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        s.set();
    });
    auto body = [&]() -> aspen::task<int> { co_return co_await aspen::poll_fn([&](aspen::context& cx) { return s.poll(cx); }); };
    EXPECT_EQ(rt.block_on(body()), 7);
    t.join();
}

// ---- shutdown ---------------------------------------------------------------------------
using aspen_test::counted;

TEST(Shutdown, DestroysPendingTasksRunningDestructors) {
#ifdef ASPEN_SANITIZED
    constexpr long n = 100'000;
#else
    constexpr long n = 1'000'000;
#endif
    std::atomic<long> destroyed{0};
    slot never;
    {
        aspen::runtime rt(workers(2));
        // Half wait forever on a waker nobody fires, half never get to run.
        auto waiter = [&](counted c) -> aspen::task<void> {
            (void)c;
            co_await aspen::poll_fn([&](aspen::context&) -> aspen::poll<int> { return aspen::pending; });
        };
        auto spawner = [&]() -> aspen::task<void> {
            for (long i = 0; i < n / 2; ++i) aspen::spawn(waiter(counted(&destroyed))).detach();
            co_return;
        };
        rt.block_on(spawner());
        std::vector<aspen::join_handle<void>> queued;
        for (long i = 0; i < n / 2; ++i) queued.push_back(rt.spawn(waiter(counted(&destroyed))));
        rt.shutdown();
        EXPECT_EQ(rt.metrics().tasks_alive, 0u);
        for (auto& h : queued) EXPECT_TRUE(h.is_finished());
    }
    EXPECT_EQ(destroyed.load(), n);
}

TEST(Shutdown, CurrentThreadDestroysPending) {
    std::atomic<long> destroyed{0};
    {
        aspen::current_thread_runtime rt;
        auto waiter = [&](counted c) -> aspen::task<void> {
            (void)c;
            co_await aspen::poll_fn([&](aspen::context&) -> aspen::poll<int> { return aspen::pending; });
        };
        for (int i = 0; i < 1000; ++i) rt.spawn(waiter(counted(&destroyed))).detach();
        auto some = [&]() -> aspen::task<void> {
            for (int i = 0; i < 1000; ++i) aspen::spawn(waiter(counted(&destroyed))).detach();
            co_await aspen::yield_now();
        };
        rt.block_on(some());
    }
    EXPECT_EQ(destroyed.load(), 2000);
}

}  // namespace

namespace {
TEST(PollFn, ExceptionInRepollReachesAwaiter) {
    aspen::runtime rt(workers(2));
    slot s;
    auto body = [&]() -> aspen::task<bool> {
        try {
            co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
                auto p = s.poll(cx);
                if (p.is_ready()) throw std::runtime_error("late");
                return p;
            });
        } catch (const std::runtime_error&) {
            co_return true;
        }
        co_return false;
    };
    auto h = rt.spawn(body());
    std::thread t([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        s.set();
    });
    EXPECT_TRUE(rt.block_on([](aspen::join_handle<bool> h) -> aspen::task<bool> { co_return co_await h; }(std::move(h))));
    t.join();
}
}  // namespace

namespace {
// A spawned task's parameters (and everything else in its frame) are
// released when it finishes, not when its join handle goes: a task that
// holds a resource by parameter gives it back as soon as it is done.
TEST(Task, ParametersReleasedAtCompletionWhileHandleLives) {
    std::atomic<long> destroyed{0};
    aspen::runtime rt(workers(2));
    auto body = [&]() -> aspen::task<bool> {
        auto h = aspen::spawn([](counted c) -> aspen::task<int> {
            (void)c;
            co_return 5;
        }(counted(&destroyed)));
        while (!h.is_finished()) co_await aspen::yield_now();
        bool released_before_join = destroyed.load() == 1;
        int v = co_await h;
        co_return released_before_join && v == 5;
    };
    EXPECT_TRUE(rt.block_on(body()));
    EXPECT_EQ(destroyed.load(), 1);
}

// A finished root whose frame holds no parameter copy with a destructor is
// not destroyed (nothing would run). The promise looks at the parameter
// types and, for the one whose destructor may act, at whether it lives in
// the frame (a copy) or outside (a reference). An incomplete type counts as
// "not known" (it must compile and be handled the safe way); a parameter
// copy with a destructor, or two candidates, get the frame destroyed.
struct incomplete_thing;
aspen::task<int> through_incomplete(incomplete_thing& thing, int v) {
    (void)thing;
    co_return v;
}
struct incomplete_thing {
    std::string text = "has a destructor";
};
long twice_of(long x) { return 2 * x; }
static_assert(!aspen::detail::known_trivially_destructible<incomplete_thing>);
static_assert(aspen::detail::known_trivially_destructible<int>);

TEST(Task, FinishedRootsWithAndWithoutTrivialParameters) {
    std::atomic<long> destroyed{0};
    aspen::runtime rt(workers(2));
    incomplete_thing thing;
    auto body = [&]() -> aspen::task<long> {
        auto a = aspen::spawn(through_incomplete(thing, 7));
        auto b = aspen::spawn([](int x, double y) -> aspen::task<long> { co_return x + static_cast<long>(y); }(3, 4.0));
        auto c = aspen::spawn([](counted cnt, int x) -> aspen::task<long> {
            (void)cnt;
            co_return x;
        }(counted(&destroyed), 11));
        auto e = aspen::spawn([](counted c1, const incomplete_thing& ref, counted c2) -> aspen::task<long> {
            (void)c1;
            (void)c2;
            co_return static_cast<long>(ref.text.size());
        }(counted(&destroyed), thing, counted(&destroyed)));
        auto f = aspen::spawn([](const std::string& text, long (&twice)(long)) -> aspen::task<long> {
            co_return twice(static_cast<long>(text.size())) / 2;
        }(thing.text, twice_of));
        auto d = aspen::spawn([](int x) -> aspen::task<long> {
            if (x > 0) throw std::runtime_error("thrown by a task with a trivial parameter");
            co_return x;
        }(1));
        long sum = co_await a + co_await b + co_await c + co_await e + co_await f;
        try {
            sum += co_await d;
        } catch (const std::runtime_error&) {
            sum += 1000;
        }
        co_return sum;
    };
    long text = static_cast<long>(thing.text.size());
    EXPECT_EQ(rt.block_on(body()), 7 + 7 + 11 + text + text + 1000);
    EXPECT_EQ(destroyed.load(), 3);  // the counted parameters' copies in the frames
    EXPECT_EQ(thing.text, "has a destructor");  // referenced, never destroyed
}

// Results move out of the frame into the task's result slot; a move-only
// result and a large one come back intact.
TEST(Task, ResultsSurviveTheFrame) {
    aspen::runtime rt(workers(2));
    auto body = []() -> aspen::task<bool> {
        auto a = aspen::spawn([]() -> aspen::task<std::unique_ptr<int>> { co_return std::make_unique<int>(9); }());
        auto b = aspen::spawn([]() -> aspen::task<std::array<long, 64>> {
            std::array<long, 64> big{};
            for (long i = 0; i < 64; ++i) big[static_cast<std::size_t>(i)] = i * i;
            co_return big;
        }());
        auto p = co_await a;
        auto big = co_await b;
        co_return *p == 9 && big[63] == 63 * 63;
    };
    EXPECT_TRUE(rt.block_on(body()));
}
}  // namespace

namespace {
// A waker kept past the life of its runtime: waking it does nothing and
// touches no freed memory (the waker's reference keeps the task's block).
TEST(Misuse, WakingAfterTheRuntimeIsGoneIsANoop) {
    aspen::waker kept;
    {
        aspen::runtime rt(workers(2));
        rt.block_on([](aspen::waker& out) -> aspen::task<void> {
            co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
                out = cx.waker();
                return aspen::ready(0);
            });
        }(kept));
    }
    kept.wake_by_ref();
    kept.wake();
    EXPECT_FALSE(static_cast<bool>(kept));
}

TEST(Misuse, ShutdownFromOwnTaskThrows) {
    aspen::runtime rt(workers(2));
    auto body = [&]() -> aspen::task<bool> {
        try {
            rt.shutdown();
        } catch (const std::logic_error&) {
            co_return true;
        }
        co_return false;
    };
    EXPECT_TRUE(rt.block_on(body()));
    aspen::current_thread_runtime ct;
    auto body2 = [&]() -> aspen::task<bool> {
        try {
            ct.shutdown();
        } catch (const std::logic_error&) {
            co_return true;
        }
        co_return false;
    };
    EXPECT_TRUE(ct.block_on(body2()));
}
}  // namespace

namespace {
// A spawned task's result with a destructor keeps that destructor at the
// end of its block (result_layout in task.hpp), not in the header. Every
// such result is destroyed exactly once, whichever way the task ends and
// its handle goes: awaited, dropped after completion unobserved, detached
// before it ran, joined by a task on another worker; and a task never
// spawned, awaited inline, has its block freed with the same layout.
// Results of several sizes and alignments (a 1-byte and a 16-byte-aligned
// type) check the layout: a wrong offset would destroy garbage or clobber
// the value, which the checksums and ASan see.
std::atomic<long> results_alive{0};
using aspen_test::run_on;

template <std::size_t Size, std::size_t Align>
struct alignas(Align) tracked_result {
    unsigned char bytes[Size];
    explicit tracked_result(unsigned char seed) noexcept {
        for (std::size_t i = 0; i < Size; ++i) bytes[i] = static_cast<unsigned char>(seed + i);
        results_alive.fetch_add(1, std::memory_order_relaxed);
    }
    tracked_result(tracked_result&& o) noexcept {
        std::copy(std::begin(o.bytes), std::end(o.bytes), bytes);
        results_alive.fetch_add(1, std::memory_order_relaxed);
    }
    tracked_result& operator=(tracked_result&&) = delete;
    ~tracked_result() { results_alive.fetch_sub(1, std::memory_order_relaxed); }
    bool holds(unsigned char seed) const noexcept {
        for (std::size_t i = 0; i < Size; ++i)
            if (bytes[i] != static_cast<unsigned char>(seed + i)) return false;
        return true;
    }
};

template <class R>
aspen::task<R> make_result(unsigned char seed) {
    co_return R(seed);
}

// Returns how many results came back wrong.
template <class R>
aspen::task<int> every_end_of(unsigned char seed) {
    int wrong = 0;
    R inline_result = co_await make_result<R>(seed);  // never spawned: freed with the same layout
    wrong += !inline_result.holds(seed);
    R taken = co_await aspen::spawn(make_result<R>(seed));  // adopted, or joined
    wrong += !taken.holds(seed);
    std::vector<aspen::join_handle<R>> handles;
    for (int i = 0; i < 64; ++i) handles.push_back(aspen::spawn(make_result<R>(static_cast<unsigned char>(seed + i))));
    for (int i = 0; i < 64; i += 2) {  // every other one awaited, in reverse
        R r = co_await handles[static_cast<std::size_t>(62 - i)];
        wrong += !r.holds(static_cast<unsigned char>(seed + 62 - i));
    }
    for (auto& h : handles)
        while (h.valid() && !h.is_finished()) co_await aspen::yield_now();
    handles.clear();  // the rest: finished, never observed
    for (int i = 0; i < 64; ++i) aspen::spawn(make_result<R>(seed)).detach();
    co_return wrong;
}

TEST(Task, SpawnedResultsWithDestructorsAreDestroyedOnce) {
    using layout_of_string = aspen::detail::result_layout<std::string>;
    static_assert(layout_of_string::has_dtor && layout_of_string::size == sizeof(std::string) + sizeof(void*));
    static_assert(aspen::detail::result_layout<int>::size == sizeof(int));
    static_assert(aspen::detail::result_layout<tracked_result<1, 1>>::size == 2 * sizeof(void*));
    static_assert(aspen::detail::result_layout<tracked_result<1, 1>>::align == alignof(void*));
    static_assert(aspen::detail::result_layout<tracked_result<40, 16>>::align == 16);
    for (int kind : {0, 1, 2, 8}) {
        SCOPED_TRACE(kind);
        // run_on's runtime ends before it returns: the detached ones have
        // run or were destroyed.
        EXPECT_EQ(run_on(kind, every_end_of<tracked_result<1, 1>>(7), "1-byte results"), 0);
        EXPECT_EQ(run_on(kind, every_end_of<tracked_result<24, 8>>(7), "24-byte results"), 0);
        EXPECT_EQ(run_on(kind, every_end_of<tracked_result<40, 16>>(7), "16-aligned results"), 0);
        EXPECT_EQ(results_alive.load(), 0);
    }
    // A std::string result (its heap buffer is a leak ASan reports if the
    // destructor does not run).
    aspen::runtime rt(workers(2));
    auto strings = []() -> aspen::task<std::size_t> {
        std::size_t total = 0;
        for (int i = 0; i < 100; ++i) {
            auto h = aspen::spawn([](int n) -> aspen::task<std::string> { co_return std::string(100 + n, 'x'); }(i));
            if (i % 3 == 0) continue;  // dropped unobserved
            total += (co_await h).size();
        }
        co_return total;
    };
    std::size_t expected = 0;
    for (int i = 0; i < 100; ++i)
        if (i % 3 != 0) expected += static_cast<std::size_t>(100 + i);
    EXPECT_EQ(rt.block_on(strings()), expected);
}
}  // namespace
