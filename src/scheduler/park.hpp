// A worker's parking spot: a one-bit token on a futex (through
// std::atomic::wait, which libstdc++ maps to futex for 32-bit words).
//
// Protocol: unpark() sets the token and wakes; park() consumes the token,
// sleeping until there is one. A token set before park() starts is not lost
// (park returns at once), and spurious futex returns just loop.
#pragma once

#include <atomic>
#include <cstdint>

namespace aspen::detail {

class parker {
public:
    void park() noexcept {
        // acq_rel: acquire everything the unparker published before it set
        // the token; the write half just resets the token.
        while (token_.exchange(0, std::memory_order_acq_rel) == 0) token_.wait(0, std::memory_order_acquire);
    }
    void unpark() noexcept {
        // release: the parked thread sees the work published before this.
        token_.store(1, std::memory_order_release);
        token_.notify_one();
    }

private:
    std::atomic<std::uint32_t> token_{0};
};

}  // namespace aspen::detail
