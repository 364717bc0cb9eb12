// aspen::io::copy and copy_bidirectional on every runtime kind: every byte
// moved and counted, both directions at once (a proxy in front of an echo
// server, and two large transfers that would deadlock if one direction
// waited for the other), shutdown passed on, the first error ending the
// call, and an abort leaving the streams usable and no descriptor behind.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <aspen/io/all.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
using aspen::unix_stream;

namespace {

class IoCopy : public ::testing::TestWithParam<int> {};

char byte_at(std::size_t seed, std::size_t i) { return static_cast<char>((seed * 101 + i * 13 + (i >> 11)) & 0xFF); }

std::vector<char> pattern(std::size_t seed, std::size_t size) {
    std::vector<char> v(size);
    for (std::size_t i = 0; i < size; ++i) v[i] = byte_at(seed, i);
    return v;
}

std::size_t mismatches(const std::string& got, std::size_t seed) {
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != byte_at(seed, i);
    return bad;
}

// Writes `size` pattern bytes, shuts the write side down, then reads to the
// end: what came back.
task<std::string> send_then_drain(unix_stream& s, std::size_t seed, std::size_t size) {
    std::vector<char> out = pattern(seed, size);
    auto [rd, wr] = std::move(s).into_split();
    auto sender = aspen::spawn([](aspen::unix_write_half wr, std::vector<char> out) -> task<void> {
        co_await wr.write_all(out.data(), out.size());
        wr.shutdown();
    }(std::move(wr), std::move(out)));
    std::string got;
    co_await rd.read_to_end(got);
    co_await sender;
    co_return got;
}

// 1 MiB from a pipe through copy into a Unix stream: the count and every byte.
TEST_P(IoCopy, CopyMovesEveryByteToTheEnd) {
    static constexpr std::size_t total = 1 << 20;
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [rd, wr] = aspen::pipe();
            ::fcntl(wr.native_handle(), F_SETPIPE_SZ, 4096);
            auto [a, b] = unix_stream::pair();
            auto producer = aspen::spawn([](aspen::pipe_writer wr) -> task<void> {
                std::vector<char> data = pattern(1, total);
                co_await wr.write_all(data.data(), data.size());
            }(std::move(wr)));
            auto copier = aspen::spawn([](aspen::pipe_reader rd, unix_stream a) -> task<std::uint64_t> {
                std::uint64_t n = co_await aspen::io::copy(rd, a);
                a.shutdown();
                co_return n;
            }(std::move(rd), std::move(a)));
            std::string got;
            co_await b.read_to_end(got);
            co_await producer;
            std::uint64_t copied = co_await copier;
            EXPECT_EQ(copied, total);
            EXPECT_EQ(got.size(), total);
            EXPECT_EQ(mismatches(got, 1), 0u);
        }(),
        "copy");
}

// Both sides send a lot at once: x -> a ~> b -> y and y -> b ~> a -> x. The
// socket buffers are far smaller than the data, so each side's writes wait
// for the other direction to be read: only directions that progress
// independently get through. Each side then reads end of stream, which the
// copy passes on once a direction is done.
TEST_P(IoCopy, BidirectionalMovesBothWaysAtOnceAndCountsThem) {
    static constexpr std::size_t x_bytes = 700 * 1000, y_bytes = 1100 * 1000;
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [x, a] = unix_stream::pair();
            auto [b, y] = unix_stream::pair();
            auto proxy = aspen::spawn([](unix_stream a, unix_stream b) -> task<aspen::io::copy_totals> {
                aspen::io::copy_totals t = co_await aspen::io::copy_bidirectional(a, b);
                co_return t;
            }(std::move(a), std::move(b)));
            auto side_y = aspen::spawn([](unix_stream y) -> task<std::string> {
                std::string got = co_await send_then_drain(y, 2, y_bytes);
                co_return got;
            }(std::move(y)));
            std::string at_x = co_await send_then_drain(x, 3, x_bytes);
            std::string at_y = co_await side_y;
            aspen::io::copy_totals t = co_await proxy;
            EXPECT_EQ(t.a_to_b, x_bytes);
            EXPECT_EQ(t.b_to_a, y_bytes);
            EXPECT_EQ(at_y.size(), x_bytes);
            EXPECT_EQ(mismatches(at_y, 3), 0u);
            EXPECT_EQ(at_x.size(), y_bytes);
            EXPECT_EQ(mismatches(at_x, 2), 0u);
        }(),
        "copy_bidirectional");
}

