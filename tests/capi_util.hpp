// Shared by the C API tests (capi_test, capi_handle_test).
#pragma once

#include <aspen/aspen.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>

namespace aspen_test {

// A C runtime of that kind (0: current-thread, n: n workers), with the
// defaults changed by `edit`.
inline aspen_runtime* make_c_runtime(int kind, const std::function<void(aspen_config&)>& edit = {}) {
    aspen_config cfg;
    EXPECT_EQ(aspen_config_init(&cfg), ASPEN_OK);
    cfg.current_thread = kind == 0;
    if (kind > 0) cfg.workers = static_cast<std::size_t>(kind);
    if (edit) edit(cfg);
    aspen_runtime* rt = nullptr;
    EXPECT_EQ(aspen_runtime_new(&cfg, &rt), ASPEN_OK) << aspen_last_error();
    return rt;
}

}  // namespace aspen_test
