// Runs a test on either runtime: kind 0 is a current_thread_runtime, kind
// n > 0 a runtime with n workers (parameterize with runtime_kinds()).
#pragma once

#include <aspen/aspen.hpp>

#include <gtest/gtest.h>

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

}  // namespace aspen_test
