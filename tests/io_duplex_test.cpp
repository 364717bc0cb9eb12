// aspen::io::duplex on every runtime kind: bytes both ways, a writer held
// back by a full buffer until the reader drains it (every byte checked),
// end of stream after shutdown and after a drop, EPIPE for a write nobody
// can read, aborted and timed-out operations that lose and duplicate
// nothing, the coop budget, and the stream used by buf_reader, buf_writer,
// read_frame / write_frame, copy and copy_bidirectional. A stress test moves
// 10 MB each way in random pieces through random buffer sizes on 8 workers.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <aspen/io/all.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
using aspen::io::duplex;
using aspen::io::duplex_stream;

namespace {

class IoDuplex : public ::testing::TestWithParam<int> {};

char byte_at(std::uint64_t seed, std::size_t i) {
    return static_cast<char>((seed * 131 + i * 7 + (i >> 9) + (i >> 17)) & 0xFF);
}

// Reads until end of stream, in pieces of up to `piece` bytes.
task<std::string> drain(duplex_stream& s, std::size_t piece) {
    std::string got;
    std::vector<char> buf(piece);
    for (;;) {
        std::size_t n = co_await s.read(buf.data(), buf.size());
        if (n == 0) co_return got;
        got.append(buf.data(), n);
    }
}

// How many bytes of `got` differ from the pattern of `seed`.
std::size_t mismatches(const std::string& got, std::uint64_t seed) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != byte_at(seed, i);
    return bad;
}

// True if op threw std::system_error with `err`.
template <class Op>
task<bool> throws_errno(Op op, int err) {
    try {
        (void)co_await std::move(op);
    } catch (const std::system_error& e) {
        co_return e.code().value() == err;
    }
    co_return false;
}

// One read of a byte: what it returned (it waits while nothing comes).
task<std::size_t> read_one(duplex_stream& s) {
    char c;
    co_return co_await s.read(&c, 1);
}

TEST_P(IoDuplex, CarriesBytesBothWays) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(64);
            EXPECT_EQ(co_await a.write_all(std::string_view("ping")), 4u);
            char buf[16] = {};
            EXPECT_EQ(co_await b.read_exact(buf, 4), 4u);
            EXPECT_EQ(std::string_view(buf, 4), "ping");
            EXPECT_EQ(co_await b.write(std::string_view("pong!")), 5u);
            EXPECT_EQ(co_await a.read(buf, sizeof buf), 5u);  // all that is there
            EXPECT_EQ(std::string_view(buf, 5), "pong!");
            // Zero-byte operations complete at once.
            EXPECT_EQ(co_await a.read(buf, 0), 0u);
            EXPECT_EQ(co_await a.write(buf, 0), 0u);
        }(),
        "round trip");
}

// A 1 MiB write through a 64-byte buffer: while nobody reads, the writer
// has put in at most 64 bytes and is not done; the reader, reading in odd
// pieces, gets every byte in order, and the writer finishes.
TEST_P(IoDuplex, AFullBufferHoldsTheWriterBackUntilTheReaderDrains) {
    static constexpr std::size_t total = 1 << 20;
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(64);
            std::atomic<std::size_t> written{0};
            auto writer = aspen::spawn([](duplex_stream& a, std::atomic<std::size_t>& written) -> task<void> {
                std::string data(total, '\0');
                for (std::size_t i = 0; i < total; ++i) data[i] = byte_at(3, i);
                std::size_t done = 0;
                while (done < total) {
                    std::size_t n = co_await a.write(data.data() + done, std::min<std::size_t>(1000, total - done));
                    done += n;
                    // relaxed: a progress figure, only compared with a bound;
                    // the join orders the last store before the final check.
                    written.store(done, std::memory_order_relaxed);
                }
                a.shutdown();
            }(a, written));
            // Let the writer run into the full buffer.
            for (int i = 0; i < 50; ++i) co_await aspen::yield_now();
            co_await aspen::sleep(5ms);
            EXPECT_LE(written.load(std::memory_order_relaxed), 64u);
            EXPECT_FALSE(writer.is_finished());
            std::string got = co_await drain(b, 37);
            co_await writer;
            EXPECT_EQ(got.size(), total);
            EXPECT_EQ(mismatches(got, 3), 0u);
            EXPECT_EQ(written.load(std::memory_order_relaxed), total);  // after the join
        }(),
        "backpressure");
}

