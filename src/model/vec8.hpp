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
#define MOE_VEC8_AVX512_CLONE 1  // the AVX-512 CPUs run an AVX-512 build of these functions
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

// Sixteen floats as one value: one register in the AVX-512 clone, two or four
// elsewhere. Each lane goes through the same operations as F8's, so code
// that takes sixteen lanes at a time gives the bits it gives eight at a time.
using F8x2 = float __attribute__((vector_size(64)));
template <class V>
constexpr int32_t kLanesOf = int32_t(sizeof(V) / sizeof(float));
template <class V>
MOE_VEC8_INLINE V load_lanes(const float *p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class V>
MOE_VEC8_INLINE void store_lanes(float *p, V v) {
    std::memcpy(p, &v, sizeof v);
}

// The int32 vector with V's lanes, as V's comparisons give.
using I8x2 = int32_t __attribute__((vector_size(64)));
template <class V>
struct IntLanesOf;
template <>
struct IntLanesOf<F8> {
    using type = I8;
};
template <>
struct IntLanesOf<F8x2> {
    using type = I8x2;
};
template <class V>
using IntLanes = typename IntLanesOf<V>::type;

// Lanewise choices written as whole-vector operations: a loop over the lanes
// would be compiled one lane at a time.
template <class V>
MOE_VEC8_INLINE IntLanes<V> bits_of(V v) {
    IntLanes<V> b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}
template <class V>
MOE_VEC8_INLINE V from_bits(IntLanes<V> b) {
    V v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}
// mask lanes are all ones (take a) or all zeros (take b), as comparisons give.
template <class V>
MOE_VEC8_INLINE V select_lanes(IntLanes<V> mask, V a, V b) {
    return from_bits<V>((bits_of(a) & mask) | (bits_of(b) & ~mask));
}
MOE_VEC8_INLINE F8 select8(I8 mask, F8 a, F8 b) { return select_lanes<F8>(mask, a, b); }
MOE_VEC8_INLINE F8 abs8(F8 v) { return from_bits<F8>(bits_of(v) & 0x7fffffff); }

// exp(x) for x <= 0 in each of V's lanes (eight or sixteen), the same float
// operations in every lane and every clone, eight or sixteen at a time where
// expf is one call per value. x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2 / 2, ln2 split into a part whose products
// with n are exact and the rest; exp(r) by the classic degree-6
// single-precision polynomial; 2^n put in the exponent bits. Inputs below -87
// (results under 2^-125) are clamped there, which keeps 2^n a normal number.
// n comes from a copy that is also finite for NaN and never above 0 (so its
// conversion to an integer is always defined); a NaN input still gives NaN
// through r.
template <class V>
MOE_VEC8_INLINE V exp_nonpositive(V x) {
    const V low = V{} - 87.0f;
    const V xn = select_lanes<V>(x >= low, select_lanes<V>(x <= 0.0f, x, V{}), low);  // NaN: -87
    x = select_lanes<V>(x < low, low, x);
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const V n = (xn * 1.44269504088896341f + kRound) - kRound;
    const V r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const V e = (p * (r * r) + r) + 1.0f;
    const IntLanes<V> bits = (__builtin_convertvector(n, IntLanes<V>) + 127) << 23;
    return e * from_bits<V>(bits);
}
MOE_VEC8_INLINE F8 exp8_nonpositive(F8 x) { return exp_nonpositive(x); }

}  // namespace
}  // namespace moe::vec8
