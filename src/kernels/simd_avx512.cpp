// AVX-512 (F/BW/VL/DQ/VNNI) kernels: decoders of the integer block sums for
// the shared row loops (quant_rows.hpp). The float operations are the shared
// ones, so results are bit-identical to the scalar reference.
//
// Legacy nibble formats (Q4_0, Q4_1, Q5_0, Q5_1) take eight blocks in four
// 512-bit registers: 64-bit lane j holds 8 consecutive weights of block j, so
// four vpdpbusd leave two int32 per block. Each token's activations are
// copied once per call into the same order. Weights are unsigned (Q4_0 +8,
// Q5_0 +16, Q8_0 +128); the offset times the activation block sum is
// subtracted. K-quants multiply unsigned weights by activations (vpmaddubsw)
// and apply the sub-block scales with vpdpwssd.

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 headers start some intrinsics from a deliberately
// undefined register value and then warn about it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/dispatch.hpp"
#include "kernels/quant_rows.hpp"

namespace moe::kernels::detail {
namespace {

struct DotVnni {
    static __m256i run(__m256i u, __m256i a) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a); }
};

inline __m512i load512(const uint8_t *p) { return _mm512_loadu_si512(p); }
inline __m256i load256(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
inline __m256i fold(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }

// Bytes 0..31 = lo, 32..63 = hi.
inline __m512i halves8(char lo, char hi) {
    return _mm512_inserti64x4(_mm512_set1_epi8(lo), _mm256_set1_epi8(hi), 1);
}

// --- legacy nibble formats, eight blocks per group ---------------------------------

template <typename B>
struct Nibbles8 : B {
    static constexpr bool kArranged = true;
    struct Group {
        __m512i z[4];  // z[e]: lane j = weights 8e..8e+7 of block j
    };

    // 16 bytes of four blocks, 2 * kBytes apart, as the four 128-bit lanes.
    static __m512i lanes4(const uint8_t *p) {
        constexpr size_t s = 2 * B::kBytes;
        __m512i q = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + s)), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 2 * s)), 2);
        return _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 3 * s)), 3);
    }

    static Group decode8(const uint8_t *w) {
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        // Lane k of a: block 2k; of b: block 2k+1.
        const __m512i a = lanes4(w + B::kQs), b = lanes4(w + B::kBytes + B::kQs);
        const __m512i la = _mm512_and_si512(a, low4), lb = _mm512_and_si512(b, low4);
        const __m512i ha = _mm512_and_si512(_mm512_srli_epi16(a, 4), low4);
        const __m512i hb = _mm512_and_si512(_mm512_srli_epi16(b, 4), low4);
        Group g;
        g.z[0] = _mm512_unpacklo_epi64(la, lb);
        g.z[1] = _mm512_unpackhi_epi64(la, lb);
        g.z[2] = _mm512_unpacklo_epi64(ha, hb);
        g.z[3] = _mm512_unpackhi_epi64(ha, hb);
        if constexpr (B::kFive) {
            // 64-bit lane j = qh of block j; byte e of it holds the fifth bits of z[e].
            const __m512i qh = _mm512_cvtepu32_epi64(gather8_u32<B::kBytes>(w + B::kQh));
            const __m512i bits = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ull));
            const __m512i bit4 = _mm512_set1_epi8(0x10);
            for (int e = 0; e < 4; ++e) {
                const __m512i pick = _mm512_broadcast_i32x4(
                    _mm_setr_epi8(e, e, e, e, e, e, e, e, 8 + e, 8 + e, 8 + e, 8 + e, 8 + e, 8 + e, 8 + e, 8 + e));
                const __mmask64 m = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, pick), bits);
                g.z[e] = _mm512_mask_add_epi8(g.z[e], m, g.z[e], bit4);
            }
        }
        return g;
    }

    static __m256i sums8(const Group &g, const uint8_t *a, size_t) {
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g.z[0], load512(a));
        acc = _mm512_dpbusd_epi32(acc, g.z[1], load512(a + 64));
        acc = _mm512_dpbusd_epi32(acc, g.z[2], load512(a + 128));
        acc = _mm512_dpbusd_epi32(acc, g.z[3], load512(a + 192));
        return _mm512_cvtepi64_epi32(_mm512_add_epi64(acc, _mm512_srli_epi64(acc, 32)));
    }

    static int32_t sum1(const uint8_t *w, const uint8_t *a) {
        return hsum_i32(DotVnni::run(B::uints(w), load256(a)));
    }

    static void arrange(const uint8_t *act, size_t blk_bytes, size_t qs, int64_t nb, uint8_t *out) {
        arrange_qwords(act, blk_bytes, qs, nb, out);
    }
};

// --- K-quants ---------------------------------------------------------------------------

// Q4_K / Q5_K: register i holds 32-element sub-blocks (a_i, b_i) =
// (0,2), (1,3), (4,6), (5,7) (low and high nibbles of 64 quant bytes).
template <bool kFive>
struct Q45K {
    static constexpr size_t kBytes = kFive ? q5_k::bytes : q4_k::bytes;
    static constexpr size_t kQs = kFive ? q5_k::qs : q4_k::qs;
    static constexpr bool kMins = true, kArranged = true;
    struct Block {
        __m512i v[4];
        __m512i sc[4];  // int16 scale per lane of the vpmaddubsw result
    };

    static void arrange(const uint8_t *qs, uint8_t *out) {
        static constexpr int kPiece[8] = {0, 2, 1, 3, 4, 6, 5, 7};
        for (int i = 0; i < 8; ++i) std::memcpy(out + 32 * i, qs + 32 * kPiece[i], 32);
    }

