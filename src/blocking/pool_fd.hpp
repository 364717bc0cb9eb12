// A descriptor whose calls run on the blocking pool, one at a time, in the
// order they were made: what fs::file (src/fs/file.cpp) and the standard
// streams (src/io/stdio.cpp) share. Also on_pool, the one-shot pool call
// the fs functions use.
//
// The busy lock (an aspen::mutex, so a waiting task holds no worker) moves
// into the pool function and is released when it returns, on the pool
// thread: an operation whose task was aborted while its call runs still
// holds the next one back until the call is done. Each function holds a
// reference to the state, so an owned descriptor is closed only after the
// last call on it returned.
#pragma once

#include <aspen/spawn_blocking.hpp>
#include <aspen/sync/mutex.hpp>
#include <aspen/task.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace aspen::detail {

// Aborts a blocking function whose awaiting task went away (aborted, or a
// lost timeout race) before it finished: if it has not started it never
// runs. A dropped handle would only detach it.
template <class R>
struct abort_unless_finished {
    join_handle<R>& h;
    ~abort_unless_finished() {
        if (h.valid() && !h.is_finished()) h.abort();
    }
};

// Runs f on the blocking pool and gives its result to the awaiting task.
// The handle is named before the co_await: with g++ 12 a temporary with a
// destructor (this closure) in the full-expression of a co_await whose
// operation throws is destroyed twice (README, "Compiler caveats").
template <class F>
task<std::invoke_result_t<F&>> on_pool(F f) {
    auto h = aspen::spawn_blocking(std::move(f));
    abort_unless_finished<std::invoke_result_t<F&>> guard{h};
    co_return co_await h;
}

// A pool call moves at most this much (as Tokio's File and Stdin): a huge
// read or write does not pin a buffer of its size.
inline constexpr std::size_t max_pool_chunk = std::size_t{2} << 20;

// The descriptor and its busy lock. Derive to add what the calls need.
struct pool_fd {
    // owned: closed with the state; else borrowed, and the caller keeps it
    // open while calls on it may run.
    pool_fd(int f, bool own) noexcept : fd(f), owned(own) {}
    pool_fd(const pool_fd&) = delete;
    pool_fd& operator=(const pool_fd&) = delete;
    ~pool_fd() {
        if (owned) ::close(fd);
    }

    const int fd;
    const bool owned;
    aspen::mutex busy;  // one call at a time
};

// Releases the busy lock when the pool function returns or throws.
struct release_on_exit {
    mutex_guard& busy;
    ~release_on_exit() { busy.unlock(); }
};

// Runs f(*s) on the blocking pool under s's busy lock, which the caller
// already holds (`busy`).
template <class S, class F>
task<std::invoke_result_t<F&, S&>> run_locked(std::shared_ptr<S> s, mutex_guard busy, F f) {
    auto call = [s, busy = std::move(busy), f = std::move(f)]() mutable {
        release_on_exit release{busy};
        return f(*s);
    };
    // Named, not awaited as a temporary: the closure (a parameter of
    // on_pool) must not be in the full-expression of the co_await.
    task<std::invoke_result_t<F&, S&>> pooled = on_pool(std::move(call));
    co_return co_await std::move(pooled);
}

// Runs f(*s) on the blocking pool once s's busy lock is free.
template <class S, class F>
task<std::invoke_result_t<F&, S&>> run_exclusive(std::shared_ptr<S> s, F f) {
    mutex_guard busy = co_await s->busy.lock();
    task<std::invoke_result_t<F&, S&>> op = run_locked(std::move(s), std::move(busy), std::move(f));
    co_return co_await std::move(op);
}

// write(2) to a pipe, without SIGPIPE (src/io/pipe.cpp; also declared in
// io/io_source.hpp, which this header does not need otherwise).
ssize_t pipe_write(int fd, const void* data, std::size_t size) noexcept;

// A syscall's result, retried on EINTR; another failure goes to
// fail(errno), which throws.
template <class Call, class Fail>
std::size_t retry_eintr(Call call, Fail fail) {
    for (;;) {
        auto n = call();
        if (n >= 0) return static_cast<std::size_t>(n);
        if (errno != EINTR) fail(errno);
    }
}

// Up to `want` bytes read(2) from fd into a string of its own (never the
// caller's memory: the caller's task may be gone when it returns).
template <class Fail>
std::string read_some(int fd, std::size_t want, Fail fail) {
    std::string buf(want, '\0');
    buf.resize(retry_eintr([&] { return ::read(fd, buf.data(), want); }, fail));
    return buf;
}

// One write(2) of up to size bytes at fd's offset; returns how many. A
// pipe or FIFO nobody reads gives EPIPE instead of raising SIGPIPE.
template <class Fail>
std::size_t write_some(int fd, const char* data, std::size_t size, Fail fail) {
    return retry_eintr([&] { return pipe_write(fd, data, size); }, fail);
}

// Writes all of data to fd: at its file offset, or from `at` on with
// pwrite (which leaves the file offset alone). Short writes go on. A write
// to a pipe or FIFO nobody reads fails with EPIPE instead of raising
// SIGPIPE (pipe_write).
template <class Fail>
void write_fully(int fd, const std::string& data, std::optional<std::uint64_t> at, Fail fail) {
    std::size_t done = 0;
    while (done < data.size()) {
        const char* from = data.data() + done;
        std::size_t left = data.size() - done;
        if (!at) {
            done += write_some(fd, from, left, fail);
            continue;
        }
        done += retry_eintr([&] { return ::pwrite(fd, from, left, static_cast<off_t>(*at + done)); }, fail);
    }
}

}  // namespace aspen::detail
