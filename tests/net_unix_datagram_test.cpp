// Unix domain datagram sockets: echo over a file path and an abstract name
// on every runtime kind, pairs, a slow receiver holding back a connected
// sender and a send_to sender (nothing dropped, order kept), truncation
// and peek, errors, cancellation and descriptor counts.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
using aspen::unix_datagram;

namespace {

using aspen_test::temp_dir;

std::string abstract_name(const char* what) {
    return "@aspen-dgram-test-" + std::to_string(::getpid()) + "-" + what;
}

// A datagram's content: its index in the first four bytes, then a pattern.
std::string message(std::size_t i, std::size_t size) {
    std::string m(std::max<std::size_t>(size, 4), '\0');
    std::memcpy(m.data(), &i, 4);
    for (std::size_t k = 4; k < m.size(); ++k) m[k] = static_cast<char>((i * 31 + k) & 0xFF);
    return m;
}

class UnixDatagram : public ::testing::TestWithParam<int> {};

struct echo_outcome {
    std::size_t checked = 0, bad = 0;
    std::string server_path, client_path_seen;
};

// A server echoes 200 datagrams of 1 to ~20,000 bytes back to their
// sender's path; the client checks each reply byte for byte.
TEST_P(UnixDatagram, EchoOverAPathAndAnAbstractName) {
    temp_dir dir;
    for (bool abstract : {false, true}) {
        const std::string server_path = abstract ? abstract_name("server") : dir.path + "/server";
        const std::string client_path = abstract ? abstract_name("client") : dir.path + "/client";
        echo_outcome o = aspen_test::run_on(
            GetParam(),
            [](std::string server_path, std::string client_path) -> task<echo_outcome> {
                unix_datagram server = unix_datagram::bind(server_path);
                unix_datagram client = unix_datagram::bind(client_path);
                constexpr std::size_t rounds = 200;
                echo_outcome o;
                auto echo = aspen::spawn([](unix_datagram* s, std::string* seen) -> task<void> {
                    std::vector<char> buf(65536);
                    for (std::size_t i = 0; i < rounds; ++i) {
                        unix_datagram::received r = co_await s->recv_from(buf.data(), buf.size());
                        *seen = r.path;
                        co_await s->send_to(buf.data(), r.size, r.path);
                    }
                }(&server, &o.client_path_seen));
                std::vector<char> buf(65536);
                for (std::size_t i = 0; i < rounds; ++i) {
                    std::string m = message(i, 1 + i * 101);
                    co_await client.send_to(m, server_path);
                    unix_datagram::received r = co_await client.recv_from(buf.data(), buf.size());
                    if (r.size != m.size() || r.truncated || std::memcmp(buf.data(), m.data(), m.size()) != 0 ||
                        r.path != server_path)
                        ++o.bad;
                    else
                        ++o.checked;
                }
                co_await echo;
                o.server_path = server.local_path();
                co_return o;
            }(server_path, client_path),
            "unix datagram echo");
        EXPECT_EQ(o.checked, 200u) << (abstract ? "abstract" : "path");
        EXPECT_EQ(o.bad, 0u);
        EXPECT_EQ(o.server_path, server_path);
        EXPECT_EQ(o.client_path_seen, client_path);
    }
}

// 2,000 datagrams sent while the receiver has not started reading: the
// queue fills, the sender waits (it has sent fewer than all when the
// receiver starts), and then every datagram arrives, in order, none lost.
// Once over a connected pair (the sender waits on the reactor), once by
// send_to from an unnamed socket (the sender retries on a timer).
TEST_P(UnixDatagram, ASlowReceiverHoldsSendersBackAndLosesNothing) {
    constexpr std::size_t total = 2000;
    temp_dir dir;
    for (bool connected : {true, false}) {
        struct outcome {
            std::size_t sent_before_reading = 0, received = 0, out_of_order = 0;
        };
        outcome o = aspen_test::run_on(
            GetParam(),
            [](bool connected, std::string path) -> task<outcome> {
                unix_datagram rx, tx;
                if (connected) {
                    auto [a, b] = unix_datagram::pair();
                    rx = std::move(a);
                    tx = std::move(b);
                } else {
                    rx = unix_datagram::bind(path);
                    tx = unix_datagram::unbound();
                }
                // Read by this task while the sender (maybe on another
                // worker) counts: relaxed, only the number matters.
                std::atomic<std::size_t> sent{0};
                auto sender = aspen::spawn([](unix_datagram* tx, bool connected, std::string path,
                                              std::atomic<std::size_t>* sent) -> task<void> {
                    for (std::size_t i = 0; i < total; ++i) {
                        std::string m = message(i, 200);
                        if (connected) co_await tx->send(m);
                        else co_await tx->send_to(m, path);
                        sent->fetch_add(1, std::memory_order_relaxed);
                    }
                }(&tx, connected, path, &sent));
                // Until the sender has stopped making progress: it waits on
                // the full queue (a bounded number of checks).
                std::size_t last = 0;
                for (int i = 0; i < 2000; ++i) {
                    co_await aspen::sleep(2ms);
                    std::size_t now = sent.load(std::memory_order_relaxed);
                    if (now == last && now > 0) break;
                    last = now;
                }
                outcome o;
                o.sent_before_reading = sent.load(std::memory_order_relaxed);
                char buf[256];
                for (std::size_t i = 0; i < total; ++i) {
                    std::size_t n = co_await rx.recv(buf, sizeof buf);
                    std::uint32_t index = 0;
                    std::memcpy(&index, buf, 4);
                    if (n != 200 || index != i) ++o.out_of_order;
                    ++o.received;
                }
                co_await sender;
                co_return o;
            }(connected, dir.path + "/rx"),
            "unix datagram backpressure");
        EXPECT_LT(o.sent_before_reading, total) << (connected ? "connected" : "send_to") << ": the queue never filled";
        EXPECT_EQ(o.received, total);
        EXPECT_EQ(o.out_of_order, 0u);
    }
}

// A datagram longer than the buffer: truncated, and said so; peek_from
// leaves it queued; an unnamed sender's path is ""; the connected peer's
// path is known.
TEST_P(UnixDatagram, TruncationPeekAndPaths) {
    temp_dir dir;
    struct outcome {
        unix_datagram::received peeked, got;
        std::string peek_bytes, got_bytes, peer;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        [](std::string path) -> task<outcome> {
            unix_datagram rx = unix_datagram::bind(path);
            unix_datagram tx = unix_datagram::unbound();
            co_await tx.send_to(std::string(100, 'z').insert(0, "head"), path);
            outcome o;
            char buf[10];
            o.peeked = co_await rx.peek_from(buf, sizeof buf);
            o.peek_bytes.assign(buf, o.peeked.size);
            o.got = co_await rx.recv_from(buf, sizeof buf);
            o.got_bytes.assign(buf, o.got.size);
            tx.connect(path);
            o.peer = tx.peer_path();
            co_return o;
        }(dir.path + "/rx"),
        "truncation");
    EXPECT_EQ(o.peeked.size, 10u);
    EXPECT_TRUE(o.peeked.truncated);
    EXPECT_EQ(o.got.size, 10u);
    EXPECT_TRUE(o.got.truncated);
    EXPECT_EQ(o.peek_bytes, "headzzzzzz");
    EXPECT_EQ(o.got_bytes, o.peek_bytes);
    EXPECT_EQ(o.got.path, "");
    EXPECT_EQ(o.peer, dir.path + "/rx");
}

TEST(UnixDatagramErrors, BadPathsMissingPeersAndShutdown) {
    temp_dir dir;
    aspen::current_thread_runtime rt;
    auto errno_of = [&](auto make_task) -> int {
        try {
            rt.block_on(make_task());
        } catch (const std::system_error& e) {
            return e.code().value();
        }
        return 0;
    };
    unix_datagram tx = unix_datagram::unbound();
    EXPECT_EQ(errno_of([&]() -> task<void> { co_await tx.send_to("x", dir.path + "/nobody"); }), ENOENT);
    EXPECT_THROW((void)tx.send_to("x", std::string(200, 'p')), std::invalid_argument);  // at the call
    EXPECT_THROW((void)tx.send_to("x", ""), std::invalid_argument);
    try {
        tx.connect(dir.path + "/nobody");
        ADD_FAILURE() << "connected to nothing";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), ENOENT);
        EXPECT_NE(std::string(e.what()).find("/nobody"), std::string::npos) << e.what();
    }
    unix_datagram a = unix_datagram::bind(dir.path + "/a");
    try {
        (void)unix_datagram::bind(dir.path + "/a");
        ADD_FAILURE() << "bound a path in use";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EADDRINUSE);
    }
    auto [p, q] = unix_datagram::pair();
    p.shutdown(aspen::shutdown_mode::write);
    EXPECT_EQ(errno_of([&]() -> task<void> { co_await p.send("x"); }), EPIPE);
    unix_datagram empty;
    EXPECT_THROW((void)empty.recv_from(nullptr, 0), std::logic_error);
    EXPECT_THROW((void)empty.local_path(), std::logic_error);
}

