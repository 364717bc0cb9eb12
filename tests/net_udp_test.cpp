// UDP sockets, socket_address parsing and aspen::resolve.
#include "net_util.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <system_error>

using namespace std::chrono_literals;
using aspen::socket_address;
using aspen::task;
using aspen::udp_socket;

namespace {

TEST(SocketAddress, ParsesIpv4AndBracketedIpv6) {
    socket_address a = socket_address::parse("127.0.0.1:8080");
    EXPECT_TRUE(a.is_v4());
    EXPECT_EQ(a.port(), 8080);
    EXPECT_EQ(a.to_string(), "127.0.0.1:8080");
    EXPECT_EQ(a, socket_address::loopback_v4(8080));
    socket_address b = socket_address::parse("[::1]:80");
    EXPECT_TRUE(b.is_v6());
    EXPECT_EQ(b.port(), 80);
    EXPECT_EQ(b.to_string(), "[::1]:80");
    EXPECT_EQ(b, socket_address::loopback_v6(80));
    EXPECT_EQ(socket_address::parse("[fe80::1%1]:443").to_string(), "[fe80::1%1]:443");
    EXPECT_EQ(socket_address::parse("0.0.0.0:0"), socket_address());
    EXPECT_EQ(socket_address::parse("10.1.2.3", 9).to_string(), "10.1.2.3:9");
    EXPECT_EQ(socket_address::parse("::", 9), socket_address::any_v6(9));
    // to_string reads back.
    for (const char* t : {"1.2.3.4:65535", "[2001:db8::42]:1", "[::ffff:1.2.3.4]:7"})
        EXPECT_EQ(socket_address::parse(socket_address::parse(t).to_string()).to_string(), t);
}

TEST(SocketAddress, KnowsLoopbackAddresses) {
    for (const char* t : {"127.0.0.1:1", "127.255.0.9:1", "[::1]:1", "[::ffff:127.0.0.2]:1"})
        EXPECT_TRUE(socket_address::parse(t).is_loopback()) << t;
    for (const char* t : {"128.0.0.1:1", "10.0.0.1:1", "0.0.0.0:1", "[::]:1", "[::2]:1", "[::ffff:10.0.0.1]:1",
                          "[fe80::1%1]:1"})
        EXPECT_FALSE(socket_address::parse(t).is_loopback()) << t;
    EXPECT_TRUE(socket_address::loopback_v4(0).is_loopback());
    EXPECT_TRUE(socket_address::loopback_v6(0).is_loopback());
    EXPECT_FALSE(socket_address().is_loopback());
}

TEST(SocketAddress, BadTextThrowsInvalidArgumentQuotingIt) {
    struct bad_case {
        const char* text;
        const char* reason;
    };
    for (bad_case c : {bad_case{"127.0.0.1", "missing ':port'"}, bad_case{"127.0.0.1:", "missing port"},
                       bad_case{"127.0.0.1:65536", "0 to 65535"}, bad_case{"127.0.0.1:8x", "0 to 65535"},
                       bad_case{"::1:80", "needs brackets"}, bad_case{"[::1]80", "expected ':port'"},
                       bad_case{"[::1:80", "missing ']'"}, bad_case{"[1.2.3.4]:80", "IPv6 addresses only"},
                       bad_case{"localhost:80", "not a numeric"}, bad_case{"256.1.1.1:80", "not a numeric"},
                       bad_case{"", "missing ':port'"}, bad_case{"[fe80::1%]:80", "not a numeric"}}) {
        try {
            socket_address::parse(c.text);
            ADD_FAILURE() << "parsed: " << c.text;
        } catch (const std::invalid_argument& e) {
            std::string msg = e.what();
            EXPECT_NE(msg.find(std::string("\"") + c.text + "\""), std::string::npos) << msg;
            EXPECT_NE(msg.find(c.reason), std::string::npos) << msg;
        }
    }
    EXPECT_THROW(socket_address::parse("1.2.3.4%eth0", 1), std::invalid_argument);
    EXPECT_THROW(socket_address::parse("fe80::1%no-such-interface-here", 1), std::invalid_argument);
}

TEST(Udp, SendToRecvFromAndConnectedSendRecv) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "udp", [&] {
        rt.block_on([]() -> task<void> {
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            udp_socket b = udp_socket::bind(socket_address::loopback_v4(0));
            EXPECT_EQ(co_await a.send_to("ping", b.local_addr()), 4u);
            char buf[16];
            udp_socket::received r = co_await b.recv_from(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, r.size), "ping");
            EXPECT_EQ(r.peer, a.local_addr());
            EXPECT_FALSE(r.truncated);
            // Truncation is reported; the datagram is consumed whole.
            co_await a.send_to("0123456789", b.local_addr());
            r = co_await b.recv_from(buf, 4);
            EXPECT_EQ(r.size, 4u);
            EXPECT_TRUE(r.truncated);
            EXPECT_EQ(std::string(buf, 4), "0123");
            // Connected: send/recv, peer_addr.
            a.connect(b.local_addr());
            b.connect(a.local_addr());
            EXPECT_EQ(a.peer_addr(), b.local_addr());
            EXPECT_EQ(co_await a.send("pong"), 4u);
            std::size_t n = co_await b.recv(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, n), "pong");
            // Many datagrams, each checked, received in a separate task.
            constexpr int count = 200;
            auto receiver = aspen::spawn([](udp_socket& b) -> task<int> {
                int ok = 0;
                char buf[16];
                for (int i = 0; i < count; ++i) {
                    std::size_t n = co_await b.recv(buf, sizeof buf);
                    if (std::string(buf, n) == std::to_string(i)) ++ok;
                }
                co_return ok;
            }(b));
            for (int i = 0; i < count; ++i) {
                co_await a.send(std::to_string(i));
                if (i % 32 == 31) co_await aspen::sleep(1ms);  // stay far below the receive buffer
            }
            EXPECT_EQ(co_await receiver, count);
        }());
    });
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
}

