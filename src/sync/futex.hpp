// Raw futex calls on a 32-bit atomic word, for threads that sleep outside
// any runtime (block_on, the block_on hand-over, thread_parker). Raw
// rather than std::atomic::wait/notify: a waiter whose word lives on its
// stack may return as soon as it sees the word change, before the setter's
// wake; a FUTEX_WAKE only names the address (the kernel does not read a
// private futex's memory to wake it), so it stays well-defined, and a wake
// that lands on a later word at the same address is spurious (every wait
// re-checks in a loop). No wake is lost: FUTEX_WAIT sleeps only while the
// word still holds `seen`, checked inside the kernel.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace aspen::detail {

// Wakes one thread sleeping on word.
inline void futex_wake_one(std::atomic<std::uint32_t>* word) noexcept {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Sleeps while word holds `seen` (or until a spurious wake).
inline void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t seen) noexcept {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
}

}  // namespace aspen::detail
