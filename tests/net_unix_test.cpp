// Unix domain stream sockets: echo over a path and over an abstract name,
// pairs, paths and credentials, a full backlog, errors, cancellation.
#include "net_util.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
using aspen::unix_listener;
using aspen::unix_stream;

namespace {

using aspen_test::temp_dir;

std::string abstract_name(const char* what) { return "@aspen-test-" + std::to_string(::getpid()) + "-" + what; }

// Echoes until the peer closes.
task<void> echo(unix_stream s) {
    char buf[4096];
    for (;;) {
        std::size_t n = co_await s.read(buf, sizeof buf);
        if (n == 0) co_return;
        co_await s.write_all(buf, n);
    }
}

// `clients` connections to path, each sending messages of growing size
// and checking every byte echoed; returns the bytes checked.
task<std::size_t> echo_round(unix_listener& l, std::string path, std::size_t clients) {
    auto server = aspen::spawn([](unix_listener& l, std::size_t n) -> task<void> {
        std::vector<aspen::join_handle<void>> sessions;
        for (std::size_t i = 0; i < n; ++i) sessions.push_back(aspen::spawn(echo(co_await l.accept())));
        for (auto& h : sessions) co_await h;
    }(l, clients));
    std::vector<aspen::join_handle<std::size_t>> cs;
    for (std::size_t c = 0; c < clients; ++c)
        cs.push_back(aspen::spawn([](std::string path, std::size_t c) -> task<std::size_t> {
            unix_stream s = co_await unix_stream::connect(path);
            std::size_t checked = 0;
            for (std::size_t round = 0; round < 20; ++round) {
                std::string out(1 + round * 97, '\0');
                for (std::size_t i = 0; i < out.size(); ++i) out[i] = net_test::pattern_byte(c, round, i);
                co_await s.write_all(out);
                std::string in(out.size(), '\0');
                std::size_t n = co_await s.read_exact(in.data(), in.size());
                if (n == out.size() && in == out) checked += n;
            }
            co_return checked;
        }(path, c)));
    std::size_t total = 0;
    for (auto& h : cs) total += co_await h;
    co_await server;
    co_return total;
}

std::size_t expected_bytes(std::size_t clients) {
    std::size_t per = 0;
    for (std::size_t round = 0; round < 20; ++round) per += 1 + round * 97;
    return per * clients;
}

class UnixEcho : public ::testing::TestWithParam<std::size_t> {};

TEST_P(UnixEcho, FilePathAndAbstractNameEveryByteChecked) {
    aspen::runtime rt(aspen_test::workers(GetParam()));
    temp_dir dir;
    const std::string path = dir.path + "/echo.sock";
    int fds_before = net_test::open_fds();
    aspen_test::within(60s, "unix echo", [&] {
        rt.block_on([&]() -> task<void> {
            {
                unix_listener l = unix_listener::bind(path);
                EXPECT_EQ(l.local_path(), path);
                EXPECT_EQ(co_await echo_round(l, path, 50), expected_bytes(50));
            }
            const std::string name = abstract_name("echo");
            unix_listener l = unix_listener::bind(name);
            EXPECT_EQ(l.local_path(), name);
            EXPECT_EQ(co_await echo_round(l, name, 50), expected_bytes(50));
        }());
    });
    EXPECT_EQ(net_test::open_fds(), fds_before);
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
}

INSTANTIATE_TEST_SUITE_P(Workers, UnixEcho, ::testing::Values(1, 2, 8));

// The socket file outlives its listener: binding again fails until it is
// removed. A stale file refuses connections; a missing one is ENOENT.
TEST(Unix, SocketFileStaysAndStaleOrMissingPathsAreErrors) {
    aspen::runtime rt(aspen_test::workers(1));
    temp_dir dir;
    const std::string path = dir.path + "/stale.sock";
    aspen_test::within(30s, "unix paths", [&] {
        rt.block_on([&]() -> task<void> {
            { unix_listener l = unix_listener::bind(path); }
            EXPECT_TRUE(std::filesystem::exists(path));
            try {
                unix_listener::bind(path);
                ADD_FAILURE() << "bound over an existing file";
            } catch (const std::system_error& e) {
                EXPECT_EQ(e.code().value(), EADDRINUSE);
                EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
            }
            try {
                co_await unix_stream::connect(path);
                ADD_FAILURE() << "connected to a stale socket file";
            } catch (const std::system_error& e) {
                EXPECT_EQ(e.code().value(), ECONNREFUSED);
            }
            try {
                co_await unix_stream::connect(dir.path + "/missing.sock");
                ADD_FAILURE() << "connected to a missing path";
            } catch (const std::system_error& e) {
                EXPECT_EQ(e.code().value(), ENOENT);
                EXPECT_NE(std::string(e.what()).find("missing.sock"), std::string::npos) << e.what();
            }
            std::filesystem::remove(path);
            unix_listener again = unix_listener::bind(path);
            EXPECT_EQ(again.local_path(), path);
        }());
    });
}

TEST(Unix, BadPathsThrowInvalidArgumentSayingWhy) {
    EXPECT_THROW(unix_listener::bind(""), std::invalid_argument);
    EXPECT_THROW(unix_listener::bind(std::string("a\0b", 3)), std::invalid_argument);
    std::string long_path(108, 'x');
    try {
        unix_listener::bind(long_path);
        ADD_FAILURE() << "bound a 108-byte path";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("at most 107"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)unix_stream::connect(long_path), std::invalid_argument);  // at the call
    EXPECT_THROW(unix_listener::bind("@x", -1), std::invalid_argument);
    EXPECT_THROW((void)unix_listener().accept(), std::logic_error);
}

// A pair talks both ways; peek, shutdown and end of stream work as on TCP;
// paths are empty and the credentials are this process's.
TEST(Unix, PairPeekShutdownPathsAndCredentials) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "unix pair", [&] {
        rt.block_on([]() -> task<void> {
            auto [a, b] = unix_stream::pair();
            EXPECT_EQ(a.local_path(), "");
            EXPECT_EQ(b.peer_path(), "");
            aspen::unix_credentials c = a.peer_credentials();
            EXPECT_EQ(c.pid, ::getpid());
            EXPECT_EQ(c.uid, ::getuid());
            EXPECT_EQ(c.gid, ::getgid());
            co_await a.write_all("ping");
            char buf[8];
            EXPECT_EQ(co_await b.peek(buf, 2), 2u);
            EXPECT_EQ(std::string(buf, 2), "pi");
            EXPECT_EQ(co_await b.read_exact(buf, 4), 4u);
            EXPECT_EQ(std::string(buf, 4), "ping");
            co_await b.write_all("pong");
            b.shutdown(aspen::shutdown_mode::write);
            EXPECT_EQ(co_await a.read_exact(buf, sizeof buf), 4u);  // short: end of stream
            EXPECT_EQ(std::string(buf, 4), "pong");
            EXPECT_EQ(co_await a.read(buf, sizeof buf), 0u);
            // A named connection reports both paths.
            const std::string name = abstract_name("paths");
            unix_listener l = unix_listener::bind(name);
            auto accepted = aspen::spawn([](unix_listener& l) -> task<unix_stream> { co_return co_await l.accept(); }(l));
            unix_stream client = co_await unix_stream::connect(name);
            unix_stream server = co_await accepted;
            EXPECT_EQ(client.peer_path(), name);
            EXPECT_EQ(server.local_path(), name);
            EXPECT_EQ(client.local_path(), "");
        }());
    });
}