// A recv_from aborted while it waits, one that times out, and a socket
// destroyed under a waiting receive (ECANCELED): the socket stays usable
// until then, and every descriptor is closed at the end.
TEST_P(UnixDatagram, CancellationLeavesTheSocketUsableAndLeaksNothing) {
    const int before = net_test::open_fds();
    struct outcome {
        bool timed_out = false;
        std::string after;
        int closed_errno = 0;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            auto [a, b] = unix_datagram::pair();
            auto reader = aspen::spawn([](unix_datagram* s) -> task<void> {
                char c;
                (void)co_await s->recv_from(&c, 1);
            }(&a));
            co_await aspen::sleep(5ms);
            co_await aspen_test::abort_and_join(reader);
            try {
                char c;
                (void)co_await aspen::timeout(5ms, a.recv(&c, 1));
            } catch (const aspen::timed_out&) {
                o.timed_out = true;
            }
            co_await b.send("after");
            char buf[16];
            std::size_t n = co_await a.recv(buf, sizeof buf);
            o.after.assign(buf, n);
            // The receive exists (holding its own reference to the socket's
            // state) before the socket is destroyed, polled or not.
            auto doomed = std::make_unique<unix_datagram>(std::move(a));
            std::atomic<bool> made{false};
            auto waiter = aspen::spawn([](unix_datagram* s, std::atomic<bool>* made) -> task<int> {
                char c;
                aspen::transfer_awaitable op = s->recv(&c, 1);
                // release: the receive (and its reference) exist before the
                // main task, which loads with acquire, destroys the socket.
                made->store(true, std::memory_order_release);
                try {
                    (void)co_await op;
                } catch (const std::system_error& e) {
                    co_return e.code().value();
                }
                co_return 0;
            }(doomed.get(), &made));
            for (int i = 0; i < 10000 && !made.load(std::memory_order_acquire); ++i) co_await aspen::sleep(1ms);
            co_await aspen::sleep(5ms);  // most often it is waiting by now; the test holds either way
            doomed.reset();
            o.closed_errno = co_await waiter;
            co_return o;
        }(),
        "unix datagram cancel");
    EXPECT_TRUE(o.timed_out);
    EXPECT_EQ(o.after, "after");
    EXPECT_EQ(o.closed_errno, ECANCELED);
    EXPECT_EQ(net_test::open_fds(), before);
}

INSTANTIATE_TEST_SUITE_P(Kinds, UnixDatagram, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
