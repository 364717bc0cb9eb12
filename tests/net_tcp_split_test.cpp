// tcp_stream::into_split: a reader task and a writer task on the two halves
// of one connection (full duplex, every byte checked), end of stream when
// the write half goes, a half's drop cancelling only its own direction's
// waiting operation, no fd left behind, and misuse.
#include "net_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <sys/socket.h>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
using aspen::tcp_read_half;
using aspen::tcp_stream;
using aspen::tcp_write_half;
using aspen::task;

namespace {

// Many times what the socket buffers on the way hold once shrunk (see
// small_buffers), so the echo only finishes if the client reads while it
// writes.
constexpr std::size_t duplex_bytes = net_test::sanitized ? (1u << 20) : (4u << 20);
constexpr std::size_t chunk = 64 * 1024;

task<std::size_t> write_pattern(tcp_write_half wr) {
    std::vector<char> buf(chunk);
    std::size_t sent = 0;
    while (sent < duplex_bytes) {
        std::size_t n = std::min(chunk, duplex_bytes - sent);
        for (std::size_t i = 0; i < n; ++i) buf[i] = net_test::pattern_byte(0, 0, sent + i);
        sent += co_await wr.write_all(buf.data(), n);
    }
    co_return sent;  // wr goes here: the peer reads end of stream
}

// Reads until end of stream; returns how many bytes matched the pattern in
// order (a mismatch stops the count).
task<std::size_t> read_pattern(tcp_read_half rd) {
    std::vector<char> buf(chunk);
    std::size_t got = 0;
    for (;;) {
        std::size_t n = co_await rd.read(buf.data(), buf.size());
        if (n == 0) co_return got;
        for (std::size_t i = 0; i < n; ++i)
            if (buf[i] != net_test::pattern_byte(0, 0, got + i)) co_return got + i;
        got += n;
    }
}

// SO_SNDBUF and SO_RCVBUF of 64 KiB (the kernel doubles them); setting
// them also stops the kernel from growing them. Not smaller: a receive
// buffer below loopback's 64 KiB segments makes the kernel drop segments
// and fall back on retransmission timeouts (seconds of stall, seen with
// 16 KiB in plain blocking code too).
void small_buffers(int fd) {
    int size = 64 * 1024;
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size), 0);
    ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size), 0);
}

template <class Runtime>
void run_duplex(Runtime& rt) {
    int fds_before = net_test::open_fds();
    rt.block_on([]() -> task<void> {
        auto [client, server] = co_await net_test::connected_pair();
        small_buffers(client.native_handle());
        small_buffers(server.native_handle());
        auto echo = aspen::spawn(net_test::echo_connection(std::move(server)));
        auto [rd, wr] = std::move(client).into_split();
        EXPECT_FALSE(client.is_open());  // the stream gave its socket to the halves
        auto writer = aspen::spawn(write_pattern(std::move(wr)));
        auto reader = aspen::spawn(read_pattern(std::move(rd)));
        EXPECT_EQ(co_await writer, duplex_bytes);
        // The echo ends at the write half's end of stream and closes its
        // side, so the reader sees end of stream after every byte.
        EXPECT_EQ(co_await reader, duplex_bytes);
        co_await echo;
    }());
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
    EXPECT_EQ(net_test::open_fds(), fds_before);
}

class TcpSplitDuplex : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TcpSplitDuplex, ReaderAndWriterTasksOnTheHalvesEveryByteChecked) {
    aspen::runtime rt(aspen_test::workers(GetParam()));
    aspen_test::within(120s, "split duplex", [&] { run_duplex(rt); });
}

INSTANTIATE_TEST_SUITE_P(Workers, TcpSplitDuplex, ::testing::Values(1, 2, 8));

TEST(TcpSplit, DuplexOnTheCurrentThreadRuntime) {
    aspen::current_thread_runtime rt;
    aspen_test::within(120s, "split duplex, current thread", [&] { run_duplex(rt); });
}

TEST(TcpSplit, DroppingTheWriteHalfEndsTheStreamAndTheReadHalfGoesOn) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "write half drop", [&] {
        rt.block_on([]() -> task<void> {
            auto [client, server] = co_await net_test::connected_pair();
            auto [rd, wr] = std::move(client).into_split();
            co_await wr.write_all("ping");
            wr = tcp_write_half{};  // assigning shuts the write direction down, then lets go
            EXPECT_FALSE(wr.is_open());
            char buf[16] = {};
            std::size_t n = co_await server.read_exact(buf, sizeof buf);  // short: end of stream
            EXPECT_EQ(std::string(buf, n), "ping");
            // The connection is still open the other way.
            co_await server.write_all("pong");
            n = co_await rd.read_exact(buf, 4);
            EXPECT_EQ(std::string(buf, n), "pong");
            server.shutdown(aspen::shutdown_mode::write);
            EXPECT_EQ(co_await rd.read(buf, sizeof buf), 0u);
        }());
    });
}

