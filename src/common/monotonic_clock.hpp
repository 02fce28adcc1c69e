// Nanoseconds on the monotonic clock: every duration the engine reports
// (step, compute, waits, device busy time) is a difference of two of these.
#pragma once

#include <chrono>
#include <cstdint>

namespace moe {

inline uint64_t monotonic_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

}  // namespace moe