// into_split: a reader task and a writer task per side, full duplex, every
// byte checked; dropping a write half gives the peer end of stream.
TEST(Unix, SplitHalvesCarryBothDirectionsAndTheWriteHalfEndsTheStream) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(60s, "unix split", [&] {
        rt.block_on([]() -> task<void> {
            constexpr std::size_t bytes = 1 << 20;
            auto [a, b] = unix_stream::pair();
            auto [ar, aw] = std::move(a).into_split();
            auto [br, bw] = std::move(b).into_split();
            EXPECT_FALSE(a.is_open());
            EXPECT_EQ(ar.peer_path(), "");
            EXPECT_EQ(aw.local_path(), "");
            auto writer = [](aspen::unix_write_half w, std::size_t conn) -> task<void> {
                std::string buf(4096, '\0');
                for (std::size_t sent = 0; sent < bytes; sent += buf.size()) {
                    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = net_test::pattern_byte(conn, 0, sent + i);
                    co_await w.write_all(buf);
                }
                // w goes here: the peer reads end of stream
            };
            auto reader = [](aspen::unix_read_half r, std::size_t conn) -> task<std::size_t> {
                char buf[3000];
                std::size_t got = 0;
                for (;;) {
                    std::size_t n = co_await r.read(buf, sizeof buf);
                    if (n == 0) co_return got;
                    for (std::size_t i = 0; i < n; ++i)
                        if (buf[i] != net_test::pattern_byte(conn, 0, got + i)) co_return got + i;
                    got += n;
                }
            };
            auto w1 = aspen::spawn(writer(std::move(aw), 1));
            auto w2 = aspen::spawn(writer(std::move(bw), 2));
            auto r1 = aspen::spawn(reader(std::move(br), 1));
            auto r2 = aspen::spawn(reader(std::move(ar), 2));
            co_await w1;
            co_await w2;
            EXPECT_EQ(co_await r1, bytes);
            EXPECT_EQ(co_await r2, bytes);
            EXPECT_THROW((void)unix_stream().into_split(), std::logic_error);
        }());
    });
}

