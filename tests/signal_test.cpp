// aspen::signal_listener and aspen::ctrl_c: deliveries from other threads,
// several listeners, coalescing, cancellation, refused signals.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <stdexcept>
#include <thread>

using namespace std::chrono_literals;
using aspen::signal_listener;
using aspen::task;

namespace {

class Signal : public ::testing::TestWithParam<int> {};

// Under ThreadSanitizer a signal's handler runs only when the thread the
// kernel handed it to is in an intercepted call or does an atomic access:
// on a thread asleep in a raw futex wait (std::future::wait_for, a
// parked worker) it waits until that thread wakes, perhaps for ever. So a
// test that sends a signal to the process blocks it on every thread but
// the one it wants to take it. Without TSan the kernel runs the handler on
// any thread at once; this only makes the tests' delivery deterministic.
class signal_blocked {
public:
    explicit signal_blocked(int signum) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, signum);
        EXPECT_EQ(::pthread_sigmask(SIG_BLOCK, &one, &old_), 0);
    }
    ~signal_blocked() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
    signal_blocked(const signal_blocked&) = delete;
    signal_blocked& operator=(const signal_blocked&) = delete;

    // On the calling thread only (threads start with their creator's mask).
    static void unblock_here(int signum) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, signum);
        EXPECT_EQ(::pthread_sigmask(SIG_UNBLOCK, &one, nullptr), 0);
    }

private:
    sigset_t old_;
};

// A plain thread sends SIGUSR1 to the process each time the listening task
// has taken the previous one: every round's recv completes, none is lost
// (a lost wake fires the watchdog). The handler runs on the sender, the
// one thread that does not block SIGUSR1, never on the runtime's.
TEST_P(Signal, SignalsFromAnotherThreadWakeTheListenerEveryRound) {
    constexpr int rounds = 200;
    std::atomic<int> taken{0};
    signal_listener l(SIGUSR1);
    signal_blocked blocked(SIGUSR1);  // here and in every thread made below but the sender
    std::thread sender([&] {
        signal_blocked::unblock_here(SIGUSR1);
        for (int i = 0; i < rounds; ++i) {
            while (taken.load() < i) std::this_thread::yield();
            ::kill(::getpid(), SIGUSR1);
        }
    });
    int received = aspen_test::run_on(
        GetParam(),
        [](signal_listener& l, std::atomic<int>& taken) -> task<int> {
            int n = 0;
            for (int i = 0; i < rounds; ++i) {
                co_await l.recv();
                taken.store(++n);
            }
            co_return n;
        }(l, taken),
        "signal rounds");
    sender.join();
    EXPECT_EQ(received, rounds);
}

// The handler runs on the thread that drives the reactor, often inside its
// epoll_wait (EINTR): the wait is taken up again and the eventfd's edge
// still completes the recv, every round.
TEST(SignalListener, ASignalOnTheDrivingThreadWakesItsOwnListener) {
    constexpr int rounds = 200;
    std::atomic<int> taken{0};
    std::atomic<pthread_t> driver{};
    std::atomic<bool> known{false};
    signal_listener l(SIGUSR1);
    std::thread sender([&] {
        while (!known.load()) std::this_thread::yield();
        for (int i = 0; i < rounds; ++i) {
            while (taken.load() < i) std::this_thread::yield();
            EXPECT_EQ(::pthread_kill(driver.load(), SIGUSR1), 0);
        }
    });
    int received = aspen_test::run_on(
        0,
        [](signal_listener& l, std::atomic<int>& taken, std::atomic<pthread_t>& driver,
           std::atomic<bool>& known) -> task<int> {
            driver.store(::pthread_self());
            known.store(true);
            int n = 0;
            for (int i = 0; i < rounds; ++i) {
                co_await l.recv();
                taken.store(++n);
            }
            co_return n;
        }(l, taken, driver, known),
        "signal rounds on the driver");
    sender.join();
    EXPECT_EQ(received, rounds);
}

