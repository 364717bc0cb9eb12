// config::on_thread_park / on_thread_unpark: where they run, that they pair
// up with each other and with the metrics' parks / unparks, that a hook that
// throws is reported once and ignored, and that a task a hook spawns onto
// its own runtime is not stranded on the sleeping worker.
#include <aspen/aspen.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

using aspen_test::any_runtime;

struct hook_log {
    std::mutex m;
    std::set<std::thread::id> started, parked, unparked;
    std::atomic<long> parks{0}, unparks{0};

    void note(std::set<std::thread::id>& ids, std::atomic<long>& n) {
        std::lock_guard g(m);
        ids.insert(std::this_thread::get_id());
        n.fetch_add(1);
    }
    aspen::config config() {
        aspen::config cfg;
        cfg.on_thread_start = [this](std::size_t) {
            std::lock_guard g(m);
            started.insert(std::this_thread::get_id());
        };
        cfg.on_thread_park = [this] { note(parked, parks); };
        cfg.on_thread_unpark = [this] { note(unparked, unparks); };
        return cfg;
    }
};

aspen::task<void> wait_signal(aspen_test::signal* s) { co_await s->wait(); }

// block_on a task that waits for a signal, set from a plain thread once
// the park hook has run at least `parks` times in all: so the runtime
// (the driving thread, for a current-thread runtime) has surely parked.
void wait_for_parks(aspen::detail::runtime_base& rt, const std::atomic<long>& count, long parks) {
    aspen_test::signal s;
    std::thread setter([&] {
        while (count.load() < parks) std::this_thread::yield();
        s.set();
    });
    rt.block_on(wait_signal(&s));
    setter.join();
}

class ThreadParkHooks : public ::testing::TestWithParam<int> {};

TEST_P(ThreadParkHooks, RunOnRuntimeThreadsPairedAndCountedAsInMetrics) {
    hook_log log;
    aspen::worker_metrics total;
    {
        any_runtime rt(GetParam(), log.config());
        wait_for_parks(*rt, log.parks, 1);
        rt->shutdown();
        total = rt->metrics().total();
    }
    std::lock_guard g(log.m);
    EXPECT_GE(log.parks.load(), 1);
    EXPECT_EQ(log.parks.load(), log.unparks.load());
    EXPECT_EQ(total.parks, static_cast<std::uint64_t>(log.parks.load()));
    EXPECT_EQ(total.unparks, static_cast<std::uint64_t>(log.unparks.load()));
    if (GetParam() == 0) {
        // No worker threads (on_thread_start never runs): the thread in block_on.
        std::set<std::thread::id> self{std::this_thread::get_id()};
        EXPECT_TRUE(log.started.empty());
        EXPECT_EQ(log.parked, self);
        EXPECT_EQ(log.unparked, self);
    } else {
        EXPECT_EQ(log.started.size(), static_cast<std::size_t>(GetParam()));
        for (auto id : log.parked) EXPECT_TRUE(log.started.count(id));
        EXPECT_EQ(log.parked, log.unparked);
    }
}

TEST_P(ThreadParkHooks, ThrowingHookIsReportedOnceAndIgnored) {
    std::atomic<long> parks{0}, unparks{0};
    aspen::config cfg;
    cfg.on_thread_park = [&] {
        parks.fetch_add(1);
        throw std::runtime_error("park hook failed");
    };
    cfg.on_thread_unpark = [&] {
        unparks.fetch_add(1);
        throw 7;
    };
    ::testing::internal::CaptureStderr();
    {
        any_runtime rt(GetParam(), cfg);
        wait_for_parks(*rt, parks, 1);
        wait_for_parks(*rt, parks, parks.load() + 1);  // a second park: still running, not reported again
    }
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_GE(parks.load(), 2);
    EXPECT_EQ(parks.load(), unparks.load());
    auto count = [&](const std::string& what) {
        long n = 0;
        for (auto at = err.find(what); at != std::string::npos; at = err.find(what, at + 1)) ++n;
        return n;
    };
    EXPECT_EQ(count("aspen: config::on_thread_park threw (park hook failed)"), 1) << err;
    EXPECT_EQ(count("aspen: config::on_thread_unpark threw (not a std::exception)"), 1) << err;
}

aspen::task<void> set_signal(aspen_test::signal* s) {
    s->set();
    co_return;
}

aspen::task<void> arm_and_wait(aspen_test::signal* first, std::atomic<bool>* armed, aspen_test::signal* s) {
    co_await first->wait();
    armed->store(true);
    co_await s->wait();
}

// The park hook spawns the task that ends the wait, through a handle to its
// own runtime, right before the thread sleeps. Had it landed in that
// worker's own queue, the worker would sleep on it for ever. (Armed only
// after a first park, whose wake-up takes the wake that block_on's own
// spawn left pending in a current-thread runtime's driver.)
TEST_P(ThreadParkHooks, TaskSpawnedByHookIsNotStranded) {
    std::atomic<bool> armed{false}, spawned{false};
    std::atomic<long> parks{0};
    aspen_test::signal first, s;
    aspen::config cfg;
    cfg.on_thread_park = [&] {
        parks.fetch_add(1);
        if (armed.load() && !spawned.exchange(true)) (void)aspen::runtime_handle::current().spawn(set_signal(&s));
    };
    aspen_test::within(std::chrono::seconds(60), "a task spawned by the park hook", [&] {
        any_runtime rt(GetParam(), cfg);
        std::thread setter([&] {
            while (parks.load() == 0) std::this_thread::yield();
            first.set();
        });
        rt->block_on(arm_and_wait(&first, &armed, &s));
        setter.join();
    });
    EXPECT_TRUE(spawned.load());
}

INSTANTIATE_TEST_SUITE_P(Kinds, ThreadParkHooks, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
