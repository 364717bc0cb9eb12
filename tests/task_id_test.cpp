// task_id: every spawned task has one, distinct from every other task's,
// the same whoever asks (the task itself, its join_handle, an abort_handle,
// from any thread, before it started or after it ended); code awaited inline
// sees its awaiting task's id; outside a task there is none; empty handles
// and misuse throw std::logic_error. Also the C API's aspen_join_id and
// aspen_context_task_id.
#include <aspen/aspen.h>
#include <aspen/aspen.hpp>

#include "capi_util.hpp"
#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

using aspen_test::run_on;

#ifdef ASPEN_SANITIZED
constexpr int many = 300;
#else
constexpr int many = 3000;
#endif

class TaskId : public ::testing::TestWithParam<int> {};

// The task's id before and after a suspension (it may move to another
// worker meanwhile), and as seen by a coroutine it awaits inline.
aspen::task<std::uint64_t> inline_child_id() { co_return aspen::current_task_id().value(); }

aspen::task<std::vector<std::uint64_t>> ids_seen() {
    std::uint64_t first = aspen::current_task_id().value();
    co_await aspen::yield_now();
    std::uint64_t after_yield = aspen::current_task_id().value();
    std::uint64_t inline_child = co_await inline_child_id();
    co_return std::vector<std::uint64_t>{first, after_yield, inline_child};
}

aspen::task<void> spawned_tasks_have_distinct_stable_ids() {
    std::vector<aspen::join_handle<std::vector<std::uint64_t>>> hs;
    std::vector<std::uint64_t> from_handles;
    for (int i = 0; i < many; ++i) {
        hs.push_back(aspen::spawn(ids_seen()));
        // Asked before the task has run (half of them) or after.
        if (i % 2 == 0) from_handles.push_back(hs.back().id().value());
    }
    std::uint64_t mine = aspen::current_task_id().value();
    std::set<std::uint64_t> distinct{mine};
    for (int i = 0; i < many; ++i) {
        std::uint64_t handle_id = hs[i].id().value();
        if (i % 2 == 0) {
            EXPECT_EQ(handle_id, from_handles[i / 2]);
        }
        std::vector<std::uint64_t> seen = co_await hs[i];
        EXPECT_EQ(seen[0], handle_id);
        EXPECT_EQ(seen[1], handle_id);
        EXPECT_EQ(seen[2], handle_id) << "an inline await runs as its awaiting task";
        EXPECT_EQ(hs[i].id().value(), handle_id) << "still there after the await";
        EXPECT_EQ(hs[i].abort_handle().id().value(), handle_id);
        EXPECT_NE(handle_id, 0u);
        distinct.insert(handle_id);
    }
    EXPECT_EQ(distinct.size(), static_cast<std::size_t>(many) + 1) << "every task's id differs (block_on's too)";
}

TEST_P(TaskId, SpawnedTasksHaveDistinctStableIds) {
    run_on(GetParam(), spawned_tasks_have_distinct_stable_ids(), "task ids");
}

// The handle asks from a foreign thread while the task asks itself: both
// first requests race for the one id, and must agree.
aspen::task<std::uint64_t> own_id_after(std::atomic<bool>* go) {
    while (!go->load(std::memory_order_acquire)) co_await aspen::yield_now();
    co_return aspen::current_task_id().value();
}

aspen::task<void> first_requests_race() {
    for (int i = 0; i < many / 10; ++i) {
        std::atomic<bool> go{false};
        aspen::join_handle<std::uint64_t> h = aspen::spawn(own_id_after(&go));
        aspen::abort_handle a = h.abort_handle();
        std::uint64_t from_thread = 0;
        std::thread asker([&] {
            go.store(true, std::memory_order_release);
            from_thread = a.id().value();
        });
        std::uint64_t from_task = co_await h;
        asker.join();
        EXPECT_EQ(from_thread, from_task);
        EXPECT_EQ(h.id().value(), from_task);
    }
}

TEST_P(TaskId, TheTaskAndAForeignThreadAskingFirstAgree) {
    run_on(GetParam(), first_requests_race(), "racing first requests");
}

aspen::task<int> failing() {
    throw std::runtime_error("boom");
    co_return 0;
}

aspen::task<void> ids_of_ended_tasks() {
    aspen::event never;
    aspen::join_handle<void> waiting = aspen::spawn([](aspen::event* e) -> aspen::task<void> { co_await e->wait(); }(&never));
    aspen::join_handle<int> thrown = aspen::spawn(failing());
    std::uint64_t waiting_id = waiting.id().value();
    waiting.abort();
    EXPECT_THROW(co_await waiting, aspen::task_cancelled);
    EXPECT_EQ(waiting.id().value(), waiting_id) << "a cancelled task keeps its id";
    EXPECT_THROW(co_await thrown, std::runtime_error);
    EXPECT_NE(thrown.id(), waiting.id());
}

