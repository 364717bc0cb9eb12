// A tiny seeded generator (SplitMix64) for the stress workloads: 8 bytes of
// state, so coroutine frames that hold one stay small even with millions
// alive.
#pragma once

#include <cstdint>

namespace stress_util {

struct splitmix {
    std::uint64_t x;
    std::uint64_t operator()() {
        std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

}  // namespace stress_util
