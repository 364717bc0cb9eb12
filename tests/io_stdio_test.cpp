// aspen::io standard streams on every runtime kind, over blocking pipes
// borrowed in their place (stdio_reader::borrow / stdio_writer::borrow):
// lines through buf_reader, copy, frames and buf_writer, writes from many
// tasks kept whole, EPIPE without SIGPIPE, EBADF, an aborted read whose
// bytes go to the next read, end of stream, empty-object misuse; and the
// real fds 0, 1 and 2, with pipes put on them for the test's length.
#include "runtime_kinds.hpp"

#include <aspen/io/all.hpp>

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
using aspen::io::stdio_reader;
using aspen::io::stdio_writer;

namespace {

// A blocking pipe (the standard streams are blocking: aspen never makes
// them non-blocking); each end closed by its owner, or here.
struct blocking_pipe {
    int rd = -1, wr = -1;
    blocking_pipe() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
        rd = fds[0];
        wr = fds[1];
    }
    blocking_pipe(const blocking_pipe&) = delete;
    blocking_pipe& operator=(const blocking_pipe&) = delete;
    ~blocking_pipe() {
        close_rd();
        close_wr();
    }
    void close_rd() {
        if (rd >= 0) ::close(std::exchange(rd, -1));
    }
    void close_wr() {
        if (wr >= 0) ::close(std::exchange(wr, -1));
    }
};

void write_whole(int fd, const std::string& s) {
    std::size_t done = 0;
    while (done < s.size()) {
        ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        ASSERT_GT(n, 0) << std::strerror(errno);
        done += static_cast<std::size_t>(n);
    }
}

std::string read_to_end(int fd) {
    std::string out;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
}

char byte_at(std::size_t i) { return static_cast<char>((i * 29 + (i >> 12)) & 0xFF); }

// True if some thread of this process is in read(2) of fd (its
// /proc/self/task/<tid>/syscall line: the call's number, then fd in hex):
// how a test knows a pool read is blocked, without guessing with a sleep.
bool blocked_in_read(int fd) {
    DIR* tasks = ::opendir("/proc/self/task");
    if (!tasks) return false;
    char want[64];
    std::snprintf(want, sizeof want, "%ld 0x%x ", static_cast<long>(SYS_read), static_cast<unsigned>(fd));
    bool found = false;
    while (dirent* e = ::readdir(tasks)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/syscall");
        std::string line;
        if (std::getline(f, line) && line.rfind(want, 0) == 0) found = true;
    }
    ::closedir(tasks);
    return found;
}

// Sleeps until a pool thread is blocked reading fd (bounded by run_on's
// watchdog only).
task<void> until_blocked_in_read(int fd) {
    while (!blocked_in_read(fd)) co_await aspen::sleep(1ms);
}

// A read of r (over fd) blocked in read(2) on its pool thread, then its
// task aborted and its frame, with the buffer it read into, freed.
task<void> abort_a_blocked_read(stdio_reader& r, int fd) {
    auto stuck = aspen::spawn([](stdio_reader& r) -> task<std::size_t> {
        char buf[100];
        std::size_t n = co_await r.read(buf, sizeof buf);
        co_return n;
    }(r));
    co_await until_blocked_in_read(fd);
    co_await aspen_test::abort_and_join(stuck);
    { auto gone = std::move(stuck); }  // the handle held the frame's memory: free it now
}

// A plain thread that runs f once `go` is set (acquire: pairs with the
// release store that sets it, so what was done before is seen).
template <class F>
std::thread when_told(std::atomic<bool>& go, F f) {
    return std::thread([&go, f = std::move(f)] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);
        f();
    });
}

class IoStdio : public ::testing::TestWithParam<int> {};

