// Runs a test body on each kind of runtime: kind 0 is a
// current_thread_runtime, kind n > 0 a runtime with n workers (parameterize
// with runtime_kinds). Also any_runtime (a runtime of a kind, held) and
// coop_yield_point, which checks that an always-ready operation spends the
// coop budget.
#pragma once

#include "test_util.hpp"

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
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

class any_runtime {
public:
    explicit any_runtime(int kind, aspen::config cfg = {}) {
        if (kind == 0) {
            ct_ = std::make_unique<aspen::current_thread_runtime>(cfg);
        } else {
            cfg.workers = static_cast<std::size_t>(kind);
            mt_ = std::make_unique<aspen::runtime>(cfg);
        }
    }
    aspen::detail::runtime_base& operator*() {
        if (mt_) return *mt_;
        return *ct_;
    }
    aspen::detail::runtime_base* operator->() { return &**this; }

private:
    std::unique_ptr<aspen::runtime> mt_;
    std::unique_ptr<aspen::current_thread_runtime> ct_;
};

inline aspen::task<void> set_flag(std::atomic<bool>* f) {
    f->store(true);
    co_return;
}

template <class Step>
aspen::task<int> coop_loop(Step step) {
    std::atomic<bool> other_ran{false};
    auto other = aspen::spawn(set_flag(&other_ran));
    int seen_at = -1;
    for (int i = 0; i < 100; ++i) {
        if (other_ran.load() && seen_at < 0) seen_at = i;
        bool ok = co_await step(i);
        if (!ok) co_return -2;
    }
    co_await other;
    co_return seen_at;
}

// Runs co_await step(i) for i = 0..99 in one task of a current-thread
// runtime with a coop budget of 4, after spawning a task that sets a flag.
// Each step is an operation that completes at once (task<bool>: false if
// its result was wrong). Returns the step at which the flag was first seen:
// without yielding the loop would end before the other task runs (-1);
// -2 means a step failed.
template <class Step>
int coop_yield_point(Step step) {
    aspen::config cfg;
    cfg.coop_budget = 4;
    aspen::current_thread_runtime rt(cfg);
    int seen_at = -1;
    within(std::chrono::seconds(60), "coop loop", [&] { seen_at = rt.block_on(coop_loop(std::move(step))); });
    return seen_at;
}

}  // namespace aspen_test
