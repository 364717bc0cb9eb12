// aspen::block_in_place (as Tokio's task::block_in_place): the worker's
// other tasks go on while the function blocks, also with one worker; the
// function runs on the task's thread as on a plain thread; results,
// exceptions, nesting, shutdown, the paused clock, where it refuses, and
// the stand-in threads kept for the next call.
#include "runtime_kinds.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen_test::within;
using aspen_test::workers;

namespace {

// Spins (sleeping) until *flag is set: a blocking wait that only another
// task can end.
void wait_for_flag(const std::atomic<bool>& flag) {
    while (!flag.load()) std::this_thread::sleep_for(200us);
}

// Spawns a task that sets the flag; it sits in this worker's next slot, so
// with one worker only the stand-in can run it while the function blocks.
aspen::task<bool> blocks_until_a_queued_task_runs() {
    std::atomic<bool> flag{false};
    auto setter = aspen::spawn(aspen_test::set_flag(&flag));
    auto before = std::this_thread::get_id();
    auto inside = aspen::block_in_place([&] {
        wait_for_flag(flag);
        return std::this_thread::get_id();
    });
    // Read before the await: the flag is set before the setter ends, so the
    // await may suspend, and the task may go on on the worker that ends it
    // (this once failed under ASan at -O0 with two workers).
    auto after = std::this_thread::get_id();
    co_await setter;
    co_return inside == before && after == before;
}

class BlockInPlace : public ::testing::TestWithParam<int> {};

TEST_P(BlockInPlace, QueuedTasksRunWhileTheFunctionBlocks) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    for (int round = 0; round < 20; ++round) {
        bool same_thread = false;
        within(60s, "block_in_place waiting for a task of its own worker",
               [&] { same_thread = rt.block_on(blocks_until_a_queued_task_runs()); });
        EXPECT_TRUE(same_thread) << "the function and the rest of the task run on the calling thread";
    }
}

aspen::task<std::string> value_and_reference() {
    std::string s = aspen::block_in_place([] { return std::string("moved out"); });
    int x = 1;
    int& r = aspen::block_in_place([&]() -> int& { return x; });
    r = 7;
    aspen::block_in_place([&] { s += "!"; });
    co_return s + std::to_string(x);
}

TEST_P(BlockInPlace, GivesTheFunctionsResult) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    EXPECT_EQ(rt.block_on(value_and_reference()), "moved out!7");
}

aspen::task<int> forty_one() { co_return 41; }

aspen::task<int> rethrows() {
    int caught = 0;
    try {
        aspen::block_in_place([] { throw std::runtime_error("from the function"); });
    } catch (const std::runtime_error& e) {
        caught = std::string(e.what()) == "from the function" ? 1 : -1;
    }
    // The worker was given back: spawning and joining work as before.
    auto h = aspen::spawn(forty_one());
    co_return caught + co_await h;
}

TEST_P(BlockInPlace, RethrowsTheFunctionsExceptionInTheTask) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    EXPECT_EQ(rt.block_on(rethrows()), 42);
}

aspen::task<int> produce(aspen::mpsc_sender<int> tx, int n) {
    for (int i = 0; i < n; ++i) co_await tx.send(i);
    co_return n;
}

aspen::task<int> answer() { co_return 42; }

// Inside the function the thread is not a runtime thread: the blocking_*
// calls and a handle's block_on work, and runtime_handle::current() names
// the runtime, as in a spawn_blocking function.
aspen::task<long> plain_thread_inside() {
    auto [tx, rx] = aspen::mpsc_channel<int>(2);
    auto producer = aspen::spawn(produce(std::move(tx), 100));
    long total = aspen::block_in_place([&] {
        long sum = 0;
        while (auto v = rx.blocking_recv()) sum += *v;
        aspen::runtime_handle h = aspen::runtime_handle::current();
        return sum + h.block_on(answer());
    });
    co_await producer;
    co_return total;
}

TEST_P(BlockInPlace, InsideTheFunctionBlockingCallsWork) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    long total = 0;
    within(60s, "blocking_recv and block_on inside block_in_place", [&] { total = rt.block_on(plain_thread_inside()); });
    EXPECT_EQ(total, 99 * 100 / 2 + 42);
}