INSTANTIATE_TEST_SUITE_P(Runtimes, Signal, aspen_test::runtime_kinds, aspen_test::kind_name);

// Deliveries between two recvs complete one recv; a listener made later does
// not see earlier ones; every listener sees a new one.
TEST(SignalListener, DeliveriesCoalesceAndEveryListenerSeesNewOnes) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "signal coalescing", [&] {
        rt.block_on([]() -> task<void> {
            signal_listener first(SIGUSR2);
            for (int i = 0; i < 3; ++i) std::raise(SIGUSR2);  // delivered before raise returns
            co_await first.recv();
            EXPECT_THROW(co_await aspen::timeout(30ms, first.recv()), aspen::timed_out);
            signal_listener second(SIGUSR2);
            EXPECT_THROW(co_await aspen::timeout(30ms, second.recv()), aspen::timed_out);
            std::raise(SIGUSR2);
            co_await aspen::timeout(10s, first.recv());
            co_await aspen::timeout(10s, second.recv());
            EXPECT_EQ(second.signum(), SIGUSR2);
        }());
    });
}

// An aborted recv takes nothing: the delivery it waited for completes the
// next recv at once. Destroying the listener under a waiting recv cancels
// that recv; no descriptor or registration is left.
TEST(SignalListener, AbortedRecvLosesNoDeliveryAndCloseCancelsAWaiter) {
    aspen::runtime rt(aspen_test::workers(2));
    // The first listener of the process opens the eventfd all listeners
    // share, which stays open: count after it exists.
    { signal_listener warm_up(SIGUSR1); }
    int fds_before = net_test::open_fds();
    aspen_test::within(30s, "signal abort", [&] {
        rt.block_on([&]() -> task<void> {
            auto l = std::make_unique<signal_listener>(SIGUSR1);
            auto waiter = aspen::spawn([](signal_listener& l) -> task<void> { co_await l.recv(); }(*l));
            co_await net_test::wait_parked(rt, 1);
            waiter.abort();
            EXPECT_THROW(co_await waiter, aspen::task_cancelled);
            std::raise(SIGUSR1);
            co_await aspen::timeout(10s, l->recv());
            auto closed = aspen::spawn([](signal_listener& l) -> task<int> {
                try {
                    co_await l.recv();
                } catch (const std::system_error& e) {
                    co_return e.code().value();
                }
                co_return 0;
            }(*l));
            co_await net_test::wait_parked(rt, 1);
            l.reset();
            EXPECT_EQ(co_await closed, ECANCELED);
        }());
    });
    EXPECT_EQ(net_test::open_fds(), fds_before);
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
}

// ctrl_c() listens from the call on: a SIGINT then completes it (and does
// not end the process).
TEST(SignalListener, CtrlCCompletesOnSigint) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "ctrl_c", [&] {
        rt.block_on([]() -> task<void> {
            task<void> c = aspen::ctrl_c();
            std::raise(SIGINT);  // before the first await: still seen
            co_await aspen::timeout(10s, std::move(c));
            auto again = aspen::spawn(aspen::ctrl_c());
            co_await aspen::sleep(5ms);
            // Not kill(getpid()): under TSan a parked thread might take it
            // (see signal_blocked).
            std::raise(SIGINT);
            co_await again;
        }());
    });
}

TEST(SignalListener, SignalsThatCannotBeWaitedForAreRefused) {
    for (int bad : {0, -1, NSIG, SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
        try {
            signal_listener l(bad);
            ADD_FAILURE() << "accepted signal " << bad;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("aspen::signal_listener(" + std::to_string(bad) + ")"),
                      std::string::npos)
                << e.what();
        }
    }
    signal_listener l(SIGUSR1);
    signal_listener moved = std::move(l);
    EXPECT_THROW((void)l.recv(), std::logic_error);  // NOLINT(bugprone-use-after-move): checked on purpose
    EXPECT_EQ(moved.signum(), SIGUSR1);
}

}  // namespace
