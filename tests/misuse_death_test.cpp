// Two misuse rows of docs/properties.md: destroying a runtime from one of
// its own tasks (a diagnostic, then std::terminate), and destructors that
// throw inside a task. Death tests run the statement in a child process and
// check how it dies and what it printed.
#include "test_util.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace {

using aspen_test::workers;
using namespace std::chrono_literals;

// The threads of a runtime make the default "fast" style (fork without
// exec) unsafe; "threadsafe" re-executes the test binary for the child.
class MisuseDeathTest : public ::testing::Test {
protected:
    void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

#if !defined(ASPEN_SANITIZED)
// The process's mapped address space in bytes (VmSize), from /proc.
std::size_t current_address_space() {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
        std::fclose(f);
    }
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}
#endif

TEST_F(MisuseDeathTest, DestroyingARuntimeFromItsOwnTaskTerminatesWithADiagnostic) {
    auto destroy_from_inside = [] {
        auto* rt = new aspen::runtime(workers(2));
        rt->block_on([](aspen::runtime* self) -> aspen::task<void> {
            delete self;
            co_return;
        }(rt));
    };
    EXPECT_DEATH(destroy_from_inside(),
                 "aspen: fatal: aspen::runtime: shutdown or destruction from one of the runtime's own tasks");
}

TEST_F(MisuseDeathTest, DestroyingACurrentThreadRuntimeFromItsOwnTaskTerminatesWithADiagnostic) {
    auto destroy_from_inside = [] {
        auto* rt = new aspen::current_thread_runtime();
        rt->block_on([](aspen::current_thread_runtime* self) -> aspen::task<void> {
            delete self;
            co_return;
        }(rt));
    };
    EXPECT_DEATH(destroy_from_inside(),
                 "aspen: fatal: aspen::current_thread_runtime: shutdown from one of its own tasks");
}

// A local whose destructor throws (declared noexcept(false); an ordinary
// destructor is noexcept and a throw from it terminates at once).
struct throws_on_destruction {
    const char* what;
    ~throws_on_destruction() noexcept(false) { throw std::runtime_error(what); }
};

// Ordinary destructors are noexcept: a throw from one is std::terminate
// wherever it happens, before aspen sees anything.
struct throws_from_noexcept_destructor {
    ~throws_from_noexcept_destructor() { raise(); }
    static void raise() { throw std::runtime_error("noexcept destructor threw"); }
};

// Sets `started` once its local exists, then waits for a signal never set.
aspen::task<void> wait_forever(aspen_test::signal& started, aspen_test::signal& never, const char* what) {
    throws_on_destruction local{what};
    started.set();
    co_await never.wait();
}

aspen::task<void> await_signal(aspen_test::signal& s) { co_await s.wait(); }

// Code after an await of a child that never completes: it runs only if the
// parent is resumed while it is being destroyed.
std::atomic<int> parent_resumed{0};

// The same local one frame further down: destroyed with an inline-awaited
// child frame. With clang the child's throw once ran on to its final
// suspend and resumed this frame, mid-destruction (and leaked the child's).
aspen::task<void> wait_forever_nested(aspen_test::signal& started, aspen_test::signal& never, const char* what) {
    co_await wait_forever(started, never, what);
    parent_resumed.fetch_add(1);
}

// Collects what the runtime reports as unobserved.
struct reported {
    std::mutex mutex;
    std::vector<std::string> what;
    aspen::config config() {
        aspen::config c = workers(2);
        c.unhandled_exception_handler = [this](std::exception_ptr e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                std::lock_guard lock(mutex);
                what.emplace_back(ex.what());
            }
        };
        return c;
    }
};

aspen::task<int> abort_and_join(aspen::join_handle<void> h, aspen_test::signal& started) {
    co_await started.wait();
    h.abort();  // destroys the frame: the local's destructor throws
    try {
        co_await h;
    } catch (const aspen::task_cancelled&) {
        co_return 1;
    }
    co_return 0;
}

