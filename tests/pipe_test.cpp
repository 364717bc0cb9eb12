// aspen::pipe_reader / pipe_writer: bytes in order through a small pipe on
// every runtime kind, end of file, EPIPE without SIGPIPE, adoption checks,
// read_to_end, cancellation and descriptor counts.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
using aspen::pipe_reader;
using aspen::pipe_writer;
using aspen::task;

namespace {

char byte_at(std::size_t i) { return static_cast<char>((i * 13 + (i >> 10)) & 0xFF); }

class Pipe : public ::testing::TestWithParam<int> {};

struct transfer_outcome {
    std::size_t received = 0;
    std::size_t mismatches = 0;
    std::size_t eof_reads = 0;
};

// 1 MiB through a 4 KiB pipe, written in chunks of varying size by another
// task: every byte arrives in order, then end of file (the writer's drop),
// read as 0 twice.
TEST_P(Pipe, CarriesEveryByteInOrderThenEndOfFile) {
    constexpr std::size_t total = 1 << 20;
    transfer_outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<transfer_outcome> {
            auto [rd, wr] = aspen::pipe();
            ::fcntl(wr.native_handle(), F_SETPIPE_SZ, 4096);
            auto writer = aspen::spawn([](pipe_writer wr) -> task<void> {
                std::vector<char> data(total);
                for (std::size_t i = 0; i < total; ++i) data[i] = byte_at(i);
                std::size_t sent = 0, chunk = 1;
                while (sent < total) {
                    std::size_t n = std::min(chunk, total - sent);
                    if (chunk % 2) sent += co_await wr.write(data.data() + sent, n);
                    else sent += co_await wr.write_all(data.data() + sent, n);
                    chunk = chunk * 3 % 9001 + 1;
                }
            }(std::move(wr)));
            transfer_outcome o;
            std::array<char, 1500> buf;
            for (;;) {
                std::size_t n = co_await rd.read(buf.data(), buf.size());
                if (n == 0) break;
                for (std::size_t i = 0; i < n; ++i)
                    if (buf[i] != byte_at(o.received + i)) ++o.mismatches;
                o.received += n;
            }
            ++o.eof_reads;
            std::size_t after_end = co_await rd.read(buf.data(), buf.size());
            if (after_end == 0) ++o.eof_reads;
            co_await writer;
            co_return o;
        }(),
        "pipe transfer");
    EXPECT_EQ(o.received, total);
    EXPECT_EQ(o.mismatches, 0u);
    EXPECT_EQ(o.eof_reads, 2u);
}

// read_to_end appends everything up to end of file to what is there, and
// read_exact stops short only at end of file.
TEST_P(Pipe, ReadToEndAndReadExact) {
    struct outcome {
        std::string text;
        std::size_t appended = 0;
        std::size_t exact = 0, short_exact = 0;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            auto [rd, wr] = aspen::pipe();
            auto writer = aspen::spawn([](pipe_writer wr) -> task<void> {
                std::string block(10000, 'x');
                for (int i = 0; i < 20; ++i) co_await wr.write_all(block);
                co_await wr.write_all("tail");
            }(std::move(wr)));
            std::array<char, 64> buf;
            o.exact = co_await rd.read_exact(buf.data(), buf.size());
            o.text = "head:";
            o.appended = co_await rd.read_to_end(o.text);
            co_await writer;

            auto [rd2, wr2] = aspen::pipe();
            co_await wr2.write_all("abc");
            wr2 = {};
            o.short_exact = co_await rd2.read_exact(buf.data(), buf.size());
            co_return o;
        }(),
        "read_to_end");
    EXPECT_EQ(o.exact, 64u);
    EXPECT_EQ(o.appended, 200004u - 64u);
    EXPECT_EQ(o.text.size(), 5u + 200004u - 64u);
    EXPECT_EQ(o.text.substr(0, 5), "head:");
    EXPECT_EQ(o.text.substr(o.text.size() - 4), "tail");
    EXPECT_EQ(o.short_exact, 3u);
}

// With the reading end gone, a write throws EPIPE; SIGPIPE (left at its
// default action, which would end the process) is neither delivered nor
// left pending, and the thread's signal mask is as before.
TEST_P(Pipe, WriteAfterReaderClosedThrowsEpipeWithoutSigpipe) {
    struct sigaction old_action {};
    ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &old_action), 0);
    ASSERT_EQ(old_action.sa_handler, SIG_DFL);
    int errors = aspen_test::run_on(
        GetParam(),
        []() -> task<int> {
            auto [rd, wr] = aspen::pipe();
            rd = {};
            int epipes = 0;
            for (int i = 0; i < 3; ++i) {
                try {
                    co_await wr.write("x");
                } catch (const std::system_error& e) {
                    if (e.code().value() == EPIPE) ++epipes;
                }
            }
            sigset_t pending, mask;
            sigemptyset(&pending);
            ::sigpending(&pending);
            ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
            // Neither pending nor left blocked on this (the writing) thread.
            if (sigismember(&pending, SIGPIPE) || sigismember(&mask, SIGPIPE)) epipes = -1;
            co_return epipes;
        }(),
        "EPIPE");
    EXPECT_EQ(errors, 3);
}

