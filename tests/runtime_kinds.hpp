// Runs a test on either runtime: kind 0 is a current_thread_runtime, kind
// n > 0 a runtime with n workers (parameterize with runtime_kinds()). Also
// coop_yield_point, which checks that an always-ready operation spends the
// coop budget.
#pragma once

#include <aspen/aspen.hpp>

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include <memory>
#include <string>

namespace aspen_test {

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

inline auto runtime_kinds() { return ::testing::Values(0, 1, 2, 8); }

inline std::string runtime_kind_name(const ::testing::TestParamInfo<int>& info) {
    return info.param == 0 ? std::string("current_thread") : "workers" + std::to_string(info.param);
}

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