// peek_from reports the datagram (sender, truncation) and leaves it queued.
TEST(Udp, PeekFromLeavesTheDatagramQueued) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "udp peek", [&] {
        rt.block_on([]() -> task<void> {
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            udp_socket b = udp_socket::bind(socket_address::loopback_v4(0));
            auto peeker = aspen::spawn([](udp_socket& b) -> task<udp_socket::received> {
                char small[2];
                co_return co_await b.peek_from(small, sizeof small);  // waits for the datagram
            }(b));
            co_await aspen::sleep(5ms);
            EXPECT_EQ(co_await a.send_to("hello", b.local_addr()), 5u);
            udp_socket::received p = co_await peeker;
            EXPECT_EQ(p.size, 2u);
            EXPECT_TRUE(p.truncated);
            EXPECT_EQ(p.peer, a.local_addr());
            char buf[16];
            p = co_await b.peek_from(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, p.size), "hello");
            EXPECT_FALSE(p.truncated);
            udp_socket::received r = co_await b.recv_from(buf, sizeof buf);  // still there
            EXPECT_EQ(std::string(buf, r.size), "hello");
            EXPECT_EQ(co_await a.send_to("next", b.local_addr()), 4u);
            r = co_await b.recv_from(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, r.size), "next");  // the peeked one was consumed once
        }());
    });
}

// read_with runs recvmmsg: several datagrams in one call.
TEST(Udp, ReadWithRunsRecvmmsg) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "udp recvmmsg", [&] {
        rt.block_on([]() -> task<void> {
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            udp_socket b = udp_socket::bind(socket_address::loopback_v4(0));
            for (const char* m : {"one", "two", "three"}) co_await a.send_to(m, b.local_addr());
            std::string got;
            int received = 0;
            while (received < 3) {
                char bufs[3][16];
                iovec iov[3];
                mmsghdr msgs[3] = {};
                for (int i = 0; i < 3; ++i) {
                    iov[i] = {bufs[i], sizeof bufs[i]};
                    msgs[i].msg_hdr.msg_iov = &iov[i];
                    msgs[i].msg_hdr.msg_iovlen = 1;
                }
                int n = co_await b.read_with([&](int fd) { return ::recvmmsg(fd, msgs, 3, 0, nullptr); });
                for (int i = 0; i < n; ++i) got += std::string(bufs[i], msgs[i].msg_len) + ",";
                received += n;
            }
            EXPECT_EQ(got, "one,two,three,");
        }());
    });
}

