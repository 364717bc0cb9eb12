// tcp_socket: two SO_REUSEPORT listeners on one port both accept, a busy
// port refuses a second bind (EADDRINUSE), options and buffer sizes read
// back (and reach the connected stream), bind-then-connect keeps the
// chosen local port, a refused connect (ECONNREFUSED), IPv6 on [::1],
// misuse (moved-from, consumed, family mismatch) and descriptor counts.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using aspen::socket_address;
using aspen::task;
using aspen::tcp_listener;
using aspen::tcp_socket;
using aspen::tcp_stream;

namespace {

class TcpSocket : public ::testing::TestWithParam<int> {};

bool has_ipv6_loopback() {
    try {
        tcp_socket probe = tcp_socket::new_v6();
        probe.bind(socket_address::loopback_v6(0));
        return true;
    } catch (const std::system_error&) {
        return false;
    }
}

int recv_buffer_of(int fd) {
    int v = 0;
    socklen_t len = sizeof v;
    ::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len);
    return v;
}

// Accepts until aborted, counting; keeps the connections open.
task<void> accept_counting(tcp_listener& l, std::atomic<int>* count) {
    std::vector<tcp_stream> kept;
    for (int i = 0; i < 1000; ++i) {
        tcp_stream s = co_await l.accept();
        kept.push_back(std::move(s));
        // relaxed: only a count; the test reads it after the connects and
        // the sum is re-read until it is complete.
        count->fetch_add(1, std::memory_order_relaxed);
    }
}

// Two listeners with SO_REUSEPORT on one port: the kernel spreads 64
// connections between them by a hash of each connection, so both accept
// some (all 64 on one side has probability 2^-63).
TEST_P(TcpSocket, TwoReuseportListenersOnOnePortBothAccept) {
    struct counts {
        int a = 0, b = 0;
        bool reuseport_read_back = false;
    };
    constexpr int connections = 64;
    counts c = aspen_test::run_on(
        GetParam(),
        []() -> task<counts> {
            counts c;
            tcp_socket a = tcp_socket::new_v4();
            a.set_reuseport(true);
            c.reuseport_read_back = a.reuseport();
            a.bind(socket_address::loopback_v4(0));
            socket_address addr = a.local_addr();
            tcp_socket b = tcp_socket::new_v4();
            b.set_reuseport(true);
            b.bind(addr);
            tcp_listener la = std::move(a).listen(128);
            tcp_listener lb = std::move(b).listen(128);
            EXPECT_EQ(la.local_addr(), lb.local_addr());
            std::atomic<int> na{0}, nb{0};
            auto ha = aspen::spawn(accept_counting(la, &na));
            auto hb = aspen::spawn(accept_counting(lb, &nb));
            std::vector<tcp_stream> clients;
            for (int i = 0; i < connections; ++i) {
                tcp_stream s = co_await tcp_stream::connect(addr);
                clients.push_back(std::move(s));
            }
            // Every connection is in one of the two accept queues now; wait
            // (bounded; the watchdog fails a hang) until both drained them.
            for (int i = 0; i < 60000; ++i) {
                if (na.load(std::memory_order_relaxed) + nb.load(std::memory_order_relaxed) >= connections) break;
                co_await aspen::sleep(1ms);
            }
            co_await aspen_test::abort_and_join(ha);
            co_await aspen_test::abort_and_join(hb);
            c.a = na.load(std::memory_order_relaxed);
            c.b = nb.load(std::memory_order_relaxed);
            co_return c;
        }(),
        "reuseport listeners");
    EXPECT_TRUE(c.reuseport_read_back);
    EXPECT_EQ(c.a + c.b, connections);
    EXPECT_GT(c.a, 0) << "the first listener accepted nothing";
    EXPECT_GT(c.b, 0) << "the second listener accepted nothing";
}

