// aspen::async_fd: pipes and eventfds on the reactor, errors, cancellation,
// close under a waiter, release, timeouts and the coop budget.
#include "io/counting_waker.hpp"
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen::async_fd;
using aspen::task;

namespace {

struct pipe_ends {
    int read = -1, write = -1;
};
pipe_ends make_pipe() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
    return {p[0], p[1]};
}

char byte_at(std::size_t i) { return static_cast<char>((i * 7 + (i >> 9)) & 0xFF); }

class AsyncFd : public ::testing::TestWithParam<int> {};

// 1 MiB through a 4 KiB pipe in chunks of varying size: every byte arrives
// in order, the end of file is read as 0, and the writer had to wait.
TEST_P(AsyncFd, PipeCarriesEveryByteInOrderThenEndOfFile) {
    constexpr std::size_t total = 1 << 20;
    const int kind = GetParam();
    struct outcome {
        std::size_t received = 0;
        std::size_t mismatches = 0;
        std::size_t writer_waits = 0;
        std::size_t eof_reads = 0;
    };
    outcome o = aspen_test::run_on(
        kind,
        []() -> task<outcome> {
            pipe_ends p = make_pipe();
            ::fcntl(p.write, F_SETPIPE_SZ, 4096);  // small: the writer must wait
            auto out = std::make_unique<async_fd>(async_fd::adopt(p.write));
            async_fd in = async_fd::adopt(p.read);
            outcome o;
            auto writer = aspen::spawn([](std::unique_ptr<async_fd> out, std::size_t* waits) -> task<void> {
                std::vector<char> data(total);
                for (std::size_t i = 0; i < total; ++i) data[i] = byte_at(i);
                std::size_t sent = 0, chunk = 1;
                while (sent < total) {
                    std::size_t n = std::min(chunk, total - sent);
                    auto w = co_await out->write_with([&](int fd) {
                        ssize_t r = ::write(fd, data.data() + sent, n);
                        if (r < 0 && errno == EAGAIN) ++*waits;
                        return r;
                    });
                    sent += static_cast<std::size_t>(w);
                    chunk = chunk * 3 % 9001 + 1;
                }
                // `out` goes with this frame: the write end closes.
            }(std::move(out), &o.writer_waits));
            std::array<char, 1500> buf;
            for (;;) {
                ssize_t n = co_await in.read_with([&](int fd) { return ::read(fd, buf.data(), buf.size()); });
                if (n == 0) break;
                for (ssize_t i = 0; i < n; ++i)
                    if (buf[static_cast<std::size_t>(i)] != byte_at(o.received + static_cast<std::size_t>(i)))
                        ++o.mismatches;
                o.received += static_cast<std::size_t>(n);
            }
            co_await writer;
            // A hung-up pipe stays readable: more reads give 0 at once.
            for (int i = 0; i < 3; ++i) {
                auto read_buf = [&](int fd) { return ::read(fd, buf.data(), buf.size()); };
                std::size_t got = co_await in.read_with(read_buf);
                if (got == 0) ++o.eof_reads;
            }
            co_return o;
        }(),
        "async_fd pipe");
    EXPECT_EQ(o.received, total);
    EXPECT_EQ(o.mismatches, 0u);
    EXPECT_EQ(o.eof_reads, 3u);
    // One thread runs both: the writer fills the pipe before the reader
    // runs, so it must have waited. With more workers it almost surely did.
    if (kind <= 1) {
        EXPECT_GT(o.writer_waits, 0u);
    }
}

