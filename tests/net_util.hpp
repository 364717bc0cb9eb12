// Helpers shared by the networking tests: open-fd counting, the fd limit,
// and an echo server / checked echo client over aspen's sockets.
#pragma once

#include "test_util.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/resource.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace net_test {

#ifdef ASPEN_SANITIZED
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif

// Entries of /proc/self/fd (minus the one opendir itself uses), once.
inline int count_fds_now() {
    DIR* d = ::opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (::readdir(d)) ++n;
    ::closedir(d);
    return n - 3;  // ".", ".." and the directory's own fd
}

// The open descriptors, settled: the fewest of five counts 1 ms apart. A
// sanitizer runtime opens pipes for a moment on any thread (UBSan's vptr
// check tests whether memory is readable by writing it to a pipe), so one
// count could include a pair that is gone a moment later (seen: 9 before,
// 7 after, in the ASan build). A leak stays, so it is in every count.
inline int open_fds() {
    int fewest = count_fds_now();
    for (int i = 0; i < 4; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        int n = count_fds_now();
        if (n < fewest) fewest = n;
    }
    return fewest;
}

// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the limit now
// in force.
inline rlim_t raise_fd_limit() {
    rlimit r{};
    ::getrlimit(RLIMIT_NOFILE, &r);
    if (r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &r);
        ::getrlimit(RLIMIT_NOFILE, &r);
    }
    return r.rlim_cur;
}

// Byte i of message `round` on connection `conn`: every byte differs with
// its position, so a lost, duplicated or reordered byte is caught.
inline char pattern_byte(std::size_t conn, std::size_t round, std::size_t i) {
    return static_cast<char>((conn * 131 + round * 31 + i * 7 + (i >> 8)) & 0xFF);
}

// Echoes until the peer closes.
inline aspen::task<void> echo_connection(aspen::tcp_stream s) {
    std::vector<char> buf(16 * 1024);
    for (;;) {
        std::size_t n = co_await s.read(buf.data(), buf.size());
        if (n == 0) co_return;
        co_await s.write_all(buf.data(), n);
    }
}

// `rounds` one-byte round trips through an echoing peer, each byte checked.
inline aspen::task<void> ping_bytes(aspen::tcp_stream& s, std::size_t rounds) {
    for (std::size_t r = 0; r < rounds; ++r) {
        char out = pattern_byte(0, r, 0), in = 0;
        co_await s.write_all(&out, 1);
        EXPECT_EQ(co_await s.read_exact(&in, 1), 1u);
        EXPECT_EQ(in, out);
    }
}

// Accepts `connections` connections and echoes each in its own task.
inline aspen::task<void> echo_server(aspen::tcp_listener& listener, std::size_t connections) {
    std::vector<aspen::join_handle<void>> conns;
    for (std::size_t i = 0; i < connections; ++i) conns.push_back(aspen::spawn(echo_connection(co_await listener.accept())));
    for (auto& h : conns) co_await h;
}

// `rounds` messages of varying size (1 to ~3 KB); every echoed byte is
// compared. Returns the bytes checked; half-closes and expects EOF at the end.
inline aspen::task<std::uint64_t> echo_client(aspen::socket_address addr, std::size_t conn, std::size_t rounds) {
    aspen::tcp_stream s = co_await aspen::tcp_stream::connect(addr);
    std::uint64_t checked = 0;
    std::vector<char> out, in;
    for (std::size_t r = 0; r < rounds; ++r) {
        std::size_t size = 1 + (conn * 17 + r * 311) % 3000;
        out.resize(size);
        in.assign(size, 0);
        for (std::size_t i = 0; i < size; ++i) out[i] = pattern_byte(conn, r, i);
        co_await s.write_all(out.data(), size);
        std::size_t got = co_await s.read_exact(in.data(), size);
        if (got != size || in != out) throw std::runtime_error("echo mismatch on connection " + std::to_string(conn));
        checked += size;
    }
    s.shutdown(aspen::shutdown_mode::write);
    char c;
    std::size_t after_end = co_await s.read(&c, 1);
    if (after_end != 0) throw std::runtime_error("expected end of stream");
    co_return checked;
}

// A connected TCP pair over 127.0.0.1: {client, server}.
inline aspen::task<std::pair<aspen::tcp_stream, aspen::tcp_stream>> connected_pair() {
    aspen::tcp_listener l = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
    auto accepted =
        aspen::spawn([](aspen::tcp_listener& l) -> aspen::task<aspen::tcp_stream> { co_return co_await l.accept(); }(l));
    aspen::tcp_stream client = co_await aspen::tcp_stream::connect(l.local_addr());
    aspen::tcp_stream server = co_await accepted;
    co_return std::pair{std::move(client), std::move(server)};
}

// Waits until a task is parked on its socket or fd (the registrations
// count, which a first operation bumps, reached `regs`), then a little
// longer. Only makes the wait likely; the tests pass either way.
inline aspen::task<void> wait_parked(aspen::runtime& rt, std::size_t regs) {
    while (rt.metrics().io_registrations < regs) co_await aspen::sleep(std::chrono::milliseconds(1));
    co_await aspen::sleep(std::chrono::milliseconds(10));
}

}  // namespace net_test
