// The C API's readiness-only fd waits (aspen_fd_ready_poll,
// aspen_fd_clear_ready) and aspen_block_in_place under stress: pipes whose
// writer and reader are C tasks doing their own write(2) / read(2), the
// pipe small enough that both sides wait again and again, the reader now
// and then handing its worker off; some pairs are aborted at random
// moments. Counted exactly: an unaborted pair moves every byte, in order;
// every task's drop runs once and frees its fd (the asan build's
// LeakSanitizer sees the rest).
#include <aspen/aspen.h>

#include "../test_util.hpp"
#include "splitmix.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

#ifdef ASPEN_SANITIZED
constexpr std::size_t bytes_per_pipe = 96 * 1024;
constexpr int pairs = 6;
#else
constexpr std::size_t bytes_per_pipe = 1024 * 1024;
constexpr int pairs = 16;
#endif

// One side of a pipe, owned by its task: the drop frees the fd.
struct side {
    aspen_fd* fd = nullptr;
    std::size_t done = 0;
    std::uint64_t calls = 0;
    bool bad = false;  // a byte out of order, an unexpected error or status
    std::atomic<int> drops{0};
};

void drop_side(void* d) {
    auto* s = static_cast<side*>(d);
    aspen_fd_free(s->fd);
    s->fd = nullptr;
    s->drops.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after the join
}

unsigned char byte_at(std::size_t i) { return static_cast<unsigned char>(i % 251); }

