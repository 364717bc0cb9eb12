// aspen::io::buf_reader and buf_writer over real streams (Unix stream pairs,
// pipes), on every runtime kind: lines split anywhere, limits, the buffer
// bypass for large reads, cancellation losing nothing, and writes held back
// until flush.
#include "runtime_kinds.hpp"

#include <aspen/io/all.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
using aspen::unix_stream;
using aspen::io::buf_reader;
using aspen::io::buf_writer;

namespace {

class BufReader : public ::testing::TestWithParam<int> {};
class BufWriter : public ::testing::TestWithParam<int> {};

char byte_at(std::size_t i) { return static_cast<char>((i * 29 + (i >> 9)) & 0xFF); }

// Writes text one byte at a time, yielding between bytes so that the reader
// meets every possible split of a line, then shuts the stream down.
task<void> trickle(unix_stream s, std::string text) {
    for (char c : text) {
        co_await s.write_all(&c, 1);
        co_await aspen::yield_now();
    }
    s.shutdown();
}

TEST_P(BufReader, ReadLineKeepsTerminatorsWhateverTheSplit) {
    auto lines = aspen_test::run_on(
        GetParam(),
        []() -> task<std::vector<std::string>> {
            auto [a, b] = unix_stream::pair();
            auto writer = aspen::spawn(trickle(std::move(a), "alpha\nbeta\r\n\ngamma"));
            buf_reader rd(std::move(b), 4);  // smaller than a line: lines cross refills
            std::vector<std::string> out;
            for (;;) {
                std::string line;
                std::size_t n = co_await rd.read_line(line);
                EXPECT_EQ(n, line.size());
                if (n == 0) break;
                out.push_back(line);
            }
            co_await writer;
            co_return out;
        }(),
        "read_line");
    EXPECT_EQ(lines, (std::vector<std::string>{"alpha\n", "beta\r\n", "\n", "gamma"}));
}

TEST_P(BufReader, NextLineStripsNewlineAndCarriageReturn) {
    auto lines = aspen_test::run_on(
        GetParam(),
        []() -> task<std::vector<std::string>> {
            auto [a, b] = unix_stream::pair();
            auto writer = aspen::spawn(trickle(std::move(a), "alpha\nbeta\r\n\ngamma"));
            buf_reader rd(std::move(b), 3);
            std::vector<std::string> out;
            while (std::optional<std::string> l = co_await rd.next_line()) out.push_back(*l);
            // End of stream stays end of stream.
            std::optional<std::string> again = co_await rd.next_line();
            EXPECT_FALSE(again.has_value());
            co_await writer;
            co_return out;
        }(),
        "next_line");
    EXPECT_EQ(lines, (std::vector<std::string>{"alpha", "beta", "", "gamma"}));
}

TEST_P(BufReader, ReadUntilStopsAtTheLimitAndLeavesTheRest) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            co_await a.write_all(std::string_view("0123456789;tail"));
            a.shutdown();
            buf_reader rd(std::move(b));
            std::string out;
            EXPECT_EQ(co_await rd.read_until(';', out, 4), 4u);
            EXPECT_EQ(out, "0123");
            out.clear();
            EXPECT_EQ(co_await rd.read_until(';', out), 7u);
            EXPECT_EQ(out, "456789;");
            out.clear();
            EXPECT_EQ(co_await rd.read_until(';', out), 4u);  // to end of stream
            EXPECT_EQ(out, "tail");
            out.clear();
            EXPECT_EQ(co_await rd.read_until(';', out), 0u);
            EXPECT_TRUE(out.empty());
        }(),
        "read_until limit");
}

// A peer that never ends its line cannot make next_line hold more than the
// limit; lines within the limit before and after are unaffected.
TEST_P(BufReader, NextLineRefusesALineOverTheLimit) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            co_await a.write_all(std::string_view("short\n0123456789ab\nok\n"));
            a.shutdown();
            buf_reader rd(std::move(b), 5);
            std::optional<std::string> first = co_await rd.next_line(8);
            EXPECT_EQ(first, std::optional<std::string>("short"));
            bool refused = false;
            try {
                (void)co_await rd.next_line(8);
            } catch (const std::length_error& e) {
                refused = std::string(e.what()).find("longer than 8 bytes") != std::string::npos;
            }
            EXPECT_TRUE(refused);
            // The 8 bytes up to the limit were consumed; the rest of that line
            // and the next one follow.
            std::optional<std::string> rest = co_await rd.next_line(8);
            EXPECT_EQ(rest, std::optional<std::string>("89ab"));
            std::optional<std::string> ok = co_await rd.next_line(8);
            EXPECT_EQ(ok, std::optional<std::string>("ok"));
        }(),
        "next_line limit");
}