// A foreign thread adds to an eventfd; the task's reads sum exactly what
// was added, and none of the wakes is lost (the watchdog would fire).
TEST_P(AsyncFd, EventfdWrittenFromAForeignThreadLosesNoWake) {
    constexpr std::uint64_t rounds = net_test::sanitized ? 2'000 : 20'000;
    std::uint64_t sum = aspen_test::run_on(
        GetParam(),
        []() -> task<std::uint64_t> {
            int efd = ::eventfd(0, EFD_CLOEXEC);
            if (efd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
            async_fd ev = async_fd::adopt(efd);
            std::thread adder([efd] {
                for (std::uint64_t i = 0; i < rounds; ++i) {
                    std::uint64_t one = 1;
                    if (::write(efd, &one, sizeof one) != sizeof one) std::abort();
                    if (i % 64 == 0) std::this_thread::yield();
                }
            });
            std::uint64_t sum = 0;
            while (sum < rounds) {
                std::uint64_t v = 0;
                co_await ev.read_with([&](int fd) { return ::read(fd, &v, sizeof v); });
                sum += v;
            }
            adder.join();
            co_return sum;
        }(),
        "async_fd eventfd");
    EXPECT_EQ(sum, rounds);
}

// Every always-ready read spends a unit of the coop budget, so a loop of
// them lets another task run.
TEST(AsyncFdCoop, AlwaysReadyReadsSpendTheCoopBudget) {
    pipe_ends p = make_pipe();
    std::string data(100, 'x');
    ASSERT_EQ(::write(p.write, data.data(), data.size()), 100);
    async_fd in = async_fd::adopt(p.read);
    int seen_at = aspen_test::coop_yield_point([&](int) -> task<bool> {
        char c = 0;
        auto n = co_await in.read_with([&](int fd) { return ::read(fd, &c, 1); });
        co_return n == 1 && c == 'x';
    });
    EXPECT_GE(seen_at, 0) << "-2: wrong value; -1: the loop never yielded";
    EXPECT_LT(seen_at, 100);
    ::close(p.write);
}

INSTANTIATE_TEST_SUITE_P(Runtimes, AsyncFd, aspen_test::runtime_kinds, aspen_test::kind_name);

TEST(AsyncFdErrors, BadFdsAreRefusedAndTheFdStaysTheCallers) {
    EXPECT_THROW(async_fd::adopt(-1), std::invalid_argument);
    char path[] = "/tmp/aspen-async-fd-XXXXXX";
    int file = ::mkstemp(path);
    ASSERT_GE(file, 0);
    ::unlink(path);
    try {
        async_fd::adopt(file);
        ADD_FAILURE() << "adopted a regular file";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("regular file"), std::string::npos) << e.what();
    }
    EXPECT_NE(::fcntl(file, F_GETFD), -1) << "a refused fd must stay open";
    ::close(file);
    try {
        async_fd::adopt(file);  // closed now
        ADD_FAILURE() << "adopted a closed fd";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EBADF);
    }
    async_fd empty;
    EXPECT_FALSE(empty.is_open());
    EXPECT_THROW((void)empty.read_with([](int) { return 0; }), std::logic_error);
    EXPECT_THROW(empty.release(), std::logic_error);
}

// An errno other than EAGAIN/EINTR becomes a system_error naming the
// operation; an exception from f reaches the task; the fd works on after.
TEST(AsyncFdErrors, FailuresReachTheTaskAndTheFdWorksOn) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "async_fd errors", [&] {
        rt.block_on([]() -> task<void> {
            pipe_ends p = make_pipe();
            async_fd in = async_fd::adopt(p.read);
            EXPECT_EQ(::write(p.write, "ab", 2), 2);
            try {
                co_await in.read_with([](int) -> ssize_t {
                    errno = EIO;
                    return -1;
                });
                ADD_FAILURE() << "no error";
            } catch (const std::system_error& e) {
                EXPECT_EQ(e.code().value(), EIO);
                EXPECT_NE(std::string(e.what()).find("aspen::async_fd::read_with"), std::string::npos) << e.what();
            }
            EXPECT_THROW(co_await in.read_with([](int) -> int { throw std::runtime_error("from f"); }),
                         std::runtime_error);
            int eintr_left = 2;
            char buf[2];
            auto n = co_await in.read_with([&](int fd) -> ssize_t {
                if (eintr_left-- > 0) {
                    errno = EINTR;
                    return -1;
                }
                return ::read(fd, buf, sizeof buf);
            });
            EXPECT_EQ(n, 2);
            EXPECT_EQ(eintr_left, -1);  // called again at once after each EINTR
            EXPECT_EQ(std::string(buf, 2), "ab");
            ::close(p.write);
        }());
    });
}

class AsyncFdCancel : public ::testing::TestWithParam<std::size_t> {};

// A read aborted while it waits leaves the fd usable and leaks nothing.
TEST_P(AsyncFdCancel, AbortWhileWaitingThenReuseLeaksNothing) {
    aspen::runtime rt(aspen_test::workers(GetParam()));
    int fds_before = net_test::open_fds();
    aspen_test::within(60s, "async_fd abort", [&] {
        rt.block_on([&]() -> task<void> {
            pipe_ends p = make_pipe();
            async_fd in = async_fd::adopt(p.read);
            auto reader = aspen::spawn([](async_fd& in) -> task<ssize_t> {
                char c;
                co_return co_await in.read_with([&](int fd) { return ::read(fd, &c, 1); });
            }(in));
            co_await net_test::wait_parked(rt, 1);
            reader.abort();
            EXPECT_THROW(co_await reader, aspen::task_cancelled);
            EXPECT_EQ(::write(p.write, "z", 1), 1);
            char c = 0;
            EXPECT_EQ(co_await in.read_with([&](int fd) { return ::read(fd, &c, 1); }), 1);
            EXPECT_EQ(c, 'z');
            ::close(p.write);
        }());
    });
    EXPECT_EQ(net_test::open_fds(), fds_before);
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
}