// After shutdown the peer reads what was buffered, then 0, and 0 again;
// the shut end can still read, and its writes throw EPIPE.
TEST_P(IoDuplex, ShutdownEndsThePeersReadsAndRefusesLaterWrites) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(16);
            co_await a.write_all(std::string_view("abc"));
            a.shutdown();
            a.shutdown();  // again: nothing changes
            char buf[8];
            EXPECT_EQ(co_await b.read(buf, sizeof buf), 3u);
            EXPECT_EQ(std::string_view(buf, 3), "abc");
            EXPECT_EQ(co_await b.read(buf, sizeof buf), 0u);
            EXPECT_EQ(co_await b.read(buf, sizeof buf), 0u);
            EXPECT_EQ(co_await b.read_exact(buf, 4), 0u);
            // Half-closed: the other direction still works.
            co_await b.write_all(std::string_view("back"));
            EXPECT_EQ(co_await a.read_exact(buf, 4), 4u);
            EXPECT_EQ(std::string_view(buf, 4), "back");
            task<bool> refused1 = throws_errno(a.write(std::string_view("x")), EPIPE);
            EXPECT_TRUE(co_await std::move(refused1));
        }(),
        "shutdown");
}

// A shutdown wakes a reader that waits.
TEST_P(IoDuplex, ShutdownWakesAWaitingReader) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(16);
            auto reader = aspen::spawn(read_one(b));
            co_await aspen::sleep(2ms);
            a.shutdown();
            EXPECT_EQ(co_await reader, 0u);
        }(),
        "shutdown wakes");
}

// Dropping an end: the peer reads what was buffered, then end of stream,
// and its writes throw EPIPE, also one that was waiting for room.
TEST_P(IoDuplex, DroppingAnEndEndsThePeersReadsAndItsWritesThrowEpipe) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(4);
            co_await a.write_all(std::string_view("xyz"));
            co_await b.write_all(std::string_view("1234"));  // b's direction is full now
            auto blocked = aspen::spawn(throws_errno(b.write(std::string_view("5")), EPIPE));
            co_await aspen::sleep(2ms);
            EXPECT_FALSE(blocked.is_finished());
            a = duplex_stream();  // the drop
            EXPECT_TRUE(co_await blocked);
            char buf[8];
            EXPECT_EQ(co_await b.read(buf, sizeof buf), 3u);
            EXPECT_EQ(std::string_view(buf, 3), "xyz");
            EXPECT_EQ(co_await b.read(buf, sizeof buf), 0u);
            task<bool> refused2 = throws_errno(b.write(std::string_view("6")), EPIPE);
            EXPECT_TRUE(co_await std::move(refused2));
            task<bool> refused3 = throws_errno(b.write_all(std::string_view("7")), EPIPE);
            EXPECT_TRUE(co_await std::move(refused3));
        }(),
        "drop");
}

// Destroying an end under its own waiting operation: ECANCELED.
TEST_P(IoDuplex, DroppingAnEndUnderItsOwnWaitingReadCancelsIt) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(4);
            char c;
            auto reader = aspen::spawn(throws_errno(b.read(&c, 1), ECANCELED));
            co_await aspen::sleep(2ms);
            b = duplex_stream();
            EXPECT_TRUE(co_await reader);
            task<bool> refused4 = throws_errno(a.write(std::string_view("x")), EPIPE);
            EXPECT_TRUE(co_await std::move(refused4));
        }(),
        "drop under own read");
}

TEST(IoDuplexMisuse, ZeroBufferEmptyEndsAndConcurrentReadsAreRefused) {
    try {
        (void)duplex(0);
        ADD_FAILURE() << "duplex(0) did not throw";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("got 0"), std::string::npos) << e.what();
    }
    duplex_stream empty;
    EXPECT_FALSE(empty);
    EXPECT_THROW((void)empty.read(nullptr, 0), std::logic_error);
    EXPECT_THROW(empty.shutdown(), std::logic_error);
    aspen_test::run_on(
        1,
        []() -> task<void> {
            auto [a, b] = duplex(8);
            EXPECT_TRUE(a);
            auto first = aspen::spawn(read_one(b));
            co_await aspen::sleep(2ms);
            bool refused = false;
            try {
                char c;
                (void)co_await b.read(&c, 1);
            } catch (const std::logic_error&) {
                refused = true;
            }
            EXPECT_TRUE(refused);
            co_await a.write_all(std::string_view("!"));
            EXPECT_EQ(co_await first, 1u);
        }(),
        "misuse");
}

