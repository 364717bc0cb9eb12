// Runs a test body on each kind of runtime: kind 0 is a
// current_thread_runtime, kind n > 0 a runtime with n workers. Used by the
// combinator, join_set and cancellation tests.
#pragma once

#include "test_util.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace aspen_test {

inline const auto runtime_kinds = ::testing::Values(0, 1, 2, 8);

inline std::string kind_name(const ::testing::TestParamInfo<int>& info) {
    return info.param == 0 ? std::string("current_thread") : "workers" + std::to_string(info.param);
}

// block_on(t) on a fresh runtime of that kind, under a 60 s watchdog.
template <class T>
T run_on(int kind, aspen::task<T> t, const char* what) {
    std::optional<std::conditional_t<std::is_void_v<T>, int, T>> out;
    within(std::chrono::seconds(60), what, [&] {
        auto go = [&](auto& rt) {
            if constexpr (std::is_void_v<T>) {
                rt.block_on(std::move(t));
                out.emplace(0);
            } else {
                out.emplace(rt.block_on(std::move(t)));
            }
        };
        if (kind == 0) {
            aspen::current_thread_runtime rt;
            go(rt);
        } else {
            aspen::runtime rt(workers(static_cast<std::size_t>(kind)));
            go(rt);
        }
    });
    if constexpr (!std::is_void_v<T>) return std::move(*out);
}

// Aborts h's task and waits until it is gone (task_cancelled expected).
template <class T>
aspen::task<void> abort_and_join(aspen::join_handle<T>& h) {
    h.abort();
    try {
        (void)co_await h;
    } catch (const aspen::task_cancelled&) {
    }
}

// Counts live objects: a task holding one is still running (or its frame
// is not destroyed yet).
struct alive_token {
    explicit alive_token(std::atomic<int>* c) noexcept : count(c) { count->fetch_add(1); }
    alive_token(const alive_token&) = delete;
    alive_token& operator=(const alive_token&) = delete;
    ~alive_token() { count->fetch_sub(1); }
    std::atomic<int>* count;
};

}  // namespace aspen_test
