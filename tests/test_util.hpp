// Helpers shared by the tests: a one-shot signal awaited through poll_fn and
// fired from anywhere, and a watchdog that fails a test instead of hanging.
#pragma once

#include <aspen/aspen.hpp>

#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

namespace aspen_test {

// A fresh directory under /tmp (for socket files, test files), removed
// with everything in it; `path` is a std::string.
struct temp_dir {
    std::string path;
    temp_dir() {
        char tmpl[] = "/tmp/aspen-test-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::system_error(errno, std::generic_category(), "mkdtemp");
        path = tmpl;
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    ~temp_dir() { std::filesystem::remove_all(path); }
};

// A config with n workers and every other field at its default.
inline aspen::config workers(std::size_t n) {
    aspen::config c;
    c.workers = n;
    return c;
}

// gtest's name for a (workers, ring capacity) parameter: "w8_cap256".
template <class Info>
std::string workers_capacity_name(const Info& info) {
    std::ostringstream name;  // not operator+: g++ 12 -O3 warns falsely
    name << "w" << std::get<0>(info.param) << "_cap" << std::get<1>(info.param);
    return name.str();
}

// Adds one to *destroyed when destroyed (a moved-from one does not): a
// by-value task parameter that proves its frame was destroyed, once.
struct counted {
    std::atomic<long>* destroyed;
    explicit counted(std::atomic<long>* d) : destroyed(d) {}
    counted(counted&& o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)) {}
    ~counted() {
        if (destroyed) destroyed->fetch_add(1);
    }
};

// Set once, awaited by one task at a time; reset() re-arms it.
class signal {
public:
    void set() {
        // release: the waiter that sees the flag sees what came before.
        ready_.store(true, std::memory_order_release);
        aspen::waker w;
        {
            std::lock_guard lock(mutex_);
            w = std::move(waker_);
        }
        w.wake();
    }
    void reset() { ready_.store(false, std::memory_order_relaxed); }
    bool is_set() const { return ready_.load(std::memory_order_acquire); }

    auto wait() {
        return aspen::poll_fn([this](aspen::context& cx) -> aspen::poll<bool> {
            if (is_set()) return aspen::ready(true);
            std::lock_guard lock(mutex_);
            waker_ = cx.waker();
            // Re-check under the lock: a set() between the first check and
            // storing the waker must not be lost.
            if (is_set()) return aspen::ready(true);
            return aspen::pending;
        });
    }

private:
    std::atomic<bool> ready_{false};
    std::mutex mutex_;
    aspen::waker waker_;
};

// Runs fn on a thread; if it has not returned after `limit`, prints what
// and ends the process with a failure (a hung runtime cannot be torn down).
inline void within(std::chrono::seconds limit, const char* what, std::function<void()> fn) {
    std::packaged_task<void()> job(std::move(fn));
    auto done = job.get_future();
    std::thread runner(std::move(job));
    if (done.wait_for(limit) != std::future_status::ready) {
        std::fprintf(stderr, "watchdog: %s did not finish within %llds: hang (lost wakeup or starvation)\n", what,
                     static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::_Exit(3);
    }
    runner.join();
    done.get();  // rethrows a failure from fn
}

}  // namespace aspen_test