// A read aborted while it waits takes nothing and leaves its place free; a
// write aborted while it waits for room puts nothing in. The ends work on
// afterwards, with no byte lost or doubled.
TEST_P(IoDuplex, AbortedWaitingReadAndWriteLoseAndDuplicateNothing) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(8);
            auto reader = aspen::spawn([](duplex_stream& b) -> task<std::string> {
                char buf[8];
                std::size_t n = co_await b.read(buf, sizeof buf);
                co_return std::string(buf, n);
            }(b));
            co_await aspen::sleep(2ms);
            EXPECT_FALSE(reader.is_finished());
            co_await aspen_test::abort_and_join(reader);

            co_await a.write_all(std::string_view("01234567"));  // full
            auto writer = aspen::spawn([](duplex_stream& a) -> task<std::size_t> {
                co_return co_await a.write(std::string_view("XYZ"));
            }(a));
            co_await aspen::sleep(2ms);
            EXPECT_FALSE(writer.is_finished());
            co_await aspen_test::abort_and_join(writer);

            char buf[16];
            EXPECT_EQ(co_await b.read_exact(buf, 8), 8u);  // the same read place, taken again
            EXPECT_EQ(std::string_view(buf, 8), "01234567");
            co_await a.write_all(std::string_view("89"));  // the same write place, taken again
            a.shutdown();
            EXPECT_EQ(co_await b.read(buf, sizeof buf), 2u);
            EXPECT_EQ(std::string_view(buf, 2), "89");
            EXPECT_EQ(co_await b.read(buf, sizeof buf), 0u);
        }(),
        "abort");
}

// timeout(d, read) on a silent peer throws timed_out and takes nothing;
// later bytes reach the next read whole.
TEST_P(IoDuplex, ATimedOutReadTakesNothing) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(32);
            char buf[16];
            bool timed_out = false;
            try {
                (void)co_await aspen::timeout(10ms, b.read(buf, sizeof buf));
            } catch (const aspen::timed_out&) {
                timed_out = true;
            }
            EXPECT_TRUE(timed_out);
            co_await a.write_all(std::string_view("late"));
            std::size_t n = co_await aspen::timeout(10s, b.read(buf, sizeof buf));
            EXPECT_EQ(n, 4u);
            EXPECT_EQ(std::string_view(buf, n), "late");
            // A write that waits for room times out the same way.
            auto [c, d] = duplex(2);
            co_await c.write_all(std::string_view("ab"));
            timed_out = false;
            try {
                (void)co_await aspen::timeout(10ms, c.write(std::string_view("c")));
            } catch (const aspen::timed_out&) {
                timed_out = true;
            }
            EXPECT_TRUE(timed_out);
            EXPECT_EQ(co_await d.read(buf, sizeof buf), 2u);
            EXPECT_EQ(std::string_view(buf, 2), "ab");
        }(),
        "timeout");
}

// An always-ready write and read spend the coop budget: with a budget of 4
// the loop lets another task of its single thread run within a few steps.
TEST(IoDuplexCoop, AlwaysReadyOperationsSpendTheCoopBudget) {
    auto ends = std::make_shared<std::pair<duplex_stream, duplex_stream>>(duplex(16));
    int seen_at = aspen_test::coop_yield_point([ends](int i) -> task<bool> {
        char c = static_cast<char>(i);
        co_await ends->first.write(&c, 1);
        char back = 0;
        std::size_t n = co_await ends->second.read(&back, 1);
        co_return n == 1 && back == c;
    });
    EXPECT_GE(seen_at, 0) << "the loop never let the other task run";
    EXPECT_LT(seen_at, 10);
}

// A reader whose duplex always has data, on one worker, yields to a timer
// task before the data runs out (the socket test NetCoop's pattern).
TEST(IoDuplexCoop, EndlessReaderDoesNotStarveATimerTask) {
    static constexpr std::size_t filled = 1 << 20;
    aspen::runtime rt(aspen_test::workers(1));
    std::uint64_t reads = 0;
    aspen_test::within(60s, "endless duplex reader vs timer", [&] {
        reads = rt.block_on([]() -> task<std::uint64_t> {
            auto [a, b] = duplex(filled);
            std::string data(filled, 'z');
            co_await a.write_all(data.data(), data.size());
            std::atomic<bool> stop{false};
            auto reader = aspen::spawn([](duplex_stream& b, std::atomic<bool>& stop) -> task<std::uint64_t> {
                std::uint64_t n = 0;
                char c;
                while (!stop.load(std::memory_order_relaxed)) {
                    std::size_t got = co_await b.read(&c, 1);  // (not in the if: g++ 12)
                    if (got == 0) break;
                    ++n;
                }
                co_return n;
            }(b, stop));
            auto timer_task = aspen::spawn([](duplex_stream& a, std::atomic<bool>& stop) -> task<void> {
                co_await aspen::sleep(2ms);
                // relaxed: only ends the loop; no data is published through it.
                stop.store(true, std::memory_order_relaxed);
                a.shutdown();  // a reader that drained everything sees end of stream
            }(a, stop));
            co_await timer_task;
            co_return co_await reader;
        }());
    });
    EXPECT_GT(reads, 0u);
    EXPECT_LT(reads, filled) << "the reader drained the duplex before the timer task ran";
}