// A TCP proxy in front of an echo server: 8 clients through it, every byte
// checked by echo_client, and each proxied connection's totals equal.
TEST_P(IoCopy, BidirectionalProxiesTcpConnections) {
    static constexpr std::size_t clients = 8, rounds = 50;
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            aspen::tcp_listener upstream = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
            aspen::tcp_listener front = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
            auto server = aspen::spawn(net_test::echo_server(upstream, clients));
            auto proxy = aspen::spawn([](aspen::tcp_listener& front, aspen::socket_address to) -> task<std::size_t> {
                std::vector<aspen::join_handle<aspen::io::copy_totals>> conns;
                for (std::size_t i = 0; i < clients; ++i) {
                    aspen::tcp_stream in = co_await front.accept();
                    conns.push_back(aspen::spawn(
                        [](aspen::tcp_stream in, aspen::socket_address to) -> task<aspen::io::copy_totals> {
                            aspen::tcp_stream out = co_await aspen::tcp_stream::connect(to);
                            aspen::io::copy_totals t = co_await aspen::io::copy_bidirectional(in, out);
                            co_return t;
                        }(std::move(in), to)));
                }
                std::size_t balanced = 0;
                for (auto& h : conns) {
                    aspen::io::copy_totals t = co_await h;
                    balanced += t.a_to_b == t.b_to_a && t.a_to_b > 0;
                }
                co_return balanced;
            }(front, upstream.local_addr()));
            std::vector<aspen::join_handle<std::uint64_t>> users;
            for (std::size_t c = 0; c < clients; ++c)
                users.push_back(aspen::spawn(net_test::echo_client(front.local_addr(), c, rounds)));
            for (auto& h : users) EXPECT_GT(co_await h, 0u);
            EXPECT_EQ(co_await proxy, clients);
            co_await server;
        }(),
        "proxy");
}

// One side's peer is gone: the write into it fails (EPIPE) and
// copy_bidirectional throws at once instead of waiting for the other
// direction, which never ends.
TEST_P(IoCopy, TheFirstErrorEndsBothDirections) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [x, a] = unix_stream::pair();
            auto [b, y] = unix_stream::pair();
            y = unix_stream();  // closes b's peer
            co_await x.write_all(std::string_view("into a closed peer"));
            bool failed = false;
            try {
                (void)co_await aspen::io::copy_bidirectional(a, b);
            } catch (const std::system_error& e) {
                failed = e.code().value() == EPIPE || e.code().value() == ECONNRESET;
            }
            EXPECT_TRUE(failed);
        }(),
        "copy error");
}

// Aborted while both directions wait: the call's reads gave their slots up
// (a new read on each stream is accepted and gets the next bytes), and the
// descriptors all close with their streams.
TEST_P(IoCopy, AbortWhileWaitingLeavesTheStreamsUsable) {
    int before = net_test::open_fds();
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [x, a] = unix_stream::pair();
            auto [b, y] = unix_stream::pair();
            auto copy = aspen::spawn(aspen::io::copy_bidirectional(a, b));
            co_await aspen::sleep(20ms);  // most likely waiting by now; passes either way
            co_await aspen_test::abort_and_join(copy);
            co_await x.write_all(std::string_view("x"));
            co_await y.write_all(std::string_view("y"));
            char c1 = 0, c2 = 0;
            EXPECT_EQ(co_await a.read(&c1, 1), 1u);
            EXPECT_EQ(co_await b.read(&c2, 1), 1u);
            EXPECT_EQ(c1, 'x');
            EXPECT_EQ(c2, 'y');
        }(),
        "copy abort");
    EXPECT_EQ(net_test::open_fds(), before);
}

INSTANTIATE_TEST_SUITE_P(Kinds, IoCopy, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