    static Block decode(const uint8_t *w, uint64_t &mins) {
        uint64_t sc;
        k_scales_u64(w + q4_k::scales, sc, mins);
        const __m512i sc16 = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        const __m512i q0 = load512(w + kQs), q1 = load512(w + kQs + 64);
        Block k;
        k.v[0] = _mm512_and_si512(q0, low4);
        k.v[1] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), low4);
        k.v[2] = _mm512_and_si512(q1, low4);
        k.v[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), low4);
        if constexpr (kFive) {
            // qh byte l, bit 2k (2k+1): fifth bit of element 64k + l (64k + 32 + l).
            const __m512i h = _mm512_broadcast_i64x4(load256(w + q5_k::qh));
            const __m512i bit4 = _mm512_set1_epi8(0x10);
            const __m512i test[4] = {halves8(0x01, 0x04), halves8(0x02, 0x08), halves8(0x10, 0x40),
                                     halves8(0x20, static_cast<char>(0x80))};
            for (int i = 0; i < 4; ++i)
                k.v[i] = _mm512_mask_add_epi8(k.v[i], _mm512_test_epi8_mask(h, test[i]), k.v[i], bit4);
        }
        static constexpr short kA[4] = {0, 1, 4, 5}, kB[4] = {2, 3, 6, 7};
        for (int i = 0; i < 4; ++i) {
            const __m512i idx = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_set1_epi16(kA[i])),
                                                   _mm256_set1_epi16(kB[i]), 1);
            k.sc[i] = _mm512_permutexvar_epi16(idx, sc16);
        }
        return k;
    }

    static __m256i sums(const Block &k, const uint8_t *a, const uint8_t *) {
        __m512i acc = _mm512_setzero_si512();
        for (int i = 0; i < 4; ++i)
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(k.v[i], load512(a + 64 * i)), k.sc[i]);
        return fold(acc);
    }
};

// Q6_K: register i holds elements 64i..64i+63 (groups 4i..4i+3), stored +32.
struct Q6K {
    static constexpr size_t kBytes = q6_k::bytes;
    static constexpr bool kMins = false, kArranged = false;
    struct Block {
        __m512i v[4];
        __m512i sc[4];
        __m512i corr;  // int16 lanes 0..15: -32 * scale of group g
    };

    static Block decode(const uint8_t *w, uint64_t &mins) {
        mins = 0;
        const __m512i low4 = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(0x30);
        Block k;
        for (int half = 0; half < 2; ++half) {
            const __m512i l = load512(w + q6_k::ql + 64 * half);
            const __m256i hq = load256(w + q6_k::qh + 32 * half);
            const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(hq), _mm256_srli_epi16(hq, 2), 1);
            // v = low bits | (high bits & 0x30)  (ternary-logic 0xF8: A | (B & C)).
            k.v[2 * half] = _mm512_ternarylogic_epi32(_mm512_and_si512(l, low4), _mm512_slli_epi16(h, 4), two, 0xF8);
            k.v[2 * half + 1] =
                _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), h, two, 0xF8);
        }
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q6_k::scales)));
        const __m512i scz = _mm512_zextsi256_si512(sc16);
        for (int i = 0; i < 4; ++i) {
            const __m512i idx = _mm512_add_epi16(
                _mm512_srli_epi16(_mm512_setr_epi32(0x00010000, 0x00030002, 0x00050004, 0x00070006, 0x00090008,
                                                    0x000b000a, 0x000d000c, 0x000f000e, 0x00110010, 0x00130012,
                                                    0x00150014, 0x00170016, 0x00190018, 0x001b001a, 0x001d001c,
                                                    0x001f001e),
                                  3),
                _mm512_set1_epi16(static_cast<short>(4 * i)));
            k.sc[i] = _mm512_permutexvar_epi16(idx, scz);
        }
        k.corr = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32)));
        return k;
    }

    static __m256i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        __m512i acc = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(load256(act + q8_k::bsums)),
                                          k.corr);
        for (int i = 0; i < 4; ++i)
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(k.v[i], load512(act + q8_k::qs + 64 * i)), k.sc[i]);
        return fold(acc);
    }
};

}  // namespace

void fill_avx512_kernels(KernelTable &t) {
    Tiled<FloatRows<FloatKind::f32>>::install(t, GgmlType::F32);
    Tiled<FloatRows<FloatKind::f16>>::install(t, GgmlType::F16);
    Tiled<FloatRows<FloatKind::bf16>>::install(t, GgmlType::BF16);
    Tiled<LegacyRows<Nibbles8<Q4_0Dec>>>::install(t, GgmlType::Q4_0);
    Tiled<LegacyRows<Nibbles8<Q5_0Dec>>>::install(t, GgmlType::Q5_0);
    Tiled<LegacyRows<Nibbles8<Q4_1Dec>>>::install(t, GgmlType::Q4_1);
    Tiled<LegacyRows<Nibbles8<Q5_1Dec>>>::install(t, GgmlType::Q5_1);
    Tiled<LegacyRows<PerBlock<Q8_0Dec, DotVnni>>>::install(t, GgmlType::Q8_0);
    Tiled<KRows<Q45K<false>>>::install(t, GgmlType::Q4_K);
    Tiled<KRows<Q45K<true>>>::install(t, GgmlType::Q5_K);
    Tiled<KRows<Q6K>>::install(t, GgmlType::Q6_K);
}

bool isa_has_kernels(Isa) { return true; }

}  // namespace moe::kernels::detail