TEST(Udp, BroadcastAndTtlOptions) {
    udp_socket s = udp_socket::bind(socket_address::loopback_v4(0));
    EXPECT_FALSE(s.broadcast());
    s.set_broadcast(true);
    EXPECT_TRUE(s.broadcast());
    s.set_ttl(9);
    EXPECT_EQ(s.ttl(), 9u);
    EXPECT_THROW(s.set_ttl(0), std::system_error);
    udp_socket v6 = udp_socket::bind(socket_address::loopback_v6(0));
    v6.set_ttl(200);
    EXPECT_EQ(v6.ttl(), 200u);
    EXPECT_THROW(udp_socket().set_broadcast(true), std::logic_error);
}

// A group joined on the loopback interface gets what a socket sends there
// from 127.0.0.1, every datagram in order; after leaving it, nothing more
// (the next datagram the receiver gets is a unicast marker sent after the
// group datagram).
TEST(UdpMulticast, JoinedGroupReceivesLeftGroupDoesNot) {
    aspen::runtime rt(aspen_test::workers(2));
    udp_socket rx = udp_socket::bind(socket_address::any_v4(0));
    const std::uint16_t port = rx.local_addr().port();
    const std::string group = "239.255.77." + std::to_string(1 + ::getpid() % 250);
    try {
        rx.join_multicast_v4(group, "127.0.0.1");
    } catch (const std::system_error& e) {
        if (e.code().value() == ENODEV) GTEST_SKIP() << "this machine's loopback takes no multicast: " << e.what();
        throw;
    }
    aspen_test::within(30s, "udp multicast", [&] {
        rt.block_on([](udp_socket& rx, std::string group, std::uint16_t port) -> task<void> {
            udp_socket tx = udp_socket::bind(socket_address::loopback_v4(0));
            tx.set_multicast_interface_v4("127.0.0.1");
            EXPECT_TRUE(tx.multicast_loop_v4());  // the default
            const socket_address to = socket_address::parse(group, port);
            constexpr int count = 50;
            int in_order = 0;
            char buf[32];
            for (int i = 0; i < count; ++i) {
                co_await tx.send_to(std::to_string(i), to);
                udp_socket::received r = co_await rx.recv_from(buf, sizeof buf);
                if (std::string(buf, r.size) == std::to_string(i) && r.peer == tx.local_addr()) ++in_order;
            }
            EXPECT_EQ(in_order, count);
            rx.leave_multicast_v4(group, "127.0.0.1");
            co_await tx.send_to("to the group", to);
            co_await tx.send_to("marker", socket_address::loopback_v4(port));
            udp_socket::received r = co_await rx.recv_from(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, r.size), "marker");
        }(rx, group, port));
    });
}