TEST(TcpSocketOptions, BindingAPortInUseFailsWithEaddrinuse) {
    tcp_socket first = tcp_socket::new_v4();
    first.bind(socket_address::loopback_v4(0));
    tcp_listener l = std::move(first).listen(16);
    tcp_socket second = tcp_socket::new_v4();
    EXPECT_FALSE(second.reuseaddr());
    EXPECT_FALSE(second.reuseport());
    try {
        second.bind(l.local_addr());
        ADD_FAILURE() << "bound a port in use";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EADDRINUSE) << e.what();
        std::string msg = e.what();
        EXPECT_NE(msg.find("aspen::tcp_socket::bind"), std::string::npos) << msg;
        EXPECT_NE(msg.find(l.local_addr().to_string()), std::string::npos) << msg;
    }
    // The failed bind left the socket usable: another port binds.
    EXPECT_NO_THROW(second.bind(socket_address::loopback_v4(0)));
    // A listener made by tcp_listener::bind (SO_REUSEADDR) holds its port
    // against a socket with SO_REUSEADDR too: that option is for
    // TIME_WAIT, not for two listeners.
    tcp_socket third = tcp_socket::new_v4();
    third.set_reuseaddr(true);
    EXPECT_TRUE(third.reuseaddr());
    try {
        third.bind(l.local_addr());
        ADD_FAILURE() << "bound a listening port with SO_REUSEADDR";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), EADDRINUSE) << e.what();
    }
}

TEST(TcpSocketOptions, OptionsAndBufferSizesReadBack) {
    tcp_socket s = tcp_socket::new_v4();
    // Linux doubles what it is asked for (the rest is its bookkeeping).
    s.set_send_buffer_size(64 * 1024);
    s.set_recv_buffer_size(96 * 1024);
    EXPECT_GE(s.send_buffer_size(), 64u * 1024);
    EXPECT_GE(s.recv_buffer_size(), 96u * 1024);
    s.set_reuseaddr(true);
    EXPECT_TRUE(s.reuseaddr());
    s.set_reuseaddr(false);
    EXPECT_FALSE(s.reuseaddr());
    s.set_reuseport(true);
    EXPECT_TRUE(s.reuseport());
    s.set_nodelay(true);
    EXPECT_TRUE(s.nodelay());
    s.set_keepalive(true);
    EXPECT_TRUE(s.keepalive());
    s.set_keepalive(false);
    EXPECT_FALSE(s.keepalive());
    EXPECT_THROW(s.set_send_buffer_size(static_cast<std::uint32_t>(INT_MAX) + 1u), std::invalid_argument);
    EXPECT_THROW(s.set_recv_buffer_size(UINT32_MAX), std::invalid_argument);
    // Unbound: the wildcard address, port 0.
    EXPECT_EQ(s.local_addr(), socket_address::any_v4(0));
}

// A socket bound to a port of its choosing connects from that port, and
// what was set before the handshake is still set on the stream.
TEST_P(TcpSocket, BindThenConnectUsesTheChosenLocalPort) {
    struct outcome {
        socket_address chosen, stream_local, server_peer;
        bool nodelay = false;
        int recv_buffer = 0;
        char echoed = 0;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            tcp_listener l = tcp_listener::bind(socket_address::loopback_v4(0));
            auto accepted = aspen::spawn([](tcp_listener& l) -> task<tcp_stream> { co_return co_await l.accept(); }(l));
            tcp_socket c = tcp_socket::new_v4();
            c.set_nodelay(true);
            c.set_recv_buffer_size(128 * 1024);
            c.bind(socket_address::loopback_v4(0));
            o.chosen = c.local_addr();
            socket_address to = l.local_addr();
            tcp_stream s = co_await std::move(c).connect(to);
            EXPECT_FALSE(c.is_open());
            tcp_stream server = co_await accepted;
            o.stream_local = s.local_addr();
            o.server_peer = server.peer_addr();
            o.nodelay = s.nodelay();
            o.recv_buffer = recv_buffer_of(s.native_handle());
            co_await s.write_all("x");
            char in = 0;
            (void)co_await server.read_exact(&in, 1);
            co_await server.write_all(&in, 1);
            (void)co_await s.read_exact(&o.echoed, 1);
            co_return o;
        }(),
        "bind then connect");
    EXPECT_NE(o.chosen.port(), 0);
    EXPECT_EQ(o.stream_local, o.chosen);
    EXPECT_EQ(o.server_peer, o.chosen);
    EXPECT_TRUE(o.nodelay);
    EXPECT_GE(o.recv_buffer, 128 * 1024);
    EXPECT_EQ(o.echoed, 'x');
}

