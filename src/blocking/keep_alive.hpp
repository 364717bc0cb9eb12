// How long an idle blocking thread (the blocking pool's, or a kept
// block_in_place stand-in) waits for work before it ends.
#pragma once

#include <algorithm>
#include <chrono>

namespace aspen::detail {

// config::blocking_keep_alive may be any non-negative duration, up to
// nanoseconds::max(). A wait that long is a wait until shutdown; capped at
// a year, now() + keep-alive cannot overflow the clock's 64-bit count.
inline std::chrono::nanoseconds bounded_keep_alive(std::chrono::nanoseconds keep_alive) {
    return std::min<std::chrono::nanoseconds>(keep_alive, std::chrono::hours(24 * 365));
}

}  // namespace aspen::detail
