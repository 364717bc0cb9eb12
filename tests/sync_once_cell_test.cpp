// aspen::once_cell on every runtime kind: one initializer for many callers,
// a failed or aborted initializer leaving the cell to the next caller, set,
// and the value seen whole from a plain thread (TSan checks the
// publication).
#include "runtime_kinds.hpp"

#include <aspen/sync/once_cell.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;

namespace {

class OnceCell : public ::testing::TestWithParam<int> {};

struct settings {
    int port = 0;
    std::string name;
};

// 64 tasks ask at once; the one initializer takes a while, so the others
// queue behind it. Exactly one runs; everybody gets the same object.
TEST_P(OnceCell, ManyCallersOneInitializer) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::once_cell<settings> cell;
            std::atomic<int> runs{0};
            auto ask = [](aspen::once_cell<settings>& cell, std::atomic<int>& runs) -> task<const settings*> {
                settings& s = co_await cell.get_or_init([&runs]() -> task<settings> {
                    runs.fetch_add(1);
                    co_await aspen::sleep(5ms);
                    co_return settings{8080, "aspen"};
                });
                co_return &s;
            };
            std::vector<aspen::join_handle<const settings*>> hs;
            for (int i = 0; i < 64; ++i) hs.push_back(aspen::spawn(ask(cell, runs)));
            for (auto& h : hs) {
                const settings* p = co_await h;
                EXPECT_EQ(p, cell.get());
                EXPECT_EQ(p->port, 8080);
                EXPECT_EQ(p->name, "aspen");
            }
            EXPECT_EQ(runs.load(), 1);
        }(),
        "one initializer");
}

// The first initializer throws: its caller gets the exception, the cell
// stays empty, and the caller queued behind it runs its own initializer.
TEST_P(OnceCell, AFailedInitializerLeavesTheCellToTheNextCaller) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::once_cell<int> cell;
            std::atomic<bool> first_started{false};
            auto failing = aspen::spawn([](aspen::once_cell<int>& cell, std::atomic<bool>& started) -> task<int> {
                int& v = co_await cell.get_or_init([&started]() -> task<int> {
                    started.store(true);
                    co_await aspen::sleep(10ms);
                    throw std::runtime_error("no settings file");
                });
                co_return v;
            }(cell, first_started));
            while (!first_started.load()) co_await aspen::sleep(1ms);
            auto second = aspen::spawn([](aspen::once_cell<int>& cell) -> task<int> {
                int& v = co_await cell.get_or_init([]() -> task<int> { co_return 7; });
                co_return v;
            }(cell));
            bool threw = false;
            try {
                (void)co_await failing;
            } catch (const std::runtime_error& e) {
                threw = std::string(e.what()) == "no settings file";
            }
            EXPECT_TRUE(threw);
            EXPECT_EQ(co_await second, 7);
            EXPECT_EQ(*cell.get(), 7);
        }(),
        "failed initializer");
}

// The initializing task is aborted: the lock it held is released, the cell
// is empty, and a later caller initializes it.
TEST_P(OnceCell, AnAbortedInitializerLeavesTheCellEmpty) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::once_cell<int> cell;
            std::atomic<bool> started{false};
            auto stuck = aspen::spawn([](aspen::once_cell<int>& cell, std::atomic<bool>& started) -> task<int> {
                int& v = co_await cell.get_or_init([&started]() -> task<int> {
                    started.store(true);
                    co_await aspen::sleep(std::chrono::hours(1));
                    co_return 1;
                });
                co_return v;
            }(cell, started));
            while (!started.load()) co_await aspen::sleep(1ms);
            EXPECT_FALSE(cell.set(5));  // an initializer runs
            co_await aspen_test::abort_and_join(stuck);
            EXPECT_EQ(cell.get(), nullptr);
            int& v = co_await cell.get_or_init([]() -> task<int> { co_return 2; });
            EXPECT_EQ(v, 2);
        }(),
        "aborted initializer");
}

TEST_P(OnceCell, SetStoresOnceAndMovesOnlyWhenItStores) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::once_cell<std::string> cell;
            EXPECT_FALSE(cell.initialized());
            std::string a = "first", b = "second";
            EXPECT_TRUE(cell.set(std::move(a)));
            EXPECT_FALSE(cell.set(std::move(b)));
            EXPECT_EQ(b, "second");  // not moved from
            EXPECT_EQ(*cell.get(), "first");
            // get_or_init on a set cell does not run its initializer.
            bool ran = false;
            std::string& v = co_await cell.get_or_init([&ran]() -> task<std::string> {
                ran = true;
                co_return "third";
            });
            EXPECT_FALSE(ran);
            EXPECT_EQ(&v, cell.get());
            aspen::once_cell<int> preset(3);
            EXPECT_EQ(*preset.get(), 3);
        }(),
        "set");
}

struct counted {
    explicit counted(std::atomic<int>* d) : dtors(d) {}
    counted(counted&& o) noexcept : dtors(o.dtors) { o.dtors = nullptr; }
    ~counted() {
        if (dtors) dtors->fetch_add(1);
    }
    std::atomic<int>* dtors;
};

TEST(OnceCellLife, TheValueIsDestroyedOnceWithTheCellAndNeverIfNeverSet) {
    std::atomic<int> dtors{0};
    {
        aspen::once_cell<counted> empty;
        aspen::once_cell<counted> full;
        EXPECT_TRUE(full.set(counted(&dtors)));
        EXPECT_EQ(dtors.load(), 0);
    }
    EXPECT_EQ(dtors.load(), 1);
}

// A plain thread polls get() while a task initializes the cell: once it
// sees the value it must see all of it (the release / acquire pair; TSan
// reports a race if the publication is not ordered).
TEST_P(OnceCell, APlainThreadSeesTheWholeValue) {
    aspen::once_cell<settings> cell;
    std::atomic<bool> stop{false};
    std::atomic<int> seen_port{0};
    std::thread watcher([&] {
        for (;;) {
            bool last = stop.load();  // before get(): set_ was stored before stop
            if (const settings* s = cell.get()) {
                seen_port.store(s->name == "whole" ? s->port : -1);
                return;
            }
            if (last) return;
            std::this_thread::yield();
        }
    });
    aspen_test::run_on(
        GetParam(),
        [](aspen::once_cell<settings>& cell) -> task<void> {
            settings& s = co_await cell.get_or_init([]() -> task<settings> {
                co_await aspen::yield_now();
                co_return settings{4242, "whole"};
            });
            EXPECT_EQ(s.port, 4242);
        }(cell),
        "publication");
    stop.store(true);
    watcher.join();
    EXPECT_EQ(seen_port.load(), 4242);
}

INSTANTIATE_TEST_SUITE_P(Kinds, OnceCell, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
