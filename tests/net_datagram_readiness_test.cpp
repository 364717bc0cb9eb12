// The readiness API of the datagram sockets (udp_socket, unix_datagram):
// readable() + try_recv_from gets the datagram and its sender; on an empty
// socket try_recv_from gives nullopt and the next readable() waits until a
// datagram is sent (a flag the sender sets before sending proves it, no
// clock); try_send_to / try_send / try_recv (an empty datagram is one);
// a readable() + try_recv_from loop receives exactly the N datagrams sent;
// a unix try_send_to to a full receiver gives nullopt and recovers; misuse.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

using namespace std::chrono_literals;
using aspen::socket_address;
using aspen::task;
using aspen::udp_socket;
using aspen::unix_datagram;

namespace {

class DatagramReadiness : public ::testing::TestWithParam<int> {};

std::string abstract_name(const char* what, int kind) {
    return "@aspen-dgram-ready-" + std::to_string(::getpid()) + "-" + std::to_string(kind) + "-" + what;
}

// Datagram i of a counted run: its index, so a lost, duplicated or
// reordered one is caught.
std::string numbered(std::size_t i) { return "n" + std::to_string(i); }

// readable() until try_recv_from gives a datagram (a report can be stale:
// bounded retries).
template <class Socket, class Received>
task<std::optional<Received>> recv_by_readiness(Socket& s, char* buf, std::size_t size) {
    for (int i = 0; i < 1000; ++i) {
        co_await s.readable();
        std::optional<Received> r = s.try_recv_from(buf, size);
        if (r) co_return r;
    }
    co_return std::nullopt;
}

// Sends `what` after a moment, setting *sent just before: a readable()
// that completes with the flag clear completed without a datagram.
template <class Send>
task<void> send_later(std::atomic<bool>* sent, Send send) {
    co_await aspen::sleep(20ms);
    // seq_cst: the receiver reads it after its wake, which the kernel and
    // the scheduler order after this; the strongest order keeps the test's
    // claim independent of how.
    sent->store(true, std::memory_order_seq_cst);
    co_await send();
}

// ---- udp_socket ----------------------------------------------------------

TEST_P(DatagramReadiness, UdpReadableThenTryRecvFromGetsTheDatagramAndItsSender) {
    struct outcome {
        std::optional<udp_socket::received> r;
        std::string got;
        socket_address sender;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            udp_socket b = udp_socket::bind(socket_address::loopback_v4(0));
            o.sender = a.local_addr();
            std::size_t n = co_await a.send_to("hello", b.local_addr());
            EXPECT_EQ(n, 5u);
            char buf[64];
            o.r = co_await recv_by_readiness<udp_socket, udp_socket::received>(b, buf, sizeof buf);
            if (o.r) o.got.assign(buf, o.r->size);
            // A datagram longer than the buffer: truncated, and said so.
            n = co_await a.send_to("0123456789", b.local_addr());
            std::optional<udp_socket::received> t =
                co_await recv_by_readiness<udp_socket, udp_socket::received>(b, buf, 4);
            EXPECT_TRUE(t && t->truncated && t->size == 4);
            co_return o;
        }(),
        "udp readable + try_recv_from");
    ASSERT_TRUE(o.r);
    EXPECT_EQ(o.got, "hello");
    EXPECT_EQ(o.r->peer, o.sender);
    EXPECT_FALSE(o.r->truncated);
}

TEST_P(DatagramReadiness, UdpEmptySocketGivesNulloptAndReadableWaitsForADatagram) {
    struct outcome {
        std::optional<udp_socket::received> unregistered, drained;
        bool flag_at_first_wake = false, flag_at_second_wake = false;
        std::string first, second;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            udp_socket b = udp_socket::bind(socket_address::loopback_v4(0));
            socket_address to = b.local_addr();
            char buf[64];
            // No operation has registered b yet: the syscall decides.
            o.unregistered = b.try_recv_from(buf, sizeof buf);
            for (int round = 0; round < 2; ++round) {
                std::atomic<bool> sent{false};
                auto send = [&a, &to, round]() -> task<void> {
                    (void)co_await a.send_to(round == 0 ? "first" : "second", to);
                };
                auto sender = aspen::spawn(send_later(&sent, send));
                co_await b.readable();
                (round == 0 ? o.flag_at_first_wake : o.flag_at_second_wake) = sent.load(std::memory_order_seq_cst);
                std::optional<udp_socket::received> r = b.try_recv_from(buf, sizeof buf);
                if (r) (round == 0 ? o.first : o.second).assign(buf, r->size);
                co_await sender;
                // Empty again, and b is registered now: nullopt clears the
                // cached readiness, so the next round's readable() waits.
                if (round == 0) o.drained = b.try_recv_from(buf, sizeof buf);
            }
            co_return o;
        }(),
        "udp empty socket");
    EXPECT_EQ(o.unregistered, std::nullopt);
    EXPECT_EQ(o.drained, std::nullopt);
    EXPECT_TRUE(o.flag_at_first_wake) << "readable() completed before anything was sent (unregistered socket)";
    EXPECT_TRUE(o.flag_at_second_wake) << "readable() completed on a drained socket: stale readiness kept";
    EXPECT_EQ(o.first, "first");
    EXPECT_EQ(o.second, "second");
}