// 100 bytes arrive at once: the first one-byte read takes them all from the
// stream, the other 99 reads come from the buffer.
TEST_P(BufReader, SmallReadsAreServedFromOneStreamRead) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            std::string data(100, '\0');
            for (std::size_t i = 0; i < data.size(); ++i) data[i] = byte_at(i);
            co_await a.write_all(std::string_view(data));
            buf_reader rd(std::move(b));
            char c = 0;
            EXPECT_EQ(co_await rd.read(&c, 1), 1u);
            EXPECT_EQ(c, byte_at(0));
            EXPECT_EQ(rd.buffer().size(), 99u);
            // Nothing is left in the socket: its bytes are all in the buffer.
            char probe;
            EXPECT_FALSE(rd.get_ref().try_read(&probe, 1).has_value());
            for (std::size_t i = 1; i < data.size(); ++i) {
                EXPECT_EQ(co_await rd.read(&c, 1), 1u);
                EXPECT_EQ(c, byte_at(i));
            }
            EXPECT_TRUE(rd.buffer().empty());
        }(),
        "small reads");
}

TEST_P(BufReader, AReadAsLargeAsTheBufferBypassesIt) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            co_await a.write_all(std::string_view("0123456789"));
            buf_reader<unix_stream&> rd(b, 4);
            char buf[16] = {};
            std::size_t n = co_await rd.read(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, n), "0123456789");
            EXPECT_TRUE(rd.buffer().empty());  // went straight into buf
        }(),
        "bypass");
}

// 1 MiB through a 4 KiB pipe, read back by read_exact in pieces of varying
// size through a 1000-byte buffer: every byte in order, then a short count
// at end of stream.
TEST_P(BufReader, ReadExactCarriesEveryByteAcrossRefills) {
    static constexpr std::size_t total = 1 << 20;
    std::size_t mismatches = aspen_test::run_on(
        GetParam(),
        []() -> task<std::size_t> {
            auto [rd_end, wr] = aspen::pipe();
            ::fcntl(wr.native_handle(), F_SETPIPE_SZ, 4096);
            auto writer = aspen::spawn([](aspen::pipe_writer wr) -> task<void> {
                std::vector<char> data(total);
                for (std::size_t i = 0; i < total; ++i) data[i] = byte_at(i);
                co_await wr.write_all(data.data(), total);
            }(std::move(wr)));
            buf_reader rd(std::move(rd_end), 1000);
            std::vector<char> piece;
            std::size_t at = 0, bad = 0, size = 1;
            while (at < total) {
                piece.resize(size);
                std::size_t n = co_await rd.read_exact(piece.data(), size);
                EXPECT_EQ(n, std::min(size, total - at));
                for (std::size_t i = 0; i < n; ++i) bad += piece[i] != byte_at(at + i);
                at += n;
                size = size * 7 % 5003 + 1;
            }
            co_await writer;
            char extra;
            EXPECT_EQ(co_await rd.read_exact(&extra, 1), 0u);
            EXPECT_EQ(at, total);
            co_return bad;
        }(),
        "read_exact");
    EXPECT_EQ(mismatches, 0u);
}

TEST_P(BufReader, FillBufAndConsume) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            co_await a.write_all(std::string_view("hello"));
            a.shutdown();
            buf_reader rd(std::move(b));
            std::span<const char> got = co_await rd.fill_buf();
            EXPECT_EQ(std::string(got.data(), got.size()), "hello");
            rd.consume(2);
            EXPECT_THROW(rd.consume(4), std::out_of_range);
            std::span<const char> rest = co_await rd.fill_buf();  // no read: still buffered
            EXPECT_EQ(std::string(rest.data(), rest.size()), "llo");
            rd.consume(3);
            std::span<const char> end = co_await rd.fill_buf();
            EXPECT_TRUE(end.empty());
        }(),
        "fill_buf");
}

// A read_line that times out with half a line keeps that half in `out`; the
// next call completes the line: no byte lost, none doubled.
TEST_P(BufReader, ATimedOutReadLineLosesNothing) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            buf_reader rd(std::move(b), 2);
            std::string line;
            co_await a.write_all(std::string_view("hel"));
            bool timed_out = false;
            try {
                (void)co_await aspen::timeout(20ms, rd.read_line(line));
            } catch (const aspen::timed_out&) {
                timed_out = true;
            }
            EXPECT_TRUE(timed_out);
            EXPECT_EQ(line, "hel");
            co_await a.write_all(std::string_view("lo\nnext\n"));
            EXPECT_EQ(co_await rd.read_line(line), 3u);
            EXPECT_EQ(line, "hello\n");
            std::optional<std::string> next = co_await rd.next_line();
            EXPECT_EQ(next, std::optional<std::string>("next"));
        }(),
        "cancelled read_line");
}

