// aspen::task_local on every runtime kind: a binding is seen by the scope's
// body and what it awaits inline, across waits and workers; scopes nest;
// spawned tasks start without bindings; abort, exceptions and shutdown
// unbind and destroy the value; tasks interleaved on one worker each see
// their own.
#include "runtime_kinds.hpp"

#include <aspen/task_local.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;

namespace {

aspen::task_local<std::string> request_id;
aspen::task_local<int> depth;

class TaskLocal : public ::testing::TestWithParam<int> {};

task<std::string> read_id() {
    co_await aspen::sleep(1ms);  // resumes wherever the runtime likes
    co_return request_id.get();
}

task<std::string> two_levels_down() {
    task<std::string> inner = read_id();
    std::string id = co_await std::move(inner);
    co_await aspen::yield_now();
    EXPECT_EQ(request_id.get(), id);
    co_return id;
}

TEST_P(TaskLocal, TheBodyAndWhatItAwaitsSeeTheValue) {
    std::string got = aspen_test::run_on(
        GetParam(),
        []() -> task<std::string> {
            // Named first (README, "Compiler caveats": no temporary with a
            // destructor, here the std::string, in a co_await expression).
            task<std::string> scoped = request_id.scope("req-7", two_levels_down());
            co_return co_await std::move(scoped);
        }(),
        "scope");
    EXPECT_EQ(got, "req-7");
}

TEST_P(TaskLocal, OutsideAScopeGetThrowsAndTryGetIsNull) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            EXPECT_EQ(request_id.try_get(), nullptr);
            EXPECT_THROW(request_id.get(), std::logic_error);
            task<int> body = []() -> task<int> { co_return depth.get(); }();
            EXPECT_EQ(co_await depth.scope(3, std::move(body)), 3);
            // The scope ended: unbound again.
            EXPECT_EQ(depth.try_get(), nullptr);
            EXPECT_EQ(request_id.try_get(), nullptr);
        }(),
        "unbound");
}

task<void> nest(int level, int levels) {
    EXPECT_EQ(depth.get(), level);
    if (level == levels) co_return;
    co_await aspen::yield_now();
    task<void> deeper = nest(level + 1, levels);
    co_await depth.scope(level + 1, std::move(deeper));
    // The inner scope ended: this level's value shows again.
    EXPECT_EQ(depth.get(), level);
}

TEST_P(TaskLocal, InnerScopesHideOuterOnesUntilTheyEnd) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            task<void> body = nest(0, 50);
            co_await depth.scope(0, std::move(body));
        }(),
        "nesting");
}

TEST_P(TaskLocal, TheValueCanBeChangedInPlace) {
    std::string got = aspen_test::run_on(
        GetParam(),
        []() -> task<std::string> {
            task<std::string> scoped = request_id.scope("x", []() -> task<std::string> {
                request_id.get() += "-a";
                co_await aspen::sleep(1ms);
                request_id.get() += "-b";
                co_return request_id.get();
            }());
            co_return co_await std::move(scoped);
        }(),
        "in place");
    EXPECT_EQ(got, "x-a-b");
}

task<bool> sees_a_binding() {
    co_await aspen::yield_now();
    co_return request_id.try_get() != nullptr;
}

// A spawned child starts without its spawner's bindings, whether it runs
// nested in its joiner's poll (join adoption: the common case on one
// worker) or on another worker; binding inside the spawned task works.
TEST_P(TaskLocal, SpawnedTasksDoNotInherit) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            task<void> scoped = request_id.scope("parent", []() -> task<void> {
                aspen::join_handle<bool> plain = aspen::spawn(sees_a_binding());
                EXPECT_FALSE(co_await plain);
                task<bool> child = sees_a_binding();
                aspen::join_handle<bool> bound = aspen::spawn(request_id.scope("child", std::move(child)));
                EXPECT_TRUE(co_await bound);
                // Joining ran the children on this thread, maybe nested:
                // ours is still ours.
                EXPECT_EQ(request_id.get(), "parent");
                std::vector<task<bool>> two;
                two.push_back(sees_a_binding());
                two.push_back(sees_a_binding());
                task<std::vector<bool>> all = aspen::when_all(std::move(two));
                std::vector<bool> seen = co_await std::move(all);
                for (bool b : seen) EXPECT_FALSE(b);
                // timeout(d, task) runs a child task too; a copy binds it.
                task<bool> timed = aspen::timeout(1h, sees_a_binding());
                EXPECT_FALSE(co_await std::move(timed));
                task<bool> copied = aspen::timeout(1h, request_id.scope(request_id.get(), sees_a_binding()));
                EXPECT_TRUE(co_await std::move(copied));
            }());
            co_await std::move(scoped);
        }(),
        "no inheritance");
}

