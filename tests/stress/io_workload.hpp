// The I/O exactly-once workload shared by tests/stress/io_stress_test.cpp and
// the soak (tests/soak/aspen_soak.cpp): loopback TCP connections whose every
// read and write may be cut short by a random timeout, beside sleepers that
// are aborted at random, on one runtime. It checks what the cancel-safety
// table in aspen/net/tcp.hpp promises: a timed-out read consumed no bytes, a
// timed-out write sent none, so every connection's byte stream arrives at the
// server and back at the client exactly once and in order; and that every
// sleeper's frame ends exactly once, finished or cancelled by its abort
// (the two counts must add up to the number spawned).
//
// Each connection: the client sends `messages` messages (a pattern that
// differs with connection, message and position): most of 1 to 3000 bytes,
// one in eight of up to 32 KiB, more than the small send and receive
// buffers the sockets get here hold, so writes wait for room; the server
// echoes whatever it reads; the client reads the echo of each message
// before it sends the next. Every read and write goes through
// aspen::timeout with a deadline of 0 to 2 ms, retried when it times out.
// Between messages the client may yield or sleep. Beside each connection a
// task spawns sleepers (0 to 3 ms) and aborts a random third of them.
#pragma once

#include "splitmix.hpp"

#include <aspen/aspen.hpp>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace io_stress {

using namespace std::chrono_literals;

struct params {
    std::size_t connections = 16;
    std::size_t messages = 200;
    std::size_t sleepers = 64;  // per connection
};

struct report {
    std::uint64_t bytes_echoed = 0;        // bytes the clients got back, checked
    std::uint64_t reads_timed_out = 0;     // cancelled reads (both ends)
    std::uint64_t writes_timed_out = 0;    // cancelled writes (both ends)
    std::uint64_t sleepers_finished = 0;
    std::uint64_t sleepers_cancelled = 0;
    std::string first_error;               // empty when every check passed
};

using stress_util::splitmix;

inline char pattern(std::size_t conn, std::size_t msg, std::size_t i) {
    return static_cast<char>((conn * 131 + msg * 31 + i * 7 + (i >> 8)) & 0xFF);
}
constexpr std::size_t max_message = 32 * 1024;
inline std::size_t message_size(std::size_t conn, std::size_t msg) {
    splitmix r{conn * 1'000'003 + msg};
    return r() % 8 == 0 ? 3000 + r() % (max_message - 3000) : 1 + r() % 3000;
}

// Small kernel buffers (the kernel doubles the value and keeps a minimum),
// so that a large message fills them and its write waits for room.
inline void shrink_buffer(int fd, int option) {
    int bytes = 4096;
    ::setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof bytes);
}

struct shared {
    std::atomic<std::uint64_t> bytes_echoed{0}, reads_timed_out{0}, writes_timed_out{0};
    std::atomic<std::uint64_t> sleepers_finished{0}, sleepers_cancelled{0};
    std::mutex error_mutex;
    std::string first_error;

    void fail(std::string what) {
        std::lock_guard l(error_mutex);
        if (first_error.empty()) first_error = std::move(what);
    }
};

inline aspen::clock::duration random_deadline(splitmix& rng) {
    return std::chrono::microseconds(rng() % 2000);
}

// Every peer sends its next bytes within a few milliseconds, so a read that
// waits this long means bytes were lost: the run then fails at once instead
// of hanging until the watchdog.
constexpr auto stall_limit = 10s;

// One read of at most n bytes under a random deadline, retried on time-out.
// Returns 0 at EOF, and after a stall (reported through sh.fail).
// (The operation is built in a statement of its own, and awaited by name:
// g++ 12 mishandles temporaries in the full-expression of a co_await whose
// operation throws; see README "Compiler caveats".)
inline aspen::task<std::size_t> read_some(aspen::tcp_stream& s, char* buf, std::size_t n, splitmix& rng, shared& sh) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        auto op = aspen::timeout(random_deadline(rng), s.read(buf, n));
        try {
            std::size_t got = co_await std::move(op);
            co_return got;
        } catch (const aspen::timed_out&) {
            sh.reads_timed_out.fetch_add(1, std::memory_order_relaxed);
        }
        if (std::chrono::steady_clock::now() - start > stall_limit) {
            sh.fail("a read waited " + std::to_string(stall_limit.count()) + " s for bytes that never came");
            co_return 0;
        }
    }
}

// Writes all n bytes with plain writes under random deadlines: a write that
// times out sent nothing, one that completes says how much it sent.
inline aspen::task<void> write_every_byte(aspen::tcp_stream& s, const char* data, std::size_t n, splitmix& rng,
                                          shared& sh) {
    std::size_t done = 0;
    while (done < n) {
        auto op = aspen::timeout(random_deadline(rng), s.write(data + done, n - done));
        try {
            std::size_t sent = co_await std::move(op);
            done += sent;
        } catch (const aspen::timed_out&) {
            sh.writes_timed_out.fetch_add(1, std::memory_order_relaxed);
        }
    }
}

inline aspen::task<void> server_session(aspen::tcp_stream s, std::uint64_t seed, shared& sh) {
    splitmix rng{seed};
    std::vector<char> buf(4096);
    for (;;) {
        std::size_t n = co_await read_some(s, buf.data(), 1 + rng() % buf.size(), rng, sh);
        if (n == 0) co_return;  // the client shut down its side: all echoed
        co_await write_every_byte(s, buf.data(), n, rng, sh);
    }
}