// A port bound by a socket that does not listen refuses connections.
TEST_P(TcpSocket, ConnectToAClosedPortThrowsEconnrefused) {
    struct outcome {
        int err = 0;
        std::string msg;
        bool connected = false;
        socket_address target;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            tcp_socket holder = tcp_socket::new_v4();
            holder.bind(socket_address::loopback_v4(0));
            o.target = holder.local_addr();
            tcp_socket c = tcp_socket::new_v4();
            try {
                tcp_stream s = co_await std::move(c).connect(o.target);
                o.connected = true;
            } catch (const std::system_error& e) {
                o.err = e.code().value();
                o.msg = e.what();
            }
            // With a timeout too (the refusal comes first).
            tcp_socket d = tcp_socket::new_v4();
            try {
                tcp_stream s = co_await std::move(d).connect(o.target, 30s);
                o.connected = true;
            } catch (const std::system_error& e) {
                EXPECT_EQ(e.code().value(), ECONNREFUSED) << e.what();
            }
            co_return o;
        }(),
        "refused connect");
    EXPECT_FALSE(o.connected);
    EXPECT_EQ(o.err, ECONNREFUSED) << o.msg;
    EXPECT_NE(o.msg.find("aspen::tcp_socket::connect to " + o.target.to_string()), std::string::npos) << o.msg;
}

TEST_P(TcpSocket, Ipv6OnLoopback) {
    if (!has_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback here";
    struct outcome {
        socket_address listener, stream_peer, stream_local, server_peer;
        std::string got;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            tcp_socket ls = tcp_socket::new_v6();
            ls.set_reuseaddr(true);
            ls.bind(socket_address::loopback_v6(0));
            tcp_listener l = std::move(ls).listen(16);
            o.listener = l.local_addr();
            auto accepted = aspen::spawn([](tcp_listener& l) -> task<tcp_stream> { co_return co_await l.accept(); }(l));
            tcp_socket c = tcp_socket::new_v6();
            tcp_stream s = co_await std::move(c).connect(o.listener);
            tcp_stream server = co_await accepted;
            o.stream_peer = s.peer_addr();
            o.stream_local = s.local_addr();
            o.server_peer = server.peer_addr();
            co_await s.write_all("six");
            s.shutdown(aspen::shutdown_mode::write);
            std::string got;
            (void)co_await server.read_to_end(got);
            o.got = got;
            co_return o;
        }(),
        "ipv6");
    EXPECT_TRUE(o.listener.is_v6());
    EXPECT_TRUE(o.listener.is_loopback());
    EXPECT_EQ(o.stream_peer, o.listener);
    EXPECT_EQ(o.server_peer, o.stream_local);
    EXPECT_EQ(o.got, "six");
}