// An abort destroys the frame at its suspension point; a destructor that
// throws there cannot reach anybody (the joiner learns "cancelled"), so the
// exception goes to the unhandled-exception handler and the runtime goes on.
TEST(Misuse, ThrowingDestructorDuringAbortGoesToTheHandler) {
    reported r;
    aspen::runtime rt(r.config());
    aspen_test::signal started, never, started_nested;
    auto flat = rt.spawn(wait_forever(started, never, "thrown during abort"));
    auto nested = rt.spawn(wait_forever_nested(started_nested, never, "thrown during abort, nested"));
    EXPECT_EQ(rt.block_on(abort_and_join(std::move(flat), started)), 1);
    EXPECT_EQ(rt.block_on(abort_and_join(std::move(nested), started_nested)), 1);
    EXPECT_EQ(rt.block_on([]() -> aspen::task<int> { co_return 2; }()), 2);
    std::lock_guard lock(r.mutex);
    EXPECT_EQ(r.what, (std::vector<std::string>{"thrown during abort", "thrown during abort, nested"}));
    EXPECT_EQ(parent_resumed.load(), 0);
}

TEST(Misuse, ThrowingDestructorDuringShutdownGoesToTheHandler) {
    reported r;
    {
        aspen_test::signal started, never;
        aspen::runtime rt(r.config());
        rt.spawn(wait_forever_nested(started, never, "thrown during shutdown")).detach();
        rt.block_on(await_signal(started));
        rt.shutdown();  // destroys the waiting task's frames
    }
    EXPECT_EQ(r.what, (std::vector<std::string>{"thrown during shutdown"}));
    EXPECT_EQ(parent_resumed.load(), 0);
}

TEST_F(MisuseDeathTest, ThrowingFromAnOrdinaryDestructorTerminates) {
    auto run_it = [] {
        aspen::runtime rt(workers(2));
        rt.block_on([]() -> aspen::task<void> {
            throws_from_noexcept_destructor local;
            co_return;
        }());
    };
    EXPECT_DEATH(run_it(), "terminate called after throwing an instance of 'std::runtime_error'.*noexcept destructor threw");
}

// A worker thread that cannot start (EAGAIN: here the address space is
// capped so that no more 8 MB stacks fit) is a std::system_error from the
// constructor, after the workers already running are stopped and joined;
// it once terminated the process (a joinable std::thread destroyed). In a
// child process, as the cap must not reach the other tests. Not in the
// sanitizer builds: their shadow memory does not fit under such a cap.
TEST_F(MisuseDeathTest, AWorkerThreadThatCannotStartIsAnErrorNotATermination) {
#if defined(ASPEN_SANITIZED)
    GTEST_SKIP() << "the address-space cap leaves no room for the sanitizer's shadow memory";
#else
    auto start_under_a_cap = [] {
        rlimit cap{};
        ::getrlimit(RLIMIT_AS, &cap);
        cap.rlim_cur = current_address_space() + 24 * 1024 * 1024;  // room for a few stacks, not 64
        if (::setrlimit(RLIMIT_AS, &cap) != 0) std::_Exit(4);
        try {
            aspen::runtime rt(workers(64));
            std::fputs("all 64 workers started under the cap\n", stderr);
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "caught: %s\n", e.what());
            std::_Exit(0);
        }
        std::_Exit(1);
    };
    EXPECT_EXIT(start_under_a_cap(), ::testing::ExitedWithCode(0),
                "caught: aspen::runtime: could not start worker thread [0-9]+ of 64: Resource temporarily unavailable");
#endif
}

// Not a death: a noexcept(false) destructor that throws when its scope ends
// normally is an exception of the task body like any other; the awaiter
// gets it and the runtime goes on.
TEST(Misuse, ThrowingDestructorAtScopeEndFailsTheTask) {
    aspen::runtime rt(workers(2));
    auto body = []() -> aspen::task<int> {
        {
            throws_on_destruction local{"destructor threw at scope end"};
        }
        co_return 1;
    };
    try {
        rt.block_on(body());
        ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "destructor threw at scope end");
    }
    EXPECT_EQ(rt.block_on([]() -> aspen::task<int> { co_return 2; }()), 2);
}

}  // namespace