// A nested call runs its function directly (the thread is already lent out).
aspen::task<int> nested() {
    int depth = aspen::block_in_place([] { return 1 + aspen::block_in_place([] { return 1; }); });
    co_return depth;
}

TEST_P(BlockInPlace, NestedCallRunsTheFunction) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    EXPECT_EQ(rt.block_on(nested()), 2);
}

// The function runs within its task's poll, so it sees the task's
// task_local bindings (as in Tokio), a nested call's function too; a
// sync_scope inside it hides them until it ends, and nothing of the
// function's own stays bound once it returns. The thread's own list is back
// as it was after the call.
aspen::task_local<std::string> request_id;

aspen::task<std::string> sees_the_tasks_bindings() {
    std::string inside = aspen::block_in_place([] {
        std::string seen = request_id.get();
        seen += aspen::block_in_place([] { return "/" + request_id.get(); });
        seen += request_id.sync_scope(std::string("inner"), [] { return "/" + request_id.get(); });
        return seen + "/" + request_id.get();
    });
    co_return inside + "/" + request_id.get();
}

aspen::task<std::string> scoped_in_place() {
    // Outside a scope, also inside a function.
    bool unbound = aspen::block_in_place([] { return request_id.try_get() == nullptr; });
    aspen::task<std::string> scoped = request_id.scope("req-9", sees_the_tasks_bindings());
    std::string got = co_await std::move(scoped);
    co_return (unbound ? "unbound/" : "bound/") + got;
}

TEST_P(BlockInPlace, TheFunctionSeesTheTasksTaskLocals) {
    // The worker threads' own lists, outside tasks, once they stop: a list
    // left pointing into the task's (a binding freed since) would show here.
    static std::atomic<int> bound_at_stop{0};
    bound_at_stop.store(0);
    aspen::config cfg = workers(static_cast<std::size_t>(GetParam()));
    cfg.on_thread_stop = [](std::size_t) {
        if (request_id.try_get() != nullptr) bound_at_stop.fetch_add(1);
    };
    {
        aspen::runtime rt(cfg);
        EXPECT_EQ(rt.block_on(scoped_in_place()), "unbound/req-9/req-9/inner/req-9/req-9");
    }
    EXPECT_EQ(bound_at_stop.load(), 0);
    EXPECT_EQ(request_id.try_get(), nullptr);  // this thread's list
}

// Many tasks hand their workers off at once, stand-ins among them (a task a
// stand-in polls hands off again), each with children to run meanwhile:
// every task and child ends exactly once.
aspen::task<void> child(std::atomic<long>* runs) {
    runs->fetch_add(1);
    co_return;
}

aspen::task<void> hands_off(std::atomic<long>* runs, std::atomic<long>* done, int i) {
    std::vector<aspen::join_handle<void>> kids;
    for (int k = 0; k < 4; ++k) kids.push_back(aspen::spawn(child(runs)));
    aspen::block_in_place([&] { std::this_thread::sleep_for(std::chrono::microseconds(100 * (i % 5))); });
    for (auto& h : kids) co_await h;
    done->fetch_add(1);
}

aspen::task<void> many(std::atomic<long>* runs, std::atomic<long>* done, int n) {
    std::vector<aspen::join_handle<void>> hs;
    for (int i = 0; i < n; ++i) hs.push_back(aspen::spawn(hands_off(runs, done, i)));
    for (auto& h : hs) co_await h;
}

TEST_P(BlockInPlace, ManyAtOnceLoseNothing) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    std::atomic<long> runs{0}, done{0};
    constexpr int n = 200;
    within(120s, "200 tasks in block_in_place", [&] { rt.block_on(many(&runs, &done, n)); });
    EXPECT_EQ(done.load(), n);
    EXPECT_EQ(runs.load(), 4 * n);
    EXPECT_EQ(rt.metrics().tasks_alive, 0u);
}