TEST(TcpSocketMisuse, EmptySocketsAndFamilyMismatchThrow) {
    const socket_address v4 = socket_address::loopback_v4(1);
    tcp_socket s = tcp_socket::new_v4();
    tcp_socket t = std::move(s);
    EXPECT_TRUE(t.is_open());
    EXPECT_FALSE(s.is_open());
    EXPECT_EQ(s.native_handle(), -1);
    try {
        s.bind(socket_address::loopback_v4(0));
        ADD_FAILURE() << "bind on a moved-from socket";
    } catch (const std::logic_error& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("aspen::tcp_socket::bind"), std::string::npos) << msg;
        EXPECT_NE(msg.find("moved from"), std::string::npos) << msg;
    }
    EXPECT_THROW(s.set_reuseaddr(true), std::logic_error);
    EXPECT_THROW((void)s.reuseport(), std::logic_error);
    EXPECT_THROW((void)s.send_buffer_size(), std::logic_error);
    EXPECT_THROW((void)s.local_addr(), std::logic_error);
    EXPECT_THROW((void)std::move(s).listen(16), std::logic_error);
    // connect checks at the call, before anything is awaited.
    EXPECT_THROW((void)std::move(s).connect(v4), std::logic_error);
    tcp_socket empty;
    EXPECT_THROW(empty.set_nodelay(true), std::logic_error);

    // Consumed by listen: empty afterwards.
    t.bind(socket_address::loopback_v4(0));
    tcp_listener l = std::move(t).listen(16);
    EXPECT_TRUE(l.is_open());
    EXPECT_FALSE(t.is_open());
    EXPECT_THROW((void)t.local_addr(), std::logic_error);
    EXPECT_THROW((void)std::move(t).listen(16), std::logic_error);

    // Consumed by connect at the call (never awaited: the fd goes with the
    // awaitable).
    tcp_socket u = tcp_socket::new_v4();
    {
        auto never_awaited = std::move(u).connect(l.local_addr());
        EXPECT_FALSE(u.is_open());
    }
    EXPECT_THROW((void)std::move(u).connect(l.local_addr()), std::logic_error);

    // The other family's address.
    tcp_socket w = tcp_socket::new_v4();
    try {
        w.bind(socket_address::loopback_v6(0));
        ADD_FAILURE() << "bound a v4 socket to a v6 address";
    } catch (const std::invalid_argument& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("aspen::tcp_socket::bind"), std::string::npos) << msg;
        EXPECT_NE(msg.find("[::1]:0"), std::string::npos) << msg;
        EXPECT_NE(msg.find("IPv4"), std::string::npos) << msg;
    }
    EXPECT_THROW((void)std::move(w).connect(socket_address::loopback_v6(80)), std::invalid_argument);
    EXPECT_TRUE(w.is_open()) << "a refused connect call must not consume the socket";
    EXPECT_THROW((void)std::move(w).listen(-1), std::invalid_argument);
    EXPECT_TRUE(w.is_open());
    if (has_ipv6_loopback()) {
        tcp_socket six = tcp_socket::new_v6();
        EXPECT_THROW(six.bind(socket_address::loopback_v4(0)), std::invalid_argument);
        EXPECT_THROW((void)std::move(six).connect(v4), std::invalid_argument);
    }
}

// Every path (options, failed bind, refused connect, a connect never
// awaited, listen, a connected stream, moves) closes what it opened.
TEST_P(TcpSocket, LeaksNoDescriptor) {
    const int before = net_test::open_fds();
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            for (int round = 0; round < 3; ++round) {
                tcp_socket a = tcp_socket::new_v4();
                a.set_reuseport(true);
                a.set_send_buffer_size(32 * 1024);
                a.bind(socket_address::loopback_v4(0));
                tcp_listener l = std::move(a).listen(16);
                socket_address addr = l.local_addr();

                tcp_socket busy = tcp_socket::new_v4();
                EXPECT_THROW(busy.bind(addr), std::system_error);
                tcp_socket moved = std::move(busy);

                tcp_socket holder = tcp_socket::new_v4();
                holder.bind(socket_address::loopback_v4(0));
                tcp_socket refused = tcp_socket::new_v4();
                try {
                    tcp_stream s = co_await std::move(refused).connect(holder.local_addr());
                    ADD_FAILURE() << "connected to a port nobody listens on";
                } catch (const std::system_error&) {
                }

                tcp_socket idle = tcp_socket::new_v4();
                { auto never_awaited = std::move(idle).connect(addr); }

                auto accepted =
                    aspen::spawn([](tcp_listener& l) -> task<tcp_stream> { co_return co_await l.accept(); }(l));
                tcp_socket c = tcp_socket::new_v4();
                tcp_stream s = co_await std::move(c).connect(addr);
                tcp_stream server = co_await accepted;
                co_await s.write_all("z");
                char in = 0;
                std::size_t n = co_await server.read_exact(&in, 1);
                EXPECT_EQ(n, 1u);
            }
        }(),
        "tcp_socket descriptors");
    EXPECT_EQ(net_test::open_fds(), before);
}

INSTANTIATE_TEST_SUITE_P(Kinds, TcpSocket, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