TEST_P(DatagramReadiness, UdpTrySendToTrySendAndTryRecv) {
    struct outcome {
        std::optional<std::size_t> sent_to, sent, sent_empty, got, got_empty;
        std::string via_send_to, via_send;
        int unconnected_err = 0;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            udp_socket b = udp_socket::bind(socket_address::loopback_v4(0));
            // Sending to an unconnected socket's peer: the kernel's error.
            try {
                (void)a.try_send("x");
            } catch (const std::system_error& e) {
                o.unconnected_err = e.code().value();
            }
            co_await a.writable();
            o.sent_to = a.try_send_to("to-b", b.local_addr());
            char buf[64];
            udp_socket::received r = co_await b.recv_from(buf, sizeof buf);
            o.via_send_to.assign(buf, r.size);
            a.connect(b.local_addr());
            b.connect(a.local_addr());
            co_await a.writable();
            o.sent = a.try_send("connected");
            o.sent_empty = a.try_send("", 0);  // a datagram of its own
            for (int i = 0; i < 1000 && !o.got; ++i) {
                co_await b.readable();
                o.got = b.try_recv(buf, sizeof buf);
            }
            if (o.got) o.via_send.assign(buf, *o.got);
            for (int i = 0; i < 1000 && !o.got_empty; ++i) {
                co_await b.readable();
                o.got_empty = b.try_recv(buf, sizeof buf);
            }
            co_return o;
        }(),
        "udp try_send");
    EXPECT_EQ(o.unconnected_err, EDESTADDRREQ);
    EXPECT_EQ(o.sent_to, std::optional<std::size_t>(4));
    EXPECT_EQ(o.via_send_to, "to-b");
    EXPECT_EQ(o.sent, std::optional<std::size_t>(9));
    EXPECT_EQ(o.via_send, "connected");
    EXPECT_EQ(o.sent_empty, std::optional<std::size_t>(0));
    EXPECT_EQ(o.got_empty, std::optional<std::size_t>(0));
}

struct count_outcome {
    std::size_t received = 0, out_of_order = 0, stale = 0;
    std::optional<std::size_t> extra;  // after the last one: must be nullopt
};

// The receiver's count, shared with the sender for its window.
struct progress {
    std::atomic<std::size_t> received{0};
};

// Receives `total` datagrams with readable() + try_recv_from, draining
// each report until nullopt, and checks their order.
template <class Socket, class Received>
task<void> count_by_readiness(Socket& s, std::size_t total, count_outcome* o, progress* p) {
    char buf[64];
    for (std::size_t spins = 0; o->received < total && spins < 10 * total + 1000; ++spins) {
        co_await s.readable();
        for (std::size_t k = 0; k < total; ++k) {
            std::optional<Received> r = s.try_recv_from(buf, sizeof buf);
            if (!r) {
                if (k == 0) ++o->stale;
                break;
            }
            if (std::string(buf, r->size) != numbered(o->received)) ++o->out_of_order;
            ++o->received;
            // release: the sender's acquire load sees the count (only a
            // window: nothing else is published).
            p->received.store(o->received, std::memory_order_release);
        }
    }
    o->extra = std::nullopt;
    std::optional<Received> r = s.try_recv_from(buf, sizeof buf);
    if (r) o->extra = r->size;
}

// At most `window` datagrams ahead of the receiver, so a UDP receive
// buffer never overflows (the kernel would drop, and the count would be
// short for a reason that is not the one tested).
constexpr std::size_t window = 64;

template <class Send>
task<void> send_windowed(std::size_t total, progress* p, Send send) {
    for (std::size_t i = 0; i < total; ++i) {
        // acquire: pairs with the receiver's release store.
        for (int w = 0; w < 60000 && i >= p->received.load(std::memory_order_acquire) + window; ++w)
            co_await aspen::sleep(1ms);
        co_await send(i);
    }
}