// Functions that return at once or after a few microseconds: the hand-back
// then often comes while the stand-in is on its way to sleep, between its
// loop's check of the flag and its listing as a sleeper (the race that the
// check in park() closes). Without that check a round hangs.
aspen::task<long> short_calls(int rounds) {
    long sum = 0;
    unsigned rng = 12345;
    for (int i = 0; i < rounds; ++i) {
        rng = rng * 1103515245u + 12345u;
        auto spin = std::chrono::nanoseconds((rng >> 16) % 40'000);
        sum += aspen::block_in_place([&] {
            auto end = std::chrono::steady_clock::now() + spin;
            while (std::chrono::steady_clock::now() < end) {
            }
            return 1;
        });
    }
    co_return sum;
}

TEST_P(BlockInPlace, ShortCallsInARowAllReturn) {
    aspen::runtime rt(workers(static_cast<std::size_t>(GetParam())));
    long sum = 0;
    within(120s, "2,000 short block_in_place calls", [&] { sum = rt.block_on(short_calls(2000)); });
    EXPECT_EQ(sum, 2000);
}

INSTANTIATE_TEST_SUITE_P(Workers, BlockInPlace, ::testing::Values(1, 2, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "workers" + std::to_string(info.param); });

aspen::task<void> try_on_current_thread(bool* ran) {
    aspen::block_in_place([&] { *ran = true; });
    co_return;
}

TEST(BlockInPlaceRefused, OnACurrentThreadRuntime) {
    aspen::current_thread_runtime rt;
    bool ran = false;
    try {
        rt.block_on(try_on_current_thread(&ran));
        ADD_FAILURE() << "expected std::logic_error";
    } catch (const std::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find("current_thread"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(ran);
}

// Stand-in threads are kept for reuse (blocking_keep_alive), as Tokio's
// blocking threads. Every thread that runs a worker place (worker or
// stand-in) is counted once when it first starts, and again when it ends
// (a thread_local's destructor), so the tests see which threads exist.
struct thread_census {
    std::atomic<int> started{0}, ended{0};
    std::size_t num_started() const { return static_cast<std::size_t>(started.load()); }
};

struct end_counter {
    std::atomic<int>* ended = nullptr;
    ~end_counter() {
        if (ended) ended->fetch_add(1);
    }
};
thread_local end_counter this_thread_end;

aspen::config counted_threads(std::size_t n, thread_census* c) {
    aspen::config cfg = workers(n);
    // A thread's first start (a new thread's thread_local is empty; a
    // thread id may be reused by a later thread, this may not).
    cfg.on_thread_start = [c](std::size_t) {
        if (this_thread_end.ended) return;
        this_thread_end.ended = &c->ended;
        c->started.fetch_add(1);
    };
    return cfg;
}

// Each call's function waits for a task queued behind it on its one
// worker, so the stand-in surely begins (a function that ends before its
// stand-in has begun takes the hand-off back: no thread runs it).
aspen::task<void> calls_in_a_row(int n) {
    for (int i = 0; i < n; ++i) {
        aspen::task<bool> call = blocks_until_a_queued_task_runs();
        bool same_thread = co_await std::move(call);
        if (!same_thread) throw std::logic_error("the task changed threads");
    }
}

// Task k blocks in place until task k+1, spawned onto its worker (so only
// k's stand-in runs it), has begun: with one worker, a stand-in for each
// link at once.
aspen::task<void> chain(std::vector<std::atomic<bool>>* began, std::size_t k) {
    (*began)[k].store(true);
    if (k + 1 == began->size()) co_return;
    auto next = aspen::spawn(chain(began, k + 1));
    aspen::block_in_place([&] { wait_for_flag((*began)[k + 1]); });
    co_await next;
}

TEST(BlockInPlaceStandIns, CallsInARowReuseOneThread) {
    thread_census c;
    {
        aspen::runtime rt(counted_threads(1, &c));
        rt.block_on(calls_in_a_row(100));
        // The worker's own thread and one stand-in, not one per call.
        EXPECT_EQ(c.num_started(), 2u);
        EXPECT_EQ(c.ended.load(), 0);  // the stand-in waits for the next call
    }
    EXPECT_EQ(c.ended.load(), 2);
}

TEST(BlockInPlaceStandIns, AnIdleStandInEndsAfterTheKeepAlive) {
    thread_census c;
    aspen::config cfg = counted_threads(1, &c);
    cfg.blocking_keep_alive = 1ms;
    aspen::runtime rt(cfg);
    rt.block_on(calls_in_a_row(3));
    // Every stand-in ends; the worker's own thread stays. (On a loaded
    // machine a gap between two calls may outlast 1 ms: then each call had
    // a stand-in of its own, and each ends.)
    within(60s, "the idle stand-ins ending", [&] {
        while (c.ended.load() + 1 != c.started.load()) std::this_thread::sleep_for(1ms);
    });
    // A call after that starts a new one.
    const int before = c.started.load();
    rt.block_on(calls_in_a_row(1));
    EXPECT_EQ(c.started.load(), before + 1);
}

TEST(BlockInPlaceStandIns, DestructionEndsEveryStandIn) {
    thread_census c;
    {
        aspen::runtime rt(counted_threads(1, &c));  // keep-alive 10 s
        std::vector<std::atomic<bool>> began(5);
        rt.block_on(chain(&began, 0));  // four stand-ins at once
        EXPECT_EQ(c.num_started(), 5u);
    }
    EXPECT_EQ(static_cast<std::size_t>(c.ended.load()), c.num_started());
}

TEST(BlockInPlaceOutside, OnAPlainThreadJustCallsTheFunction) {
    EXPECT_EQ(aspen::block_in_place([] { return 5; }), 5);
}

// The runtime is destroyed while a task's function blocks: the destructor
// waits for the function, and nothing is left behind.
aspen::task<void> blocks_for(std::atomic<bool>* entered, std::atomic<bool>* release, std::atomic<bool>* finished) {
    aspen::block_in_place([&] {
        entered->store(true);
        wait_for_flag(*release);
        finished->store(true);
    });
    co_return;
}

TEST(BlockInPlaceShutdown, DestructionWaitsForTheFunction) {
    std::atomic<bool> entered{false}, release{false}, finished{false};
    within(60s, "destroying a runtime while block_in_place runs", [&] {
        std::thread releaser;
        {
            aspen::runtime rt(workers(2));
            auto h = rt.spawn(blocks_for(&entered, &release, &finished));
            h.detach();
            wait_for_flag(entered);
            releaser = std::thread([&] {
                std::this_thread::sleep_for(20ms);
                release.store(true);
            });
        }
        EXPECT_TRUE(finished.load());
        releaser.join();
    });
}

aspen::task<bool> shutdown_from_inside(aspen::runtime* rt) {
    bool refused = false;
    aspen::block_in_place([&] {
        try {
            rt->shutdown();
        } catch (const std::logic_error&) {
            refused = true;
        }
    });
    co_return refused;
}

TEST(BlockInPlaceShutdown, ShutdownFromTheFunctionIsRefused) {
    aspen::runtime rt(workers(2));
    EXPECT_TRUE(rt.block_on(shutdown_from_inside(&rt)));
}

// With a paused clock the runtime jumps to the next timer only when idle: a
// function running in block_in_place is work it waits for, so a sleeper
// must not wake meanwhile.
aspen::task<void> sleeper(std::atomic<bool>* woke) {
    co_await aspen::sleep(1h);
    woke->store(true);
}

aspen::task<bool> clock_holds_while_function_runs() {
    std::atomic<bool> woke{false};
    auto s = aspen::spawn(sleeper(&woke));
    co_await aspen::yield_now();  // let the sleeper arm its timer
    bool woke_during = aspen::block_in_place([&] {
        std::this_thread::sleep_for(100ms);
        return woke.load();
    });
    co_await s;
    co_return !woke_during && woke.load();
}

TEST(BlockInPlaceClock, PausedClockDoesNotAdvanceWhileTheFunctionRuns) {
    for (std::size_t n : {1u, 2u}) {
        aspen::config cfg = workers(n);
        cfg.start_paused = true;
        aspen::runtime rt(cfg);
        bool ok = false;
        within(60s, "paused clock and block_in_place", [&] { ok = rt.block_on(clock_holds_while_function_runs()); });
        EXPECT_TRUE(ok) << n << " workers";
    }
}

}  // namespace
