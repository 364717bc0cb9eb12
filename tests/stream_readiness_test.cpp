// The readiness API of the byte streams: readable() / try_read and
// writable() / try_write move 1 MiB through a 4 KiB pipe and over a TCP
// connection byte for byte (a full pipe makes try_write say "not now",
// which is counted), try_read on a stream no operation has used, misuse.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;

namespace {

char byte_at(std::size_t i) { return static_cast<char>((i * 17 + (i >> 11)) & 0xFF); }

struct counts {
    std::size_t received = 0, mismatches = 0;
    std::size_t write_not_now = 0;
};

// Writes `total` pattern bytes with writable() + try_write, counting the
// times try_write found the buffer full.
template <class Writer>
task<void> write_by_readiness(Writer& w, std::size_t total, std::size_t* not_now) {
    std::vector<char> data(total);
    for (std::size_t i = 0; i < total; ++i) data[i] = byte_at(i);
    std::size_t sent = 0;
    while (sent < total) {
        co_await w.writable();
        std::optional<std::size_t> n = w.try_write(data.data() + sent, std::min<std::size_t>(total - sent, 10000));
        if (!n) {
            ++*not_now;
            continue;
        }
        sent += *n;
    }
}

// Reads with readable() + try_read until end of stream.
template <class Reader>
task<void> read_by_readiness(Reader& r, counts* c) {
    char buf[1500];
    for (;;) {
        co_await r.readable();
        std::optional<std::size_t> n = r.try_read(buf, sizeof buf);
        if (!n) continue;
        if (*n == 0) co_return;
        for (std::size_t i = 0; i < *n; ++i)
            if (buf[i] != byte_at(c->received + i)) ++c->mismatches;
        c->received += *n;
    }
}

class StreamReadiness : public ::testing::TestWithParam<int> {};

TEST_P(StreamReadiness, PipeCarriesEveryByte) {
    constexpr std::size_t total = 1 << 20;
    counts c = aspen_test::run_on(
        GetParam(),
        []() -> task<counts> {
            auto [rd, wr] = aspen::pipe();
            ::fcntl(wr.native_handle(), F_SETPIPE_SZ, 4096);
            counts c;
            auto writer = aspen::spawn([](aspen::pipe_writer wr, std::size_t* not_now) -> task<void> {
                co_await write_by_readiness(wr, total, not_now);
            }(std::move(wr), &c.write_not_now));
            co_await read_by_readiness(rd, &c);
            co_await writer;
            co_return c;
        }(),
        "pipe readiness");
    EXPECT_EQ(c.received, total);
    EXPECT_EQ(c.mismatches, 0u);
    EXPECT_GT(c.write_not_now, 0u) << "the 4 KiB pipe never filled";
}

TEST_P(StreamReadiness, TcpCarriesEveryByte) {
    constexpr std::size_t total = 1 << 20;
    counts c = aspen_test::run_on(
        GetParam(),
        []() -> task<counts> {
            auto l = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
            aspen::tcp_stream client = co_await aspen::tcp_stream::connect(l.local_addr());
            aspen::tcp_stream server = co_await l.accept();
            counts c;
            auto writer = aspen::spawn([](aspen::tcp_stream s, std::size_t* not_now) -> task<void> {
                co_await write_by_readiness(s, total, not_now);
                s.shutdown(aspen::shutdown_mode::write);
            }(std::move(client), &c.write_not_now));
            co_await read_by_readiness(server, &c);
            co_await writer;
            co_return c;
        }(),
        "tcp readiness");
    EXPECT_EQ(c.received, total);
    EXPECT_EQ(c.mismatches, 0u);
}

// try_read before any operation registered the stream: the syscall
// decides (nullopt on an empty pipe, the bytes once written), also outside
// a runtime; size 0 is 0 at once.
TEST(StreamReadinessUnregistered, TryReadAndTryWriteWithoutARuntime) {
    auto [rd, wr] = aspen::pipe();
    char buf[16];
    EXPECT_EQ(rd.try_read(buf, sizeof buf), std::nullopt);
    EXPECT_EQ(rd.try_read(buf, 0), std::optional<std::size_t>(0));
    EXPECT_EQ(wr.try_write("abc"), std::optional<std::size_t>(3));
    EXPECT_EQ(rd.try_read(buf, sizeof buf), std::optional<std::size_t>(3));
    wr = {};
    EXPECT_EQ(rd.try_read(buf, sizeof buf), std::optional<std::size_t>(0));  // end of stream
    aspen::pipe_reader empty;
    EXPECT_THROW((void)empty.try_read(buf, 1), std::logic_error);
}

// A readable() that waits occupies the read slot: a read in another task
// throws std::logic_error. After a stale readiness (try_read found
// nothing), readable() waits for the data written later.
TEST_P(StreamReadiness, StaleReadinessWaitsForNewDataAndTheSlotIsHeld) {
    struct outcome {
        bool refused = false;
        std::string got;
        std::optional<std::size_t> empty_read = 0;
        bool waited = false;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            auto [rd, wr] = aspen::pipe();
            co_await wr.write_all("x");
            char c;
            (void)co_await rd.read(&c, 1);  // registers; the readiness may stay set
            auto waiter = aspen::spawn([](aspen::pipe_reader* rd) -> task<std::string> {
                char buf[8];
                for (;;) {
                    // Refused while the probe below holds the slot for a
                    // moment: try again.
                    try {
                        co_await rd->readable();
                    } catch (const std::logic_error&) {
                    }
                    std::optional<std::size_t> n = rd->try_read(buf, sizeof buf);
                    if (n) co_return std::string(buf, *n);
                    co_await aspen::sleep(1ms);
                }
            }(&rd));
            // Until the waiter holds the read slot (a bounded number of tries).
            for (int i = 0; i < 10000 && !o.refused; ++i) {
                co_await aspen::sleep(1ms);
                try {
                    (void)co_await aspen::timeout(1ms, rd.read(&c, 1));
                } catch (const std::logic_error&) {
                    o.refused = true;
                } catch (const aspen::timed_out&) {
                }
            }
            co_await wr.write_all("later");
            o.got = co_await waiter;
            // Empty again: a try_read that finds nothing clears the cached
            // readiness, so readable() waits (no data comes: it times out).
            o.empty_read = rd.try_read(&c, 1);
            try {
                co_await aspen::timeout(20ms, rd.readable());
            } catch (const aspen::timed_out&) {
                o.waited = true;
            }
            co_return o;
        }(),
        "stale readiness");
    EXPECT_TRUE(o.refused);
    EXPECT_EQ(o.got, "later");
    EXPECT_EQ(o.empty_read, std::nullopt);
    EXPECT_TRUE(o.waited) << "readable() completed on a drained pipe: the stale readiness was not cleared";
}

INSTANTIATE_TEST_SUITE_P(Kinds, StreamReadiness, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