TEST_P(DatagramReadiness, UdpReadinessLoopReceivesExactlyTheDatagramsSent) {
    constexpr std::size_t total = 2000;
    count_outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<count_outcome> {
            count_outcome o;
            progress p;
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            udp_socket b = udp_socket::bind(socket_address::loopback_v4(0));
            socket_address to = b.local_addr();
            auto send = [&a, &to](std::size_t i) -> task<void> {
                std::string m = numbered(i);
                (void)co_await a.send_to(m, to);
            };
            auto sender = aspen::spawn(send_windowed(total, &p, send));
            co_await count_by_readiness<udp_socket, udp_socket::received>(b, total, &o, &p);
            co_await sender;
            co_return o;
        }(),
        "udp counted");
    EXPECT_EQ(o.received, total);
    EXPECT_EQ(o.out_of_order, 0u);
    EXPECT_EQ(o.extra, std::nullopt);
}

// ---- unix_datagram -------------------------------------------------------

TEST_P(DatagramReadiness, UnixReadableThenTryRecvFromGetsTheDatagramAndItsSenderPath) {
    const std::string server_path = abstract_name("server", GetParam());
    const std::string client_path = abstract_name("client", GetParam());
    struct outcome {
        std::optional<unix_datagram::received> r;
        std::string got;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        [](std::string server_path, std::string client_path) -> task<outcome> {
            outcome o;
            unix_datagram server = unix_datagram::bind(server_path);
            unix_datagram client = unix_datagram::bind(client_path);
            std::size_t n = co_await client.send_to("hello", server_path);
            EXPECT_EQ(n, 5u);
            char buf[64];
            o.r = co_await recv_by_readiness<unix_datagram, unix_datagram::received>(server, buf, sizeof buf);
            if (o.r) o.got.assign(buf, o.r->size);
            co_return o;
        }(server_path, client_path),
        "unix readable + try_recv_from");
    ASSERT_TRUE(o.r);
    EXPECT_EQ(o.got, "hello");
    EXPECT_EQ(o.r->path, client_path);
    EXPECT_FALSE(o.r->truncated);
}

TEST_P(DatagramReadiness, UnixEmptySocketGivesNulloptAndReadableWaitsForADatagram) {
    const std::string server_path = abstract_name("server", GetParam());
    struct outcome {
        std::optional<unix_datagram::received> unregistered, drained;
        bool flag_at_first_wake = false, flag_at_second_wake = false;
        std::string first, second;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        [](std::string server_path) -> task<outcome> {
            outcome o;
            unix_datagram server = unix_datagram::bind(server_path);
            unix_datagram client = unix_datagram::unbound();
            char buf[64];
            o.unregistered = server.try_recv_from(buf, sizeof buf);
            for (int round = 0; round < 2; ++round) {
                std::atomic<bool> sent{false};
                auto send = [&client, &server_path, round]() -> task<void> {
                    (void)co_await client.send_to(round == 0 ? "first" : "second", server_path);
                };
                auto sender = aspen::spawn(send_later(&sent, send));
                co_await server.readable();
                (round == 0 ? o.flag_at_first_wake : o.flag_at_second_wake) = sent.load(std::memory_order_seq_cst);
                std::optional<unix_datagram::received> r = server.try_recv_from(buf, sizeof buf);
                if (r) (round == 0 ? o.first : o.second).assign(buf, r->size);
                co_await sender;
                if (round == 0) o.drained = server.try_recv_from(buf, sizeof buf);
            }
            co_return o;
        }(server_path),
        "unix empty socket");
    EXPECT_EQ(o.unregistered, std::nullopt);
    EXPECT_EQ(o.drained, std::nullopt);
    EXPECT_TRUE(o.flag_at_first_wake) << "readable() completed before anything was sent (unregistered socket)";
    EXPECT_TRUE(o.flag_at_second_wake) << "readable() completed on a drained socket: stale readiness kept";
    EXPECT_EQ(o.first, "first");
    EXPECT_EQ(o.second, "second");
}