TEST_P(TaskId, CancelledAndFailedTasksKeepTheirIds) { run_on(GetParam(), ids_of_ended_tasks(), "ended tasks"); }

INSTANTIATE_TEST_SUITE_P(Kinds, TaskId, aspen_test::runtime_kinds, aspen_test::kind_name);

TEST(TaskIdOutsideTasks, NoneOnAPlainThreadNorInABlockingFunction) {
    EXPECT_FALSE(aspen::try_current_task_id().has_value());
    EXPECT_THROW((void)aspen::current_task_id(), std::logic_error);
    aspen::runtime rt(aspen_test::workers(2));
    bool in_blocking = rt.block_on([]() -> aspen::task<bool> {
        co_return co_await aspen::spawn_blocking([] { return aspen::try_current_task_id().has_value(); });
    }());
    EXPECT_FALSE(in_blocking);
    EXPECT_FALSE(aspen::try_current_task_id().has_value()) << "block_on's caller is no task";
}

TEST(TaskIdMisuse, EmptyHandlesThrow) {
    aspen::join_handle<int> empty;
    EXPECT_THROW((void)empty.id(), std::logic_error);
    aspen::abort_handle none;
    EXPECT_THROW((void)none.id(), std::logic_error);
    aspen::current_thread_runtime rt;
    rt.block_on([]() -> aspen::task<void> {
        aspen::join_handle<int> h = aspen::spawn([]() -> aspen::task<int> { co_return 1; }());
        aspen::join_handle<int> moved = std::move(h);
        EXPECT_THROW((void)h.id(), std::logic_error);
        EXPECT_NO_THROW((void)moved.id());
        moved.detach();
        EXPECT_THROW((void)moved.id(), std::logic_error);
        co_return;
    }());
}

TEST(TaskIdValue, HashesPrintsAndOrders) {
    aspen::current_thread_runtime rt;
    rt.block_on([]() -> aspen::task<void> {
        aspen::join_handle<int> a = aspen::spawn([]() -> aspen::task<int> { co_return 1; }());
        aspen::join_handle<int> b = aspen::spawn([]() -> aspen::task<int> { co_return 2; }());
        std::unordered_set<aspen::task_id> set{a.id(), b.id(), a.id()};
        EXPECT_EQ(set.size(), 2u);
        EXPECT_TRUE(a.id() < b.id() || b.id() < a.id());
        std::ostringstream os;
        os << a.id();
        EXPECT_EQ(os.str(), std::to_string(a.id().value()));
        co_await a;
        co_await b;
    }());
}

// C API: the join's id and the id the task's own context reports agree.
struct id_probe {
    std::atomic<std::uint64_t> seen{0};
};
aspen_status record_id(void* d, aspen_context* cx) {
    // relaxed: read after the join, which orders it.
    static_cast<id_probe*>(d)->seen.store(aspen_context_task_id(cx), std::memory_order_relaxed);
    return ASPEN_READY;
}

TEST(TaskIdCApi, JoinAndContextAgree) {
    for (int kind : {0, 2}) {
        aspen_runtime* rt = aspen_test::make_c_runtime(kind);
        id_probe p1, p2;
        aspen_join* j1 = nullptr;
        aspen_join* j2 = nullptr;
        ASSERT_EQ(aspen_spawn(rt, record_id, &p1, nullptr, &j1), ASPEN_OK);
        ASSERT_EQ(aspen_spawn(rt, record_id, &p2, nullptr, &j2), ASPEN_OK);
        std::uint64_t id1 = aspen_join_id(j1);  // before or after the task asked
        EXPECT_EQ(aspen_join_wait(j1), ASPEN_OK);
        EXPECT_EQ(aspen_join_wait(j2), ASPEN_OK);
        EXPECT_NE(id1, 0u);
        EXPECT_EQ(p1.seen.load(std::memory_order_relaxed), id1);
        EXPECT_EQ(p2.seen.load(std::memory_order_relaxed), aspen_join_id(j2));
        EXPECT_NE(aspen_join_id(j1), aspen_join_id(j2));
        aspen_join_free(j1);
        aspen_join_free(j2);
        EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
    }
    EXPECT_EQ(aspen_join_id(nullptr), 0u);
    EXPECT_NE(std::string(aspen_last_error()).find("aspen_join_id"), std::string::npos);
    EXPECT_EQ(aspen_context_task_id(nullptr), 0u);
}

}  // namespace
