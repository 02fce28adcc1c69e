// Eight floats as one value, and the float functions the forward pass
// evaluates eight at a time (softmax weights, SwiGLU). Files including this
// compile without FMA contraction and mark their entry points
// MOE_VEC8_CLONES: the same source built for AVX-512, AVX2 and the baseline,
// picked at load time, with the same float operations in every clone, so
// every clone gives the same bits.
//
// GCC lowers F8 to whatever the clone's target has (two SSE registers, one
// AVX register). The helpers taking and returning it are always inlined, so
// the baseline's vector ABI (which GCC warns about) is never used across a
// call.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(MOESTREAM_NO_TARGET_CLONES)
#define MOE_VEC8_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MOE_VEC8_CLONES
#endif
#define MOE_VEC8_INLINE inline __attribute__((always_inline))

namespace moe::vec8 {
namespace {  // internal linkage: each including file keeps its own copies

using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
constexpr int32_t kLanes = 8;

MOE_VEC8_INLINE F8 load8(const float *p) {
    F8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
MOE_VEC8_INLINE void store8(float *p, F8 v) { std::memcpy(p, &v, sizeof v); }

// Lanewise choices written as whole-vector operations: a loop over the lanes
// would be compiled one lane at a time.
MOE_VEC8_INLINE I8 bits_of(F8 v) {
    I8 b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}
MOE_VEC8_INLINE F8 from_bits(I8 b) {
    F8 v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}
// mask lanes are all ones (take a) or all zeros (take b), as comparisons give.
MOE_VEC8_INLINE F8 select8(I8 mask, F8 a, F8 b) { return from_bits((bits_of(a) & mask) | (bits_of(b) & ~mask)); }
MOE_VEC8_INLINE F8 abs8(F8 v) { return from_bits(bits_of(v) & 0x7fffffff); }

// exp(x) for eight x <= 0, the same float operations in every lane and every
// clone, eight at a time where expf is one call per value. x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2 / 2, ln2 split into a part whose products
// with n are exact and the rest; exp(r) by the classic degree-6
// single-precision polynomial; 2^n put in the exponent bits. Inputs below -87
// (results under 2^-125) are clamped there, which keeps 2^n a normal number.
// n comes from a copy that is also finite for NaN and never above 0 (so its
// conversion to an integer is always defined); a NaN input still gives NaN
// through r.
MOE_VEC8_INLINE F8 exp8_nonpositive(F8 x) {
    const F8 low = F8{} - 87.0f;
    const F8 xn = select8(x >= low, select8(x <= 0.0f, x, F8{}), low);  // NaN: -87
    x = select8(x < low, low, x);
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const F8 n = (xn * 1.44269504088896341f + kRound) - kRound;
    const F8 r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    F8 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const F8 e = (p * (r * r) + r) + 1.0f;
    const I8 bits = (__builtin_convertvector(n, I8) + 127) << 23;
    F8 scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return e * scale;
}

}  // namespace
}  // namespace moe::vec8