TEST(BufReaderMisuse, ZeroCapacityOrLimitIsRefused) {
    aspen_test::run_on(
        1,
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            EXPECT_THROW((void)buf_reader<unix_stream&>(b, 0), std::invalid_argument);
            EXPECT_THROW((void)buf_writer<unix_stream&>(a, 0), std::invalid_argument);
            buf_reader<unix_stream&> rd(b);
            std::string out;
            bool refused = false;
            try {
                (void)co_await rd.read_until('\n', out, 0);
            } catch (const std::invalid_argument& e) {
                refused = std::string(e.what()).find("limit must be at least 1") != std::string::npos;
            }
            EXPECT_TRUE(refused);
        }(),
        "misuse");
}

// Bytes written below the capacity stay in the writer (the peer sees
// nothing) until flush; then they all arrive, in order.
TEST_P(BufWriter, HoldsSmallWritesUntilFlush) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            buf_writer wr(std::move(a), 4096);
            for (int i = 0; i < 10; ++i) co_await wr.write_all(std::string_view("0123456789"));
            EXPECT_EQ(wr.buffer().size(), 100u);
            char probe;
            EXPECT_FALSE(b.try_read(&probe, 1).has_value());  // nothing sent yet
            co_await wr.flush();
            EXPECT_TRUE(wr.buffer().empty());
            std::string got(100, '\0');
            EXPECT_EQ(co_await b.read_exact(got.data(), got.size()), 100u);
            std::string want;
            for (int i = 0; i < 10; ++i) want += "0123456789";
            EXPECT_EQ(got, want);
        }(),
        "held writes");
}

// Records of varying size, some larger than the buffer, through a 4 KiB
// pipe: every byte in order; shutdown of a socket flushes, then the peer
// reads end of stream.
TEST_P(BufWriter, CarriesMixedSizesInOrderAndShutdownFlushes) {
    static constexpr std::size_t total = 300 * 1000;
    std::size_t mismatches = aspen_test::run_on(
        GetParam(),
        []() -> task<std::size_t> {
            auto [a, b] = unix_stream::pair();
            auto writer = aspen::spawn([](unix_stream a) -> task<void> {
                std::vector<char> data(total);
                for (std::size_t i = 0; i < total; ++i) data[i] = byte_at(i);
                buf_writer wr(std::move(a), 1024);
                std::size_t at = 0, size = 1;
                while (at < total) {
                    std::size_t n = std::min(size, total - at);
                    co_await wr.write_all(data.data() + at, n);
                    at += n;
                    size = size * 5 % 3001 + 1;  // up to 3 KB: some bypass the 1 KiB buffer
                }
                co_await wr.shutdown();
            }(std::move(a)));
            std::string got;
            co_await b.read_to_end(got);
            co_await writer;
            EXPECT_EQ(got.size(), total);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != byte_at(i);
            co_return bad;
        }(),
        "mixed writes");
    EXPECT_EQ(mismatches, 0u);
}

// A flush stopped by a time-out (the peer does not read, the socket buffer
// is full) keeps what was not written; once the peer reads, the next flush
// delivers exactly the rest.
TEST_P(BufWriter, ATimedOutFlushLosesNothing) {
    static constexpr std::size_t total = 4 << 20;  // far more than a socket buffer
    std::size_t mismatches = aspen_test::run_on(
        GetParam(),
        []() -> task<std::size_t> {
            auto [a, b] = unix_stream::pair();
            buf_writer wr(std::move(a), total);
            std::vector<char> data(total);
            for (std::size_t i = 0; i < total; ++i) data[i] = byte_at(i);
            std::size_t taken = co_await wr.write(data.data(), total - 1);  // below capacity: buffered
            EXPECT_EQ(taken, total - 1);
            bool timed_out = false;
            try {
                co_await aspen::timeout(20ms, wr.flush());
            } catch (const aspen::timed_out&) {
                timed_out = true;
            }
            EXPECT_TRUE(timed_out);
            EXPECT_GT(wr.buffer().size(), 0u);
            EXPECT_LT(wr.buffer().size(), total - 1);
            auto reader = aspen::spawn([](unix_stream b) -> task<std::string> {
                std::string got;
                co_await b.read_to_end(got);
                co_return got;
            }(std::move(b)));
            co_await wr.shutdown();
            std::string got = co_await reader;
            EXPECT_EQ(got.size(), total - 1);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != data[i];
            co_return bad;
        }(),
        "cancelled flush");
    EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, BufReader, aspen_test::runtime_kinds, aspen_test::kind_name);
INSTANTIATE_TEST_SUITE_P(Kinds, BufWriter, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