INSTANTIATE_TEST_SUITE_P(Workers, AsyncFdCancel, ::testing::Values(1, 2, 8));

// Abandoned operations drop the waker they stored; a second read while one
// is in progress is refused.
TEST(AsyncFdCancel, SecondReadIsRefusedAndAbandonedOperationsDropTheirWaker) {
    aspen::runtime rt(aspen_test::workers(1));
    aspen_test::within(30s, "async_fd slots", [&] {
        rt.block_on([]() -> task<void> {
            aspen::detail::counting_waker cw;
            pipe_ends p = make_pipe();
            async_fd in = async_fd::adopt(p.read);
            auto read_one = [](int fd) {
                char c;
                return ::read(fd, &c, 1);
            };
            {
                aspen::waker w = cw.make();
                aspen::context cx(w);
                auto first = in.read_with(read_one);
                auto second = in.read_with(read_one);
                EXPECT_FALSE(first.poll(cx));
                EXPECT_THROW(second.poll(cx), std::logic_error);
                EXPECT_EQ(cw.refs(), 2);  // w and the clone the first one stored
                EXPECT_THROW(in.release(), std::logic_error);  // operations exist
            }
            EXPECT_EQ(cw.refs(), 0);
            EXPECT_EQ(::write(p.write, "q", 1), 1);
            EXPECT_EQ(co_await in.read_with(read_one), 1);
            ::close(p.write);
        }());
    });
}

// Destroying the async_fd under a waiting read: the read throws ECANCELED
// and the fd is closed once it let go.
TEST(AsyncFdCancel, ClosingUnderAWaiterCancelsIt) {
    aspen::runtime rt(aspen_test::workers(2));
    int fds_before = net_test::open_fds();
    aspen_test::within(30s, "async_fd close under a waiter", [&] {
        rt.block_on([&]() -> task<void> {
            pipe_ends p = make_pipe();
            auto in = std::make_unique<async_fd>(async_fd::adopt(p.read));
            auto waiter = aspen::spawn([](async_fd& in) -> task<int> {
                try {
                    char c;
                    co_await in.read_with([&](int fd) { return ::read(fd, &c, 1); });
                } catch (const std::system_error& e) {
                    co_return e.code().value();
                }
                co_return 0;
            }(*in));
            co_await net_test::wait_parked(rt, 1);
            in.reset();
            EXPECT_EQ(co_await waiter, ECANCELED);
            ::close(p.write);
        }());
    });
    EXPECT_EQ(net_test::open_fds(), fds_before);
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
}

// release() hands the fd back open and deregistered; it can be adopted
// again.
TEST(AsyncFdRelease, GivesTheFdBackOpenAndDeregistered) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "async_fd release", [&] {
        rt.block_on([&]() -> task<void> {
            pipe_ends p = make_pipe();
            async_fd in = async_fd::adopt(p.read);
            EXPECT_NE(::fcntl(p.read, F_GETFL) & O_NONBLOCK, 0);
            char c = 0;
            EXPECT_EQ(::write(p.write, "12", 2), 2);
            EXPECT_EQ(co_await in.read_with([&](int fd) { return ::read(fd, &c, 1); }), 1);
            EXPECT_EQ(rt.metrics().io_registrations, 1u);
            int fd = in.release();
            EXPECT_EQ(fd, p.read);
            EXPECT_FALSE(in.is_open());
            EXPECT_EQ(rt.metrics().io_registrations, 0u);
            EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "released fd was closed";
            async_fd again = async_fd::adopt(fd);
            EXPECT_EQ(co_await again.read_with([&](int fd) { return ::read(fd, &c, 1); }), 1);
            EXPECT_EQ(c, '2');
            ::close(p.write);
        }());
    });
}

// A read that loses a timeout race leaves nothing behind: the next read
// gets the data.
TEST(AsyncFdCancel, TimeoutCancelsAWaitingRead) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "async_fd timeout", [&] {
        rt.block_on([&]() -> task<void> {
            pipe_ends p = make_pipe();
            async_fd in = async_fd::adopt(p.read);
            char c = 0;
            auto read_one = [&c](int fd) { return ::read(fd, &c, 1); };
            EXPECT_THROW(co_await aspen::timeout(20ms, in.read_with(read_one)), aspen::timed_out);
            EXPECT_EQ(::write(p.write, "k", 1), 1);
            EXPECT_EQ(co_await aspen::timeout(10s, in.read_with(read_one)), 1);
            EXPECT_EQ(c, 'k');
            ::close(p.write);
        }());
    });
}

}  // namespace