TEST(TcpSplit, DroppingAHalfCancelsOnlyItsOwnWaitingOperation) {
    aspen::runtime rt(aspen_test::workers(2));
    int fds_before = net_test::open_fds();
    aspen_test::within(30s, "half drop with a waiting read", [&] {
        rt.block_on([&]() -> task<void> {
            auto [client, server] = co_await net_test::connected_pair();
            auto [rd, wr] = std::move(client).into_split();
            int client_fd = wr.native_handle();
            // A read waits on the read half, which this task owns.
            std::atomic<bool> started{false};
            auto reader = aspen::spawn([](tcp_read_half& rd, std::atomic<bool>& started) -> task<int> {
                char c;
                try {
                    started.store(true);
                    co_await rd.read(&c, 1);
                } catch (const std::system_error& e) {
                    co_return e.code().value();
                }
                co_return 0;
            }(rd, started));
            // Once started, the read is under way (its awaitable holds the
            // socket); give it time to park. Had it not parked yet, its
            // first poll would find the side closed: ECANCELED all the same.
            while (!started.load()) co_await aspen::sleep(1ms);
            co_await aspen::sleep(5ms);
            rd = tcp_read_half{};  // the read half goes while its read waits
            EXPECT_EQ(co_await reader, ECANCELED);
            // The write half still works, on the same fd.
            EXPECT_EQ(wr.native_handle(), client_fd);
            co_await wr.write_all("x");
            char c = 0;
            EXPECT_EQ(co_await server.read(&c, 1), 1u);
            EXPECT_EQ(c, 'x');
            wr.set_nodelay(true);
            EXPECT_TRUE(wr.nodelay());
        }());
    });
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
    EXPECT_EQ(net_test::open_fds(), fds_before);
}

TEST(TcpSplit, DroppingTheWriteHalfCancelsAWriteWaitingForRoom) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "write half drop with a waiting write", [&] {
        rt.block_on([&]() -> task<void> {
            auto [client, server] = co_await net_test::connected_pair();
            auto [rd, wr] = std::move(client).into_split();
            // Nobody reads on the server side: this write_all fills the
            // buffers and waits for room.
            std::atomic<bool> started{false};
            auto writer = aspen::spawn([](tcp_write_half& wr, std::atomic<bool>& started) -> task<int> {
                std::vector<char> big(16u << 20, 'w');
                try {
                    started.store(true);
                    co_await wr.write_all(big.data(), big.size());
                } catch (const std::system_error& e) {
                    co_return e.code().value();
                }
                co_return 0;
            }(wr, started));
            while (!started.load()) co_await aspen::sleep(1ms);
            co_await aspen::sleep(20ms);  // let it fill the buffers and park
            wr = tcp_write_half{};
            int err = co_await writer;
            // ECANCELED from the half's drop, or EPIPE if the shutdown
            // reached the send first: either way the write ends, in error.
            EXPECT_TRUE(err == ECANCELED || err == EPIPE) << "errno " << err;
            // The read half is unharmed: the server can still talk to it.
            co_await server.write_all("ok");
            char buf[2];
            EXPECT_EQ(co_await rd.read_exact(buf, 2), 2u);
            EXPECT_EQ(std::string(buf, 2), "ok");
        }());
    });
}

TEST(TcpSplit, AddressesOfBothHalvesAreTheStreams) {
    aspen::runtime rt(aspen_test::workers(1));
    rt.block_on([]() -> task<void> {
        auto [client, server] = co_await net_test::connected_pair();
        aspen::socket_address local = client.local_addr(), peer = client.peer_addr();
        auto [rd, wr] = std::move(client).into_split();
        EXPECT_EQ(rd.local_addr(), local);
        EXPECT_EQ(rd.peer_addr(), peer);
        EXPECT_EQ(wr.local_addr(), local);
        EXPECT_EQ(wr.peer_addr(), peer);
        EXPECT_EQ(rd.native_handle(), wr.native_handle());
        wr.shutdown();  // explicit: the peer reads end of stream
        char c;
        EXPECT_EQ(co_await server.read(&c, 1), 0u);
    }());
}

TEST(TcpSplitMisuse, EmptyStreamsAndHalvesThrowLogicError) {
    tcp_stream empty;
    EXPECT_THROW((void)std::move(empty).into_split(), std::logic_error);
    tcp_read_half rd;
    tcp_write_half wr;
    EXPECT_FALSE(rd.is_open());
    EXPECT_FALSE(wr.is_open());
    EXPECT_THROW((void)rd.read(nullptr, 0), std::logic_error);
    EXPECT_THROW((void)rd.read_exact(nullptr, 0), std::logic_error);
    EXPECT_THROW((void)wr.write("x"), std::logic_error);
    EXPECT_THROW((void)wr.write_all("x"), std::logic_error);
    EXPECT_THROW(wr.shutdown(), std::logic_error);
    EXPECT_THROW(rd.peer_addr(), std::logic_error);
    aspen::runtime rt(aspen_test::workers(1));
    rt.block_on([]() -> task<void> {
        auto [client, server] = co_await net_test::connected_pair();
        auto halves = std::move(client).into_split();
        // The split stream is empty now, like a moved-from one.
        EXPECT_THROW((void)client.read(nullptr, 0), std::logic_error);
        EXPECT_THROW((void)std::move(client).into_split(), std::logic_error);
        // A moved-from half is empty too.
        tcp_read_half moved = std::move(halves.first);
        EXPECT_FALSE(halves.first.is_open());
        EXPECT_TRUE(moved.is_open());
        co_return;
    }());
}

}  // namespace