// buf_reader::next_line over a duplex of 3 bytes: lines cut anywhere come
// out whole.
TEST_P(IoDuplex, BufReaderReadsLinesCutAnywhere) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(3);
            auto writer = aspen::spawn([](duplex_stream a) -> task<void> {
                co_await a.write_all(std::string_view("first line\r\nsecond\n\nlast without newline"));
            }(std::move(a)));  // dropped at the end: end of stream
            aspen::io::buf_reader<duplex_stream&> rd(b, 5);
            std::vector<std::string> lines;
            for (;;) {
                std::optional<std::string> l = co_await rd.next_line(100);
                if (!l) break;
                lines.push_back(std::move(*l));
            }
            co_await writer;
            EXPECT_EQ(lines, (std::vector<std::string>{"first line", "second", "", "last without newline"}));
        }(),
        "buf_reader");
}

// buf_writer in front of a duplex: small writes held until flush, then all
// in order; shutdown flushes and ends the stream.
TEST_P(IoDuplex, BufWriterFlushesInOrderAndShutdownEnds) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(100);
            auto writer = aspen::spawn([](duplex_stream a) -> task<void> {
                aspen::io::buf_writer<duplex_stream> wr(std::move(a), 64);
                for (std::size_t i = 0; i < 5000; i += 10) {
                    std::string piece(10, '\0');
                    for (std::size_t j = 0; j < 10; ++j) piece[j] = byte_at(9, i + j);
                    co_await wr.write_all(piece.data(), piece.size());
                }
                co_await wr.shutdown();
            }(std::move(a)));
            std::string got = co_await drain(b, 41);
            co_await writer;
            EXPECT_EQ(got.size(), 5000u);
            EXPECT_EQ(mismatches(got, 9), 0u);
        }(),
        "buf_writer");
}

// Frames of every size from 0 to 300 bytes through a 7-byte duplex, then a
// clean end.
TEST_P(IoDuplex, FramesRoundTripThroughATinyBuffer) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = duplex(7);
            auto writer = aspen::spawn([](duplex_stream a) -> task<void> {
                for (std::size_t len = 0; len <= 300; ++len) {
                    std::string payload(len, '\0');
                    for (std::size_t i = 0; i < len; ++i) payload[i] = byte_at(len, i);
                    task<void> t = aspen::io::write_frame(a, payload);
                    co_await std::move(t);
                }
                a.shutdown();
            }(std::move(a)));
            std::size_t frames = 0;
            std::size_t bad = 0;
            for (;;) {
                std::optional<std::string> f = co_await aspen::io::read_frame(b, 1000);
                if (!f) break;
                bad += f->size() != frames || mismatches(*f, frames) != 0;
                ++frames;
            }
            co_await writer;
            EXPECT_EQ(frames, 301u);
            EXPECT_EQ(bad, 0u);
        }(),
        "frames");
}

// io::copy from one duplex into another; copy_bidirectional as a proxy
// between two duplex pairs, both directions at once, shutdown passed on.
TEST_P(IoDuplex, CopyAndCopyBidirectionalCarryEveryByte) {
    static constexpr std::size_t up = 300'000;
    static constexpr std::size_t down = 200'000;
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            {
                auto [src_w, src_r] = duplex(1000);
                auto [dst_w, dst_r] = duplex(333);
                auto producer = aspen::spawn([](duplex_stream w) -> task<void> {
                    std::string data(up, '\0');
                    for (std::size_t i = 0; i < up; ++i) data[i] = byte_at(5, i);
                    co_await w.write_all(data.data(), data.size());
                }(std::move(src_w)));
                auto copier = aspen::spawn([](duplex_stream r, duplex_stream w) -> task<std::uint64_t> {
                    std::uint64_t n = co_await aspen::io::copy(r, w);
                    w.shutdown();
                    co_return n;
                }(std::move(src_r), std::move(dst_w)));
                std::string got = co_await drain(dst_r, 4096);
                co_await producer;
                EXPECT_EQ(co_await copier, up);
                EXPECT_EQ(got.size(), up);
                EXPECT_EQ(mismatches(got, 5), 0u);
            }
            // client <-> (proxy_a | proxy_b) <-> server
            auto [client, proxy_a] = duplex(512);
            auto [proxy_b, server] = duplex(2048);
            auto proxy = aspen::spawn([](duplex_stream a, duplex_stream b) -> task<aspen::io::copy_totals> {
                co_return co_await aspen::io::copy_bidirectional(a, b);
            }(std::move(proxy_a), std::move(proxy_b)));
            // Each end sends its bytes and shuts down while reading the other's.
            auto send = [](duplex_stream& s, std::uint64_t seed, std::size_t size) -> task<void> {
                std::string data(size, '\0');
                for (std::size_t i = 0; i < size; ++i) data[i] = byte_at(seed, i);
                co_await s.write_all(data.data(), data.size());
                s.shutdown();
            };
            auto client_send = aspen::spawn(send(client, 11, up));
            auto server_send = aspen::spawn(send(server, 12, down));
            std::string at_server = co_await drain(server, 1000);
            std::string at_client = co_await drain(client, 3000);
            co_await client_send;
            co_await server_send;
            aspen::io::copy_totals totals = co_await proxy;
            EXPECT_EQ(totals.a_to_b, up);
            EXPECT_EQ(totals.b_to_a, down);
            EXPECT_EQ(at_server.size(), up);
            EXPECT_EQ(mismatches(at_server, 11), 0u);
            EXPECT_EQ(at_client.size(), down);
            EXPECT_EQ(mismatches(at_client, 12), 0u);
        }(),
        "copy");
}