// write_with / read_with run sendmsg / recvmsg: a descriptor passes over
// the socket (SCM_RIGHTS) and works on the other side.
TEST(Unix, WriteWithAndReadWithPassADescriptor) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "unix SCM_RIGHTS", [&] {
        rt.block_on([]() -> task<void> {
            auto [a, b] = unix_stream::pair();
            int p[2];
            EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
            auto receiver = aspen::spawn([](unix_stream& b) -> task<int> {
                char byte = 0;
                iovec iov{&byte, 1};
                alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
                msghdr msg{};
                msg.msg_iov = &iov;
                msg.msg_iovlen = 1;
                msg.msg_control = control;
                msg.msg_controllen = sizeof control;
                ssize_t n = co_await b.read_with([&](int fd) { return ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC); });
                cmsghdr* c = CMSG_FIRSTHDR(&msg);
                if (n != 1 || !c || c->cmsg_type != SCM_RIGHTS) co_return -1;
                int got = -1;
                std::memcpy(&got, CMSG_DATA(c), sizeof got);
                co_return got;
            }(b));  // waits: nothing is sent yet
            co_await aspen::sleep(5ms);
            char byte = 'f';
            iovec iov{&byte, 1};
            alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
            msghdr msg{};
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control;
            msg.msg_controllen = sizeof control;
            cmsghdr* c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            std::memcpy(CMSG_DATA(c), &p[1], sizeof(int));
            EXPECT_EQ(co_await a.write_with([&](int fd) { return ::sendmsg(fd, &msg, MSG_NOSIGNAL); }), 1);
            int passed = co_await receiver;
            EXPECT_GE(passed, 0);
            EXPECT_NE(passed, p[1]);  // a new descriptor of the same pipe
            EXPECT_EQ(::write(passed, "fd!", 3), 3);
            char buf[4] = {};
            EXPECT_EQ(::read(p[0], buf, 3), 3);
            EXPECT_EQ(std::string(buf, 3), "fd!");
            for (int fd : {p[0], p[1], passed}) ::close(fd);
            try {
                // a is writable, so f runs at once (read_with would wait
                // for data that never comes).
                co_await a.write_with([](int) -> int {
                    errno = EIO;
                    return -1;
                });
                ADD_FAILURE() << "no error";
            } catch (const std::system_error& e) {
                EXPECT_EQ(e.code().value(), EIO);
                EXPECT_NE(std::string(e.what()).find("aspen::unix_stream::write_with"), std::string::npos) << e.what();
            }
        }());
    });
}

// With the backlog full, connect waits (tries again) instead of failing,
// and completes once an accept makes room.
TEST(Unix, ConnectWaitsWhileTheBacklogIsFull) {
    aspen::runtime rt(aspen_test::workers(2));
    aspen_test::within(30s, "unix backlog", [&] {
        rt.block_on([]() -> task<void> {
            const std::string name = abstract_name("backlog");
            unix_listener l = unix_listener::bind(name, 0);
            // Fill the queue with plain non-blocking connects until one
            // meets EAGAIN; none is accepted yet.
            sockaddr_un sa{};
            sa.sun_family = AF_UNIX;
            std::memcpy(sa.sun_path + 1, name.data() + 1, name.size() - 1);
            auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
            std::vector<int> raw;
            for (;;) {
                int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), len) == 0) {
                    raw.push_back(fd);
                    continue;
                }
                EXPECT_EQ(errno, EAGAIN);
                ::close(fd);
                break;
            }
            EXPECT_FALSE(raw.empty());
            auto waiting = aspen::spawn([](std::string n) -> task<unix_stream> {
                co_return co_await unix_stream::connect(n);
            }(name));
            co_await aspen::sleep(20ms);
            // The queue stays full until the accept below: finished means
            // the connect gave up (or threw) instead of waiting.
            EXPECT_FALSE(waiting.is_finished());
            unix_stream first = co_await l.accept();
            unix_stream c = co_await waiting;  // the watchdog fails a connect that never ends
            EXPECT_TRUE(c.is_open());
            for (int fd : raw) ::close(fd);
        }());
    });
}

// An accept aborted while it waits leaves the listener usable.
TEST(Unix, AbortedAcceptThenReuseLeaksNothing) {
    aspen::runtime rt(aspen_test::workers(2));
    int fds_before = net_test::open_fds();
    aspen_test::within(30s, "unix abort", [&] {
        rt.block_on([&]() -> task<void> {
            const std::string name = abstract_name("abort");
            unix_listener l = unix_listener::bind(name);
            auto waiting = aspen::spawn([](unix_listener& l) -> task<void> { (void)co_await l.accept(); }(l));
            co_await net_test::wait_parked(rt, 1);
            waiting.abort();
            EXPECT_THROW(co_await waiting, aspen::task_cancelled);
            auto accepted = aspen::spawn([](unix_listener& l) -> task<unix_stream> { co_return co_await l.accept(); }(l));
            unix_stream c = co_await unix_stream::connect(name);
            unix_stream s = co_await accepted;
            co_await c.write_all("x");
            char ch = 0;
            EXPECT_EQ(co_await s.read(&ch, 1), 1u);
            EXPECT_EQ(ch, 'x');
        }());
    });
    EXPECT_EQ(net_test::open_fds(), fds_before);
    EXPECT_EQ(rt.metrics().io_registrations, 0u);
}

}  // namespace
