// Saturating unsigned arithmetic: a count or size that would wrap stays at
// UINT64_MAX, so it remains the largest instead of becoming a small number.
#pragma once

#include <cstdint>

namespace moe {

inline uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

inline uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

}  // namespace moe