// Many tasks, each in its own scope, wait and yield in random order, so
// several of them are suspended inside their scopes on each worker at
// once: each must only ever see its own value.
TEST_P(TaskLocal, InterleavedTasksEachSeeTheirOwn) {
    constexpr int tasks = 200;
    int wrong = aspen_test::run_on(
        GetParam(),
        []() -> task<int> {
            auto one = [](int i) -> task<int> {
                int bad = 0;
                for (int step = 0; step < 20; ++step) {
                    if (depth.get() != i) ++bad;
                    if ((i + step) % 3 == 0) co_await aspen::sleep(std::chrono::microseconds((i * 7 + step) % 300));
                    else co_await aspen::yield_now();
                }
                co_return bad;
            };
            std::vector<aspen::join_handle<int>> hs;
            for (int i = 0; i < tasks; ++i) {
                task<int> body = one(i);
                hs.push_back(aspen::spawn(depth.scope(i, std::move(body))));
            }
            int bad = 0;
            for (auto& h : hs) bad += co_await h;
            co_return bad;
        }(),
        "interleaved");
    EXPECT_EQ(wrong, 0);
}

std::atomic<int> tokens_alive{0};
aspen::task_local<std::shared_ptr<aspen_test::alive_token>> token;
std::shared_ptr<aspen_test::alive_token> new_token() { return std::make_shared<aspen_test::alive_token>(&tokens_alive); }

task<void> wait_for_good() { co_await aspen::sleep(1h); }

// Binds a new token n levels deep, then waits for good.
task<void> victim(int n) {
    if (n == 0) co_return co_await wait_for_good();
    task<void> deeper = token.scope(new_token(), victim(n - 1));
    co_await std::move(deeper);
}

// Aborting a task that waits inside nested scopes destroys its frames on
// the aborting thread (an idle task) or at its next poll: every value is
// destroyed, and the aborter's own binding of the same key is untouched.
TEST_P(TaskLocal, AbortUnbindsAndDestroysTheValues) {
    aspen_test::run_on(
        GetParam(),
        token.scope(new_token(), []() -> task<void> {
            std::shared_ptr<aspen_test::alive_token> mine = token.get();
            auto h = aspen::spawn(token.scope(new_token(), victim(3)));
            while (tokens_alive.load() < 5) co_await aspen::sleep(1ms);  // all four scopes bound
            co_await aspen_test::abort_and_join(h);
            EXPECT_EQ(tokens_alive.load(), 1);
            EXPECT_EQ(token.get(), mine);
        }()),
        "abort");
    EXPECT_EQ(tokens_alive.load(), 0);
}

TEST_P(TaskLocal, AnExceptionLeavesTheScopeUnbound) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            task<void> scoped = request_id.scope("e", []() -> task<void> {
                co_await aspen::yield_now();
                throw std::runtime_error("boom " + request_id.get());
            }());
            bool caught = false;
            try {
                co_await std::move(scoped);
            } catch (const std::runtime_error& e) {
                caught = true;
                EXPECT_STREQ(e.what(), "boom e");
            }
            EXPECT_TRUE(caught);
            EXPECT_EQ(request_id.try_get(), nullptr);
        }(),
        "exception");
}

TEST_P(TaskLocal, SyncScopeInATask) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            int seen = depth.sync_scope(5, [] { return depth.get(); });
            EXPECT_EQ(seen, 5);
            EXPECT_EQ(depth.try_get(), nullptr);
            task<void> body = []() -> task<void> {
                depth.sync_scope(2, [] { EXPECT_EQ(depth.get(), 2); });
                EXPECT_EQ(depth.get(), 1);
                co_return;
            }();
            co_await depth.scope(1, std::move(body));
        }(),
        "sync scope");
}

// A runtime dropped while scoped tasks wait destroys them: their values
// go too (ASan and the count check it).
TEST_P(TaskLocal, ShutdownDestroysWaitingScopes) {
    {
        aspen_test::any_runtime rt(GetParam());
        rt->block_on([]() -> task<void> {
            for (int i = 0; i < 20; ++i) aspen::spawn(token.scope(new_token(), wait_for_good())).detach();
            while (tokens_alive.load() < 20) co_await aspen::sleep(1ms);
        }());
    }
    EXPECT_EQ(tokens_alive.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, TaskLocal, aspen_test::runtime_kinds, aspen_test::kind_name);

// Outside any task (a plain thread, a blocking-pool job) sync_scope binds
// for the thread; another thread sees nothing of it.
TEST(TaskLocalThread, SyncScopeOnAPlainThread) {
    EXPECT_EQ(depth.try_get(), nullptr);
    depth.sync_scope(9, [] {
        EXPECT_EQ(depth.get(), 9);
        std::thread other([] { EXPECT_EQ(depth.try_get(), nullptr); });
        other.join();
        depth.sync_scope(10, [] { EXPECT_EQ(depth.get(), 10); });
        EXPECT_EQ(depth.get(), 9);
    });
    EXPECT_EQ(depth.try_get(), nullptr);
    EXPECT_THROW(depth.get(), std::logic_error);
}

TEST(TaskLocalThread, BlockingJobsStartUnbound) {
    aspen::runtime rt(aspen_test::workers(2));
    bool seen = rt.block_on(depth.scope(1, []() -> task<bool> {
        auto h = aspen::spawn_blocking([] { return depth.try_get() != nullptr; });
        co_return co_await h;
    }()));
    EXPECT_FALSE(seen);
}

}  // namespace