TEST_P(DatagramReadiness, UnixTrySendToTrySendAndAFullReceiver) {
    const std::string server_path = abstract_name("server", GetParam());
    struct outcome {
        std::optional<std::size_t> sent_to, sent, got;
        std::string via_send_to, via_send, sender_path;
        std::size_t queued_before_full = 0;
        bool full_seen = false;
        std::optional<std::size_t> after_room;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        [](std::string server_path) -> task<outcome> {
            outcome o;
            unix_datagram server = unix_datagram::bind(server_path);
            unix_datagram client = unix_datagram::unbound();
            co_await client.writable();
            o.sent_to = client.try_send_to("to-server", server_path);
            char buf[64];
            std::optional<unix_datagram::received> r =
                co_await recv_by_readiness<unix_datagram, unix_datagram::received>(server, buf, sizeof buf);
            if (r) {
                o.via_send_to.assign(buf, r->size);
                o.sender_path = r->path;
            }
            // Fill the receiver's queue: try_send_to says "not now" instead
            // of waiting; once the receiver takes one, it sends again.
            for (std::size_t i = 0; i < 100000; ++i) {
                std::optional<std::size_t> n = client.try_send_to("fill", server_path);
                if (!n) {
                    o.full_seen = true;
                    break;
                }
                ++o.queued_before_full;
            }
            std::optional<unix_datagram::received> one = server.try_recv_from(buf, sizeof buf);
            EXPECT_TRUE(one.has_value());
            o.after_room = client.try_send_to("room", server_path);
            // Connected pair: try_send / try_recv.
            auto [x, y] = unix_datagram::pair();
            co_await x.writable();
            o.sent = x.try_send("paired");
            for (int i = 0; i < 1000 && !o.got; ++i) {
                co_await y.readable();
                o.got = y.try_recv(buf, sizeof buf);
            }
            if (o.got) o.via_send.assign(buf, *o.got);
            co_return o;
        }(server_path),
        "unix try_send");
    EXPECT_EQ(o.sent_to, std::optional<std::size_t>(9));
    EXPECT_EQ(o.via_send_to, "to-server");
    EXPECT_EQ(o.sender_path, "");  // unbound sender
    EXPECT_TRUE(o.full_seen) << "the receiver's queue never filled";
    EXPECT_GT(o.queued_before_full, 0u);
    EXPECT_EQ(o.after_room, std::optional<std::size_t>(4));
    EXPECT_EQ(o.sent, std::optional<std::size_t>(6));
    EXPECT_EQ(o.via_send, "paired");
}

TEST_P(DatagramReadiness, UnixReadinessLoopReceivesExactlyTheDatagramsSent) {
    constexpr std::size_t total = 2000;
    const std::string server_path = abstract_name("counted", GetParam());
    count_outcome o = aspen_test::run_on(
        GetParam(),
        [](std::string server_path) -> task<count_outcome> {
            count_outcome o;
            progress p;
            unix_datagram server = unix_datagram::bind(server_path);
            unix_datagram client = unix_datagram::unbound();
            auto send = [&client, &server_path](std::size_t i) -> task<void> {
                std::string m = numbered(i);
                (void)co_await client.send_to(m, server_path);
            };
            auto sender = aspen::spawn(send_windowed(total, &p, send));
            co_await count_by_readiness<unix_datagram, unix_datagram::received>(server, total, &o, &p);
            co_await sender;
            co_return o;
        }(server_path),
        "unix counted");
    EXPECT_EQ(o.received, total);
    EXPECT_EQ(o.out_of_order, 0u);
    EXPECT_EQ(o.extra, std::nullopt);
}

// ---- misuse and errors, outside a runtime ---------------------------------

TEST(DatagramReadinessMisuse, EmptySocketsAndBadPathsThrow) {
    udp_socket u = udp_socket::bind(socket_address::loopback_v4(0));
    udp_socket moved = std::move(u);
    char buf[8];
    EXPECT_THROW((void)u.try_recv_from(buf, sizeof buf), std::logic_error);
    EXPECT_THROW((void)u.try_send_to("x", moved.local_addr()), std::logic_error);
    EXPECT_THROW((void)u.try_recv(buf, sizeof buf), std::logic_error);
    EXPECT_THROW((void)u.try_send("x"), std::logic_error);
    EXPECT_THROW((void)u.readable(), std::logic_error);
    EXPECT_THROW((void)u.writable(), std::logic_error);
    // Works outside a runtime (no registration: the syscall decides).
    EXPECT_EQ(moved.try_send_to("self", moved.local_addr()), std::optional<std::size_t>(4));
    std::optional<udp_socket::received> r = moved.try_recv_from(buf, sizeof buf);
    ASSERT_TRUE(r);
    EXPECT_EQ(std::string(buf, r->size), "self");
    EXPECT_EQ(moved.try_recv_from(buf, sizeof buf), std::nullopt);

    unix_datagram d;
    EXPECT_THROW((void)d.try_recv_from(buf, sizeof buf), std::logic_error);
    EXPECT_THROW((void)d.try_send_to("x", "@nobody"), std::logic_error);
    EXPECT_THROW((void)d.readable(), std::logic_error);
    unix_datagram e = unix_datagram::unbound();
    EXPECT_THROW((void)e.try_send_to("x", ""), std::invalid_argument);
    EXPECT_THROW((void)e.try_send_to("x", std::string(200, 'p')), std::invalid_argument);
    // No socket at that name: the kernel's error, not "not now".
    try {
        (void)e.try_send_to("x", "@aspen-dgram-ready-nobody-" + std::to_string(::getpid()));
        ADD_FAILURE() << "sent to a name with no socket";
    } catch (const std::system_error& err) {
        EXPECT_TRUE(err.code().value() == ECONNREFUSED || err.code().value() == ENOENT) << err.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, DatagramReadiness, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