TEST(UdpMulticast, OptionsAndBadInput) {
    udp_socket s = udp_socket::bind(socket_address::any_v4(0));
    s.set_multicast_loop_v4(false);
    EXPECT_FALSE(s.multicast_loop_v4());
    s.set_multicast_loop_v4(true);
    EXPECT_TRUE(s.multicast_loop_v4());
    EXPECT_EQ(s.multicast_ttl_v4(), 1u);  // the default
    s.set_multicast_ttl_v4(0);
    EXPECT_EQ(s.multicast_ttl_v4(), 0u);
    s.set_multicast_ttl_v4(255);
    EXPECT_EQ(s.multicast_ttl_v4(), 255u);
    try {
        s.set_multicast_ttl_v4(256);
        ADD_FAILURE() << "a TTL of 256 was taken";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EINVAL);
        EXPECT_NE(std::string(e.what()).find("0 to 255"), std::string::npos) << e.what();
    }
    auto message_of = [&](auto f) -> std::string {
        try {
            f();
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
        return "(nothing thrown)";
    };
    EXPECT_NE(message_of([&] { s.join_multicast_v4("10.0.0.1"); }).find("not a multicast group"), std::string::npos);
    EXPECT_NE(message_of([&] { s.join_multicast_v4("ff02::1"); }).find("is not IPv4"), std::string::npos);
    EXPECT_NE(message_of([&] { s.join_multicast_v4("239.1.1.1", "::1"); }).find("is not IPv4"), std::string::npos);
    EXPECT_NE(message_of([&] { s.join_multicast_v4("not an address"); }).find("not an address"), std::string::npos);
    EXPECT_NE(message_of([&] { s.join_multicast_v6("239.1.1.1"); }).find("is not IPv6"), std::string::npos);
    EXPECT_NE(message_of([&] { s.join_multicast_v6("fe80::1"); }).find("not a multicast group"), std::string::npos);
    EXPECT_THROW(s.set_multicast_interface_v4("nonsense"), std::invalid_argument);
    EXPECT_THROW(udp_socket().join_multicast_v4("239.1.1.1"), std::logic_error);
    udp_socket v6;
    try {
        v6 = udp_socket::bind(socket_address::loopback_v6(0));
    } catch (const std::system_error&) {
        return;  // no IPv6 loopback on this machine
    }
    v6.set_multicast_loop_v6(false);
    EXPECT_FALSE(v6.multicast_loop_v6());
    v6.set_multicast_loop_v6(true);
    EXPECT_TRUE(v6.multicast_loop_v6());
}

TEST(Udp, Ipv6AndConnectedRefusal) {
    aspen::runtime rt(aspen_test::workers(1));
    aspen_test::within(30s, "udp v6", [&] {
        rt.block_on([]() -> task<void> {
            udp_socket a = udp_socket::bind(socket_address::loopback_v4(0));
            // A connected socket learns of ICMP port unreachable: the next
            // receive reports ECONNREFUSED.
            socket_address closed = udp_socket::bind(socket_address::loopback_v4(0)).local_addr();
            a.connect(closed);
            co_await a.send("x");
            char buf[4];
            try {
                co_await a.recv(buf, sizeof buf);
                ADD_FAILURE() << "recv from a closed port succeeded";
            } catch (const std::system_error& e) {
                EXPECT_EQ(e.code(), std::errc::connection_refused) << e.what();
            }
            udp_socket v6;
            try {
                v6 = udp_socket::bind(socket_address::loopback_v6(0));
            } catch (const std::system_error&) {
                co_return;  // no IPv6 loopback on this machine
            }
            udp_socket w6 = udp_socket::bind(socket_address::loopback_v6(0));
            co_await v6.send_to("six", w6.local_addr());
            auto r = co_await w6.recv_from(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, r.size), "six");
            EXPECT_TRUE(r.peer.is_v6());
        }());
    });
}

TEST(Resolve, NumericAtOnceNamesOnAThreadErrorsNameTheHost) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(60s, "resolve", [&] {
        rt.block_on([]() -> task<void> {
            auto numeric = co_await aspen::resolve("::1", 53);
            EXPECT_EQ(numeric, std::vector<socket_address>{socket_address::loopback_v6(53)});
            auto local = co_await aspen::resolve("localhost", 8080);
            EXPECT_FALSE(local.empty());
            for (const socket_address& a : local) {
                EXPECT_EQ(a.port(), 8080);
                EXPECT_TRUE(a == socket_address::loopback_v4(8080) || a == socket_address::loopback_v6(8080))
                    << a.to_string();
            }
            try {
                co_await aspen::resolve("no-such-host.invalid", 80);
                ADD_FAILURE() << "resolved an .invalid name";
            } catch (const std::system_error& e) {
                EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos) << e.what();
            }
            EXPECT_THROW(co_await aspen::resolve("", 80), std::invalid_argument);
        }());
    });
}

}  // namespace