// 10,000 numbered lines written by a plain thread in pieces that split
// lines anywhere, read with buf_reader::next_line over a borrowed pipe:
// each line whole, in order, then end of stream.
TEST_P(IoStdio, LinesThroughBufReaderFromABorrowedPipe) {
    constexpr int lines = 10'000;
    blocking_pipe p;
    std::thread writer([&] {
        std::string all;
        for (int i = 0; i < lines; ++i) all += "line " + std::to_string(i) + " of the input\n";
        std::size_t at = 0, piece = 1;
        while (at < all.size()) {
            std::size_t n = std::min(piece, all.size() - at);
            write_whole(p.wr, all.substr(at, n));
            at += n;
            piece = piece * 7 % 5003 + 1;
        }
        p.close_wr();
    });
    int matched = aspen_test::run_on(
        GetParam(),
        [](int fd) -> task<int> {
            aspen::io::buf_reader rd(stdio_reader::borrow(fd));
            int i = 0;
            for (;;) {
                std::optional<std::string> line = co_await rd.next_line(1024);
                if (!line) break;
                if (*line != "line " + std::to_string(i) + " of the input") {
                    ADD_FAILURE() << "line " << i << " is \"" << *line << '"';
                    co_return -1;
                }
                ++i;
            }
            co_return i;
        }(p.rd),
        "lines");
    writer.join();
    EXPECT_EQ(matched, lines);
}

// io::copy from a borrowed reader to a borrowed writer: 1 MB fed by one
// plain thread and drained by another, every byte compared.
TEST_P(IoStdio, CopyCarriesEveryByteFromReaderToWriter) {
    constexpr std::size_t total = 1'000'000;
    blocking_pipe in, out;
    std::string sent(total, '\0');
    for (std::size_t i = 0; i < total; ++i) sent[i] = byte_at(i);
    std::thread feeder([&] {
        for (std::size_t at = 0; at < total; at += 4099) write_whole(in.wr, sent.substr(at, 4099));
        in.close_wr();
    });
    std::string received;
    std::thread drain([&] { received = read_to_end(out.rd); });
    std::uint64_t copied = aspen_test::run_on(
        GetParam(),
        [](int from, int to) -> task<std::uint64_t> {
            stdio_reader r = stdio_reader::borrow(from);
            stdio_writer w = stdio_writer::borrow(to);
            task<std::uint64_t> c = aspen::io::copy(r, w);
            std::uint64_t n = co_await std::move(c);
            co_await w.flush();
            co_return n;
        }(in.rd, out.wr),
        "copy");
    feeder.join();
    out.close_wr();  // the drain sees end of stream
    drain.join();
    EXPECT_EQ(copied, total);
    ASSERT_EQ(received.size(), total);
    EXPECT_TRUE(received == sent);
}

// Frames and a buf_writer over borrowed streams: write_frame through a
// buf_writer (then shutdown: a flush, fd left open), read_frame through a
// buf_reader, both ends of one pipe.
TEST_P(IoStdio, FramesThroughBufWriterAndBufReader) {
    blocking_pipe p;
    std::vector<std::string> got = aspen_test::run_on(
        GetParam(),
        [](int rfd, int wfd) -> task<std::vector<std::string>> {
            {
                aspen::io::buf_writer wr(stdio_writer::borrow(wfd), 64);
                for (int i = 0; i < 50; ++i) {
                    std::string payload(static_cast<std::size_t>(i * 7), static_cast<char>('a' + i % 26));
                    task<void> f = aspen::io::write_frame(wr, payload);
                    co_await std::move(f);
                }
                co_await wr.shutdown();
            }
            EXPECT_NE(::fcntl(wfd, F_GETFD), -1);  // shutdown closed nothing
            ::close(wfd);
            aspen::io::buf_reader rd(stdio_reader::borrow(rfd), 100);
            std::vector<std::string> frames;
            for (;;) {
                task<std::optional<std::string>> f = aspen::io::read_frame(rd);
                std::optional<std::string> frame = co_await std::move(f);
                if (!frame) break;
                frames.push_back(std::move(*frame));
            }
            co_return frames;
        }(p.rd, p.wr),
        "frames");
    p.wr = -1;  // closed by the task
    ASSERT_EQ(got.size(), 50u);
    for (int i = 0; i < 50; ++i)
        EXPECT_EQ(got[i], std::string(static_cast<std::size_t>(i * 7), static_cast<char>('a' + i % 26)));
}

