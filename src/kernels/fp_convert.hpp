// Exact half/bfloat16 <-> f32 conversions as inline integer code, so every
// kernel file (whatever its ISA flags) converts identically.
#pragma once

#include <cstdint>
#include <cstring>

namespace moe::kernels::detail {
// Internal linkage: these are compiled into files with different ISA flags,
// and the linker must never substitute one file's copy for another's.
namespace {

inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float f32_from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline float half_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        // Zero or subnormal: mant * 2^-24 is exact in f32.
        const float v = static_cast<float>(mant) * 0x1p-24f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// IEEE round to nearest even; overflow gives infinity, NaN stays a quiet NaN.
inline uint16_t f32_to_half(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // |f| >= 65536 or inf
    const int32_t e = static_cast<int32_t>(ax >> 23) - 127;
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    if (e >= -14) {
        uint32_t h = (static_cast<uint32_t>(e + 15) << 10) + ((mant >> 13) & 0x3ffu);
        const uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach inf: correct
        return static_cast<uint16_t>(sign | h);
    }
    if (e < -25) return sign;  // below half the smallest subnormal (ties to even = 0)
    const uint32_t shift = static_cast<uint32_t>(-(e + 1));  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may become the smallest normal: correct
    return static_cast<uint16_t>(sign | q);
}

inline float bf16_to_f32_inline(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16_inline(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline uint16_t load_u16(const uint8_t *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline float load_half(const uint8_t *p) { return half_to_f32(load_u16(p)); }

}  // namespace
}  // namespace moe::kernels::detail