// A SIGPIPE that was pending before (blocked by the caller) stays pending:
// the write takes back only the one it raised.
TEST(PipeSignals, APendingSigpipeOfTheCallerIsLeftAlone) {
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &pipe_only, &old), 0);
    ASSERT_EQ(::pthread_kill(::pthread_self(), SIGPIPE), 0);
    bool threw = false;
    {
        aspen::current_thread_runtime rt;
        threw = rt.block_on([]() -> task<bool> {
            auto [rd, wr] = aspen::pipe();
            rd = {};
            try {
                co_await wr.write("x");
            } catch (const std::system_error& e) {
                co_return e.code().value() == EPIPE;
            }
            co_return false;
        }());
    }
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    bool still_pending = sigismember(&pending, SIGPIPE) == 1;
    timespec none{};
    while (::sigtimedwait(&pipe_only, nullptr, &none) == SIGPIPE) {
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    EXPECT_TRUE(threw);
    EXPECT_TRUE(still_pending);
}

// from_native takes pipe ends of the right direction only; what it refuses
// stays open and the caller's.
TEST(PipeAdopt, RefusesWhatIsNotAPipeEndOfThatDirection) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    EXPECT_THROW((void)pipe_reader::from_native(p[1]), std::invalid_argument);  // the write end
    EXPECT_THROW((void)pipe_writer::from_native(p[0]), std::invalid_argument);  // the read end
    EXPECT_THROW((void)pipe_reader::from_native(-1), std::invalid_argument);
    int s[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
    try {
        (void)pipe_reader::from_native(s[0]);
        ADD_FAILURE() << "a socket was adopted as a pipe";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("not a pipe or FIFO"), std::string::npos) << e.what();
    }
    for (int fd : {p[0], p[1], s[0], s[1]}) EXPECT_EQ(::fcntl(fd, F_GETFD), FD_CLOEXEC) << fd;  // still open
    {
        pipe_reader rd = pipe_reader::from_native(p[0]);
        pipe_writer wr = pipe_writer::from_native(p[1]);
        EXPECT_TRUE(::fcntl(p[0], F_GETFL) & O_NONBLOCK);
    }
    EXPECT_EQ(::fcntl(p[0], F_GETFD), -1);  // closed with the pipe_reader
    EXPECT_EQ(::fcntl(p[1], F_GETFD), -1);
    ::close(s[0]);
    ::close(s[1]);
    try {
        (void)pipe_writer::from_native(p[1]);  // closed now
        ADD_FAILURE() << "a closed fd was adopted";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EBADF);
    }
}

// A read aborted while it waits, a read that times out, and a writer that
// waits on a full pipe when the reader goes: the pipe stays usable, the
// descriptors are all closed at the end, and an empty end throws
// std::logic_error.
TEST_P(Pipe, CancelledOperationsLeaveThePipeUsableAndLeakNothing) {
    const int before = net_test::open_fds();
    struct outcome {
        bool timed_out = false;
        std::string after;
        bool logic_error = false;
        int writer_error = 0;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            auto [rd, wr] = aspen::pipe();
            auto reader = aspen::spawn([](pipe_reader* rd) -> task<void> {
                char c;
                (void)co_await rd->read(&c, 1);
            }(&rd));
            co_await aspen::sleep(5ms);
            co_await aspen_test::abort_and_join(reader);
            try {
                char c;
                (void)co_await aspen::timeout(5ms, rd.read(&c, 1));
            } catch (const aspen::timed_out&) {
                o.timed_out = true;
            }
            co_await wr.write_all("after");
            wr = {};
            co_await rd.read_to_end(o.after);
            try {
                char c;
                (void)co_await wr.write(&c, 1);
            } catch (const std::logic_error&) {
                o.logic_error = true;
            }
            // A writer waiting on a full pipe gets EPIPE when the reader goes.
            auto [rd2, wr2] = aspen::pipe();
            ::fcntl(wr2.native_handle(), F_SETPIPE_SZ, 4096);
            auto writer = aspen::spawn([](pipe_writer wr) -> task<int> {
                std::string big(100000, 'y');
                try {
                    co_await wr.write_all(big);
                } catch (const std::system_error& e) {
                    co_return e.code().value();
                }
                co_return 0;
            }(std::move(wr2)));
            co_await aspen::sleep(5ms);
            rd2 = {};
            o.writer_error = co_await writer;
            co_return o;
        }(),
        "pipe cancel");
    EXPECT_TRUE(o.timed_out);
    EXPECT_EQ(o.after, "after");
    EXPECT_TRUE(o.logic_error);
    EXPECT_EQ(o.writer_error, EPIPE);
    EXPECT_EQ(net_test::open_fds(), before);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Pipe, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