INSTANTIATE_TEST_SUITE_P(Kinds, IoDuplex, aspen_test::runtime_kinds, aspen_test::kind_name);

// ---- stress ------------------------------------------------------------------

// Writes `total` pattern bytes in random pieces with write (short writes
// taken as they come), then shuts down.
task<void> send_random(duplex_stream& s, std::uint64_t seed, std::size_t total) {
    std::mt19937_64 rng(seed);
    std::vector<char> piece;
    std::size_t done = 0;
    while (done < total) {
        std::size_t want = std::min<std::size_t>(total - done, 1 + rng() % 20000);
        piece.resize(want);
        for (std::size_t i = 0; i < want; ++i) piece[i] = byte_at(seed, done + i);
        std::size_t off = 0;
        while (off < want) off += co_await s.write(piece.data() + off, want - off);
        done += want;
    }
    s.shutdown();
}

// Reads to the end in random pieces; the count of bytes that were not the
// pattern of `seed`, or that came after `total`.
task<std::size_t> receive_random(duplex_stream& s, std::uint64_t seed, std::size_t total, std::size_t& got) {
    std::mt19937_64 rng(seed ^ 0x5555);
    std::vector<char> buf(20000);
    std::size_t bad = 0;
    for (;;) {
        std::size_t want = 1 + rng() % buf.size();
        std::size_t n = co_await s.read(buf.data(), want);
        if (n == 0) co_return bad;
        for (std::size_t i = 0; i < n; ++i) bad += got + i >= total || buf[i] != byte_at(seed, got + i);
        got += n;
    }
}

// Two ends exchanging 10 MB each way (2 MB under a sanitizer) at the same
// time, each with a writer and a reader task, in random pieces through a
// random max_buf_size: every byte arrives once, in order.
TEST(IoDuplexStress, TwoEndsExchangeTenMegabytesInRandomPieces) {
    static constexpr std::size_t total = net_test::sanitized ? (2u << 20) : (10u << 20);
    for (std::uint64_t round = 1; round <= 3; ++round) {
        std::mt19937_64 rng(round * 7919);
        // 1 byte to 64 KiB, log-uniform: tiny buffers split everything.
        std::size_t max_buf = std::size_t{1} << (rng() % 17);
        max_buf += rng() % max_buf;
        if (net_test::sanitized) max_buf = std::max<std::size_t>(max_buf, 256);
        SCOPED_TRACE("max_buf " + std::to_string(max_buf));
        aspen_test::run_on(
            8,
            [](std::size_t max_buf, std::uint64_t round) -> task<void> {
                auto [a, b] = duplex(max_buf);
                std::size_t got_a = 0, got_b = 0;
                auto a_send = aspen::spawn(send_random(a, round * 2, total));
                auto b_send = aspen::spawn(send_random(b, round * 2 + 1, total));
                auto a_recv = aspen::spawn(receive_random(a, round * 2 + 1, total, got_a));
                auto b_recv = aspen::spawn(receive_random(b, round * 2, total, got_b));
                co_await a_send;
                co_await b_send;
                EXPECT_EQ(co_await a_recv, 0u);
                EXPECT_EQ(co_await b_recv, 0u);
                EXPECT_EQ(got_a, total);
                EXPECT_EQ(got_b, total);
            }(max_buf, round),
            "duplex stress");
    }
}

}  // namespace