inline aspen::task<void> client(aspen::socket_address addr, std::size_t conn, params p, shared& sh) {
    splitmix rng{conn * 7919 + 1};
    aspen::tcp_stream s = co_await aspen::tcp_stream::connect(addr);
    if (rng() % 2) s.set_nodelay(true);
    shrink_buffer(s.native_handle(), SO_SNDBUF);
    std::vector<char> out(max_message), in(max_message);
    for (std::size_t m = 0; m < p.messages; ++m) {
        const std::size_t size = message_size(conn, m);
        for (std::size_t i = 0; i < size; ++i) out[i] = pattern(conn, m, i);
        co_await write_every_byte(s, out.data(), size, rng, sh);
        std::size_t got = 0;
        while (got < size) {
            std::size_t n = co_await read_some(s, in.data() + got, size - got, rng, sh);
            if (n == 0) {
                sh.fail("connection " + std::to_string(conn) + ": EOF in the echo of message " + std::to_string(m));
                co_return;
            }
            got += n;
        }
        for (std::size_t i = 0; i < size; ++i) {
            if (in[i] != out[i]) {
                sh.fail("connection " + std::to_string(conn) + ", message " + std::to_string(m) + ": byte " +
                        std::to_string(i) + " differs");
                co_return;
            }
        }
        sh.bytes_echoed.fetch_add(size, std::memory_order_relaxed);
        switch (rng() % 8) {
            case 0: co_await aspen::yield_now(); break;
            case 1: co_await aspen::sleep(std::chrono::microseconds(rng() % 500)); break;
            default: break;
        }
    }
    s.shutdown(aspen::shutdown_mode::write);
    // The server ends its session on our EOF; nothing more may arrive.
    std::size_t tail = co_await read_some(s, in.data(), in.size(), rng, sh);
    if (tail != 0) sh.fail("connection " + std::to_string(conn) + ": bytes after the last echo");
}

// A sleeper's frame holds its mark: a frame destroyed before the sleeper
// finished counts as cancelled. finished + cancelled must then equal the
// number spawned: a lost, leaked or twice-destroyed frame breaks the sum.
struct sleeper_mark {
    shared* sh;
    bool finished = false;
    explicit sleeper_mark(shared* s) : sh(s) {}
    sleeper_mark(sleeper_mark&& o) noexcept : sh(std::exchange(o.sh, nullptr)), finished(o.finished) {}
    ~sleeper_mark() {
        if (sh && !finished) sh->sleepers_cancelled.fetch_add(1, std::memory_order_relaxed);
    }
};

inline aspen::task<void> sleeper(sleeper_mark mark, aspen::clock::duration d) {
    co_await aspen::sleep(d);
    mark.finished = true;
    mark.sh->sleepers_finished.fetch_add(1, std::memory_order_relaxed);
}

inline aspen::task<void> timer_churn(std::size_t conn, params p, shared& sh) {
    splitmix rng{conn * 104729 + 3};
    std::vector<aspen::join_handle<void>> hs;
    for (std::size_t i = 0; i < p.sleepers; ++i)
        hs.push_back(aspen::spawn(sleeper(sleeper_mark(&sh), std::chrono::microseconds(rng() % 3000))));
    for (auto& h : hs) {
        if (rng() % 3 == 0) h.abort();
    }
    for (auto& h : hs) {
        try {
            co_await h;
        } catch (const aspen::task_cancelled&) {
        }
    }
}

inline aspen::task<void> root(params p, shared& sh) {
    auto listener = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
    shrink_buffer(listener.native_handle(), SO_RCVBUF);  // accepted sockets inherit it
    const aspen::socket_address addr = listener.local_addr();
    std::vector<aspen::join_handle<void>> tasks;
    for (std::size_t c = 0; c < p.connections; ++c) {
        tasks.push_back(aspen::spawn(client(addr, c, p, sh)));
        tasks.push_back(aspen::spawn(timer_churn(c, p, sh)));
    }
    for (std::size_t c = 0; c < p.connections; ++c) {
        aspen::tcp_stream s = co_await listener.accept();
        tasks.push_back(aspen::spawn(server_session(std::move(s), c * 31 + 17, sh)));
    }
    for (auto& h : tasks) co_await h;
}

// Runs the workload on a runtime made from cfg and checks the counts.
inline report run(const aspen::config& cfg, params p) {
    shared sh;
    {
        aspen::runtime rt(cfg);
        try {
            rt.block_on(root(p, sh));
        } catch (const std::exception& e) {
            sh.fail(std::string("the workload threw: ") + e.what());
        }
    }
    report r;
    r.bytes_echoed = sh.bytes_echoed.load();
    r.reads_timed_out = sh.reads_timed_out.load();
    r.writes_timed_out = sh.writes_timed_out.load();
    r.sleepers_finished = sh.sleepers_finished.load();
    r.sleepers_cancelled = sh.sleepers_cancelled.load();
    r.first_error = sh.first_error;
    std::uint64_t expected_bytes = 0;
    for (std::size_t c = 0; c < p.connections; ++c)
        for (std::size_t m = 0; m < p.messages; ++m) expected_bytes += message_size(c, m);
    if (r.first_error.empty() && r.bytes_echoed != expected_bytes)
        r.first_error = "echoed " + std::to_string(r.bytes_echoed) + " bytes of " + std::to_string(expected_bytes);
    const std::uint64_t sleepers = p.connections * p.sleepers;
    if (r.first_error.empty() && r.sleepers_finished + r.sleepers_cancelled != sleepers)
        r.first_error = "sleepers: " + std::to_string(r.sleepers_finished) + " finished + " +
                        std::to_string(r.sleepers_cancelled) + " cancelled, of " + std::to_string(sleepers);
    return r;
}

}  // namespace io_stress