// 16 tasks write_all a 200 KB block of their own letter at once, to one
// borrowed pipe (far more than PIPE_BUF, so write(2) alone would
// interleave): one call at a time per stream keeps each block whole.
TEST_P(IoStdio, WritesFromManyTasksStayWhole) {
    constexpr int tasks = 16;
    constexpr std::size_t block = 200'000;
    blocking_pipe p;
    std::string received;
    std::thread drain([&] { received = read_to_end(p.rd); });
    aspen_test::run_on(
        GetParam(),
        [](int fd) -> task<void> {
            stdio_writer w = stdio_writer::borrow(fd);
            std::vector<aspen::join_handle<void>> hs;
            for (int t = 0; t < tasks; ++t)
                hs.push_back(aspen::spawn([](stdio_writer& w, int t) -> task<void> {
                    std::string mine(block, static_cast<char>('A' + t));
                    co_await w.write_all(mine);
                }(w, t)));
            for (auto& h : hs) co_await h;
        }(p.wr),
        "many writers");
    p.close_wr();
    drain.join();
    ASSERT_EQ(received.size(), tasks * block);
    std::vector<bool> seen(tasks, false);
    for (std::size_t at = 0; at < received.size(); at += block) {
        char c = received[at];
        ASSERT_GE(c, 'A');
        ASSERT_LT(c, 'A' + tasks);
        EXPECT_FALSE(seen[c - 'A']) << "block " << c << " twice";
        seen[c - 'A'] = true;
        EXPECT_EQ(received.find_first_not_of(c, at), at + block == received.size() ? std::string::npos : at + block)
            << "block " << c << " at " << at << " is not whole";
    }
}

// A write to a pipe whose reading end is closed throws EPIPE (write and
// write_all); SIGPIPE stays at its default action, so a raised one would
// end the test binary.
TEST_P(IoStdio, WriteToAPipeWithNoReaderThrowsEpipeWithoutSigpipe) {
    ASSERT_NE(::signal(SIGPIPE, SIG_DFL), SIG_ERR);
    blocking_pipe p;
    p.close_rd();
    std::vector<int> errs = aspen_test::run_on(
        GetParam(),
        [](int fd) -> task<std::vector<int>> {
            stdio_writer w = stdio_writer::borrow(fd);
            std::vector<int> errs;
            for (int i = 0; i < 2; ++i) {
                try {
                    if (i == 0) co_await w.write_all("nobody reads this");
                    else (void)co_await w.write("nor this", 8);
                    errs.push_back(0);
                } catch (const std::system_error& e) {
                    errs.push_back(e.code().value());
                    std::string what = e.what();
                    EXPECT_NE(what.find("(fd " + std::to_string(fd) + ")"), std::string::npos) << what;
                }
            }
            co_await w.flush();  // usable after an error
            co_return errs;
        }(p.wr),
        "epipe");
    EXPECT_EQ(errs, (std::vector<int>{EPIPE, EPIPE}));
}

// EBADF: borrowing a closed fd (at the call), reading a write-only end,
// writing a read-only end.
TEST_P(IoStdio, ClosedOrWrongDirectionFdsThrowEbadf) {
    for (int bad : {-1, [] {
                        blocking_pipe gone;
                        return gone.rd;  // closed when `gone` is
                    }()}) {
        try {
            (void)stdio_reader::borrow(bad);
            ADD_FAILURE() << "borrow(" << bad << ") did not throw";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code().value(), EBADF);
        }
        try {
            (void)stdio_writer::borrow(bad);
            ADD_FAILURE() << "borrow(" << bad << ") did not throw";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code().value(), EBADF);
        }
    }
    blocking_pipe p;
    std::vector<int> errs = aspen_test::run_on(
        GetParam(),
        [](int rfd, int wfd) -> task<std::vector<int>> {
            std::vector<int> errs;
            stdio_reader r = stdio_reader::borrow(wfd);
            stdio_writer w = stdio_writer::borrow(rfd);
            char c;
            try {
                (void)co_await r.read(&c, 1);
                errs.push_back(0);
            } catch (const std::system_error& e) {
                errs.push_back(e.code().value());
            }
            try {
                co_await w.write_all("x");
                errs.push_back(0);
            } catch (const std::system_error& e) {
                errs.push_back(e.code().value());
            }
            co_return errs;
        }(p.rd, p.wr),
        "ebadf");
    EXPECT_EQ(errs, (std::vector<int>{EBADF, EBADF}));
}