aspen_status spin_briefly(void* d) {
    auto* n = static_cast<std::uint64_t*>(d);
    auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(*n % 20'000);
    while (std::chrono::steady_clock::now() < end) {
    }
    return ASPEN_EINVAL;  // any status: it is the call's result
}

aspen_status reader_poll(void* d, aspen_context* cx) {
    auto* s = static_cast<side*>(d);
    unsigned char buf[700];
    for (;;) {
        aspen_status st = aspen_fd_ready_poll(s->fd, ASPEN_FD_READ, cx);
        if (st == ASPEN_PENDING) return st;  // waits for an edge, or a coop yield
        if (st != ASPEN_OK) {
            s->bad = true;
            return st;
        }
        ssize_t n = ::read(aspen_fd_native(s->fd), buf, sizeof buf);
        if (n > 0) {
            for (ssize_t i = 0; i < n; ++i)
                if (buf[i] != byte_at(s->done + static_cast<std::size_t>(i))) s->bad = true;
            s->done += static_cast<std::size_t>(n);
            if (s->done == bytes_per_pipe) return ASPEN_READY;
            if (++s->calls % 16 == 0) {
                std::uint64_t spin = s->calls * 0x9E3779B97F4A7C15ull;
                if (aspen_block_in_place(spin_briefly, &spin) != ASPEN_EINVAL) s->bad = true;
            }
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            aspen_fd_clear_ready(s->fd, ASPEN_FD_READ);
            continue;
        }
        if (n == 0) return ASPEN_CLOSED;  // the writer is gone (aborted) before every byte
        s->bad = true;
        return ASPEN_ERROR;
    }
}

aspen_status writer_poll(void* d, aspen_context* cx) {
    auto* s = static_cast<side*>(d);
    unsigned char buf[1500];
    for (;;) {
        aspen_status st = aspen_fd_ready_poll(s->fd, ASPEN_FD_WRITE, cx);
        if (st == ASPEN_PENDING) return st;
        if (st != ASPEN_OK) {
            s->bad = true;
            return st;
        }
        std::size_t len = std::min(sizeof buf, bytes_per_pipe - s->done);
        for (std::size_t i = 0; i < len; ++i) buf[i] = byte_at(s->done + i);
        ssize_t n = ::write(aspen_fd_native(s->fd), buf, len);
        if (n > 0) {
            s->done += static_cast<std::size_t>(n);
            if (s->done == bytes_per_pipe) return ASPEN_READY;
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            aspen_fd_clear_ready(s->fd, ASPEN_FD_WRITE);
            continue;
        }
        if (n < 0 && errno == EPIPE) return ASPEN_CLOSED;  // the reader is gone (aborted)
        s->bad = true;
        return ASPEN_ERROR;
    }
}

class CapiFdReadyStress : public ::testing::TestWithParam<int> {};

TEST_P(CapiFdReadyStress, PipesMoveEveryByteOnceAndAbortsDropOnce) {
    ::signal(SIGPIPE, SIG_IGN);  // a write after an aborted reader's drop: EPIPE, not a signal
    aspen_config cfg;
    ASSERT_EQ(aspen_config_init(&cfg), ASPEN_OK);
    cfg.workers = static_cast<std::size_t>(GetParam());
    cfg.coop_budget = 16;  // coop yields between the readiness polls, too
    stress_util::splitmix r{static_cast<std::uint64_t>(GetParam())};
    for (int round = 0; round < 3; ++round) {
        aspen_runtime* rt = nullptr;
        ASSERT_EQ(aspen_runtime_new(&cfg, &rt), ASPEN_OK) << aspen_last_error();
        auto readers = std::make_unique<side[]>(pairs);
        auto writers = std::make_unique<side[]>(pairs);
        std::vector<aspen_join*> rj(pairs), wj(pairs);
        std::vector<bool> aborted(pairs);
        for (int i = 0; i < pairs; ++i) {
            int p[2];
            ASSERT_EQ(::pipe(p), 0);
            ::fcntl(p[1], F_SETPIPE_SZ, 4096);  // small: both sides wait often (best effort)
            ASSERT_EQ(aspen_fd_adopt(p[0], &readers[i].fd), ASPEN_OK) << aspen_last_error();
            ASSERT_EQ(aspen_fd_adopt(p[1], &writers[i].fd), ASPEN_OK) << aspen_last_error();
            ASSERT_EQ(aspen_spawn(rt, reader_poll, &readers[i], drop_side, &rj[i]), ASPEN_OK);
            ASSERT_EQ(aspen_spawn(rt, writer_poll, &writers[i], drop_side, &wj[i]), ASPEN_OK);
            aborted[i] = r() % 3 == 0;
        }
        aspen_test::within(std::chrono::seconds(120), "pipes through aspen_fd_ready_poll", [&] {
            for (int i = 0; i < pairs; ++i) {
                if (!aborted[i]) continue;
                std::this_thread::sleep_for(std::chrono::microseconds(r() % 2000));
                // Both: the other side would wait for ever.
                EXPECT_EQ(aspen_join_abort(rj[i]), ASPEN_OK);
                EXPECT_EQ(aspen_join_abort(wj[i]), ASPEN_OK);
            }
            for (int i = 0; i < pairs; ++i) {
                aspen_status rs = aspen_join_wait(rj[i]);
                aspen_status ws = aspen_join_wait(wj[i]);
                if (aborted[i]) {
                    // Done, aborted, or its peer was aborted (and dropped) first.
                    EXPECT_TRUE(rs == ASPEN_OK || rs == ASPEN_CANCELLED || rs == ASPEN_CLOSED) << aspen_status_name(rs);
                    EXPECT_TRUE(ws == ASPEN_OK || ws == ASPEN_CANCELLED || ws == ASPEN_CLOSED) << aspen_status_name(ws);
                } else {
                    EXPECT_EQ(rs, ASPEN_OK) << "pair " << i << ": " << aspen_status_name(rs);
                    EXPECT_EQ(ws, ASPEN_OK) << "pair " << i << ": " << aspen_status_name(ws);
                    EXPECT_EQ(readers[i].done, bytes_per_pipe) << "pair " << i;
                    EXPECT_EQ(writers[i].done, bytes_per_pipe) << "pair " << i;
                }
                EXPECT_FALSE(readers[i].bad) << "pair " << i;
                EXPECT_FALSE(writers[i].bad) << "pair " << i;
                aspen_join_free(rj[i]);
                aspen_join_free(wj[i]);
            }
        });
        EXPECT_EQ(aspen_runtime_free(rt), ASPEN_OK);
        for (int i = 0; i < pairs; ++i) {
            EXPECT_EQ(readers[i].drops.load(), 1) << "pair " << i;
            EXPECT_EQ(writers[i].drops.load(), 1) << "pair " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Workers, CapiFdReadyStress, ::testing::Values(1, 2, 8, 16),
                         [](const ::testing::TestParamInfo<int>& info) { return "workers" + std::to_string(info.param); });

}  // namespace