// A read blocked in read(2) of an empty pipe, its task aborted and its
// frame (and the buffer it read into) freed: the pool call goes on, and
// the bytes it gets are held for the next read. Reads after it return
// every byte written, in order, then end of stream: nothing lost. (ASan
// would report a write into the freed frame if the call read into the
// caller's buffer.)
TEST_P(IoStdio, AnAbortedReadLosesNoByte) {
    blocking_pipe p;
    std::atomic<bool> go{false};
    std::thread writer = when_told(go, [&p] {
        write_whole(p.wr, "abcdefghi");
        p.close_wr();
    });
    std::string got = aspen_test::run_on(
        GetParam(),
        [](int fd, std::atomic<bool>& go) -> task<std::string> {
            stdio_reader r = stdio_reader::borrow(fd);
            co_await abort_a_blocked_read(r, fd);
            go.store(true, std::memory_order_release);  // release: pairs with when_told's acquire
            std::string got;
            char buf[4];
            for (;;) {
                std::size_t n = co_await r.read(buf, sizeof buf);
                if (n == 0) break;
                got.append(buf, n);
            }
            co_return got;
        }(p.rd, go),
        "aborted read");
    writer.join();
    EXPECT_EQ(got, "abcdefghi");
}

// End of stream when the writing end closes: read_exact returns what came,
// then read returns 0, again at once. An end of stream met by an aborted
// read is held too: the next read returns 0.
TEST_P(IoStdio, EndOfStreamWhenTheWriteEndCloses) {
    blocking_pipe p, q;
    write_whole(p.wr, "xy");
    p.close_wr();
    std::atomic<bool> go{false};
    std::thread closer = when_told(go, [&q] { q.close_wr(); });
    std::vector<std::size_t> counts = aspen_test::run_on(
        GetParam(),
        [](int pfd, int qfd, std::atomic<bool>& go) -> task<std::vector<std::size_t>> {
            std::vector<std::size_t> counts;
            stdio_reader r = stdio_reader::borrow(pfd);
            char buf[10];
            counts.push_back(co_await r.read_exact(buf, sizeof buf));
            EXPECT_EQ(std::string(buf, 2), "xy");
            counts.push_back(co_await r.read(buf, sizeof buf));
            counts.push_back(co_await r.read(buf, sizeof buf));

            stdio_reader s = stdio_reader::borrow(qfd);
            co_await abort_a_blocked_read(s, qfd);
            go.store(true, std::memory_order_release);  // release: pairs with when_told's acquire
            counts.push_back(co_await s.read(buf, sizeof buf));
            counts.push_back(co_await s.read(buf, 0));
            co_return counts;
        }(p.rd, q.rd, go),
        "end of stream");
    closer.join();
    EXPECT_EQ(counts, (std::vector<std::size_t>{2, 0, 0, 0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Kinds, IoStdio, aspen_test::runtime_kinds, aspen_test::kind_name);

// Empty (default-constructed or moved-from) streams throw std::logic_error
// at the call, from every operation.
TEST(IoStdioMisuse, EmptyStreamsThrowLogicError) {
    blocking_pipe p;
    stdio_reader r = stdio_reader::borrow(p.rd);
    stdio_writer w = stdio_writer::borrow(p.wr);
    stdio_reader r2 = std::move(r);
    stdio_writer w2 = std::move(w);
    EXPECT_TRUE(r2.is_open());
    EXPECT_EQ(w2.native_handle(), p.wr);
    stdio_reader r0;
    stdio_writer w0;
    for (stdio_reader* e : {&r, &r0}) {
        EXPECT_FALSE(e->is_open());
        EXPECT_EQ(e->native_handle(), -1);
        char c;
        EXPECT_THROW((void)e->read(&c, 1), std::logic_error);
        EXPECT_THROW((void)e->read_exact(&c, 1), std::logic_error);
    }
    for (stdio_writer* e : {&w, &w0}) {
        EXPECT_FALSE(e->is_open());
        EXPECT_EQ(e->native_handle(), -1);
        EXPECT_THROW((void)e->write("x", 1), std::logic_error);
        EXPECT_THROW((void)e->write_all("x"), std::logic_error);
        EXPECT_THROW((void)e->flush(), std::logic_error);
        EXPECT_THROW(e->shutdown(), std::logic_error);
    }
}

// Puts a pipe on fd `target` until destroyed, then the fd that was there.
// stdout is flushed first, so gtest's buffered output goes where it
// belongs; nothing may print between the two (EXPECTs are checked after).
struct fd_swap {
    int target, saved;
    fd_swap(int t, int with) : target(t), saved(::dup(t)) {
        std::fflush(stdout);
        ::dup2(with, target);
    }
    fd_swap(const fd_swap&) = delete;
    fd_swap& operator=(const fd_swap&) = delete;
    ~fd_swap() {
        ::dup2(saved, target);
        ::close(saved);
    }
};

class IoStdioReal : public ::testing::TestWithParam<int> {};

// The real standard streams: pipes on fds 0, 1 and 2 for the test's
// length. copy(stdin(), stdout()) of 256 KB fed by a thread, a line to
// stderr(), and stdin() read at its end once more (0: the stream is one
// process-wide state, a second handle included).
TEST_P(IoStdioReal, StdinStdoutStderrAreFds012) {
    constexpr std::size_t total = 256'000;
    blocking_pipe in, out, err;
    std::string sent(total, '\0');
    for (std::size_t i = 0; i < total; ++i) sent[i] = byte_at(i + 5);
    std::thread feeder([&] {
        write_whole(in.wr, sent);
        in.close_wr();
    });
    std::string received, errors;
    std::thread drain_out([&] { received = read_to_end(out.rd); });
    std::thread drain_err([&] { errors = read_to_end(err.rd); });
    struct outcome {
        std::uint64_t copied = 0;
        std::size_t again = 99;
        int fds[3] = {-1, -1, -1};
    } o;
    {
        fd_swap s0(0, in.rd), s1(1, out.wr), s2(2, err.wr);
        o = aspen_test::run_on(
            GetParam(),
            []() -> task<outcome> {
                outcome o;
                stdio_reader in = aspen::io::stdin();
                stdio_writer out = aspen::io::stdout();
                stdio_writer err = aspen::io::stderr();
                o.fds[0] = in.native_handle();
                o.fds[1] = out.native_handle();
                o.fds[2] = err.native_handle();
                task<std::uint64_t> c = aspen::io::copy(in, out);
                o.copied = co_await std::move(c);
                co_await err.write_all("to stderr\n");
                stdio_reader again = aspen::io::stdin();
                char b;
                o.again = co_await again.read(&b, 1);
                co_return o;
            }(),
            "real fds");
    }
    // Only the pipes' own ends are left: the drains see end of stream.
    out.close_wr();
    err.close_wr();
    feeder.join();
    drain_out.join();
    drain_err.join();
    EXPECT_EQ(o.fds[0], 0);
    EXPECT_EQ(o.fds[1], 1);
    EXPECT_EQ(o.fds[2], 2);
    EXPECT_EQ(o.copied, total);
    EXPECT_EQ(o.again, 0u);
    EXPECT_TRUE(received == sent) << received.size() << " bytes";
    EXPECT_EQ(errors, "to stderr\n");
}

INSTANTIATE_TEST_SUITE_P(Kinds, IoStdioReal, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
