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

#include <array>

#include "kernels/dispatch.hpp"
#include "kernels/quant_rows.hpp"

namespace moe::kernels::detail {
namespace {

struct DotVnni {
    MOE_ALWAYS_INLINE static __m256i run(__m256i u, __m256i a) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a); }
};

MOE_ALWAYS_INLINE __m512i load512(const uint8_t *p) { return _mm512_loadu_si512(p); }
MOE_ALWAYS_INLINE __m256i load256(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
// Eight vectors of 16 int32 partial sums -> lane j = total of x[j].
MOE_ALWAYS_INLINE __m256i total8(const __m512i *x) {
    __m512i p[4];  // 128-bit lanes: partials of x[2i], x[2i+1], x[2i], x[2i+1]
    for (int i = 0; i < 4; ++i)
        p[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]),
                                _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]));
    __m512i q[2];  // 128-bit lanes: partials of x[4k] .. x[4k+3]
    for (int k = 0; k < 2; ++k)
        q[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(p[2 * k], p[2 * k + 1]),
                                _mm512_unpackhi_epi64(p[2 * k], p[2 * k + 1]));
    // 128-bit lanes 0, 1: partials of x[0..3]; 2, 3: of x[4..7].
    const __m512i r = _mm512_add_epi32(_mm512_shuffle_i64x2(q[0], q[1], 0x88), _mm512_shuffle_i64x2(q[0], q[1], 0xDD));
    const __m512i total = _mm512_add_epi32(_mm512_shuffle_i64x2(r, r, 0x08), _mm512_shuffle_i64x2(r, r, 0x0D));
    return _mm512_castsi512_si256(total);
}

// --- legacy nibble formats, eight blocks per group ---------------------------------

template <typename B>
struct Nibbles8 : B {
    static constexpr bool kArranged = true;
    static constexpr size_t S = B::kBytes, kGroup = 8 * S;
    // 64-bit lane L of the weight registers holds block kOrder[L] (blocks k
    // and 4 + k share 128-bit lane k).
    static constexpr int kOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};

    // Blocks 4h..4h+3 lie in the 128 bytes from base(h) (inside the group).
    static constexpr size_t base(int h) { return 4 * h * S < kGroup - 128 ? 4 * h * S : kGroup - 128; }
    static constexpr int word(int h, size_t offset) { return static_cast<int>((offset - base(h)) / 2); }

    // Word indices (into the two 64-byte loads of half h, 32 per half) of the
    // quants: 128-bit lane k = the 16 quant bytes of block 4h + k.
    static constexpr std::array<int16_t, 64> quant_index() {
        std::array<int16_t, 64> idx{};
        for (int h = 0; h < 2; ++h)
            for (int k = 0; k < 4; ++k)
                for (int i = 0; i < 8; ++i)
                    idx[32 * h + 8 * k + i] = static_cast<int16_t>(word(h, (4 * h + k) * S + B::kQs + 2 * i));
        return idx;
    }
    // Words 0..7: d of blocks 0..7; 8..15: m (kMin); 16..31: qh (kFive) of
    // block kOrder[p] as the 32-bit word p. Entries of the other half are 0.
    static constexpr std::array<int16_t, 64> field_index() {
        std::array<int16_t, 64> idx{};
        for (int h = 0; h < 2; ++h) {
            int16_t *x = idx.data() + 32 * h;
            for (int j = 4 * h; j < 4 * h + 4; ++j) {
                x[j] = static_cast<int16_t>(word(h, j * S + B::kD));
                if (B::kMin) x[8 + j] = static_cast<int16_t>(word(h, j * S + B::kD + 2));
            }
            if (B::kFive)
                for (int p = 0; p < 8; ++p)
                    if (kOrder[p] / 4 == h) {
                        x[16 + 2 * p] = static_cast<int16_t>(word(h, kOrder[p] * S + B::kQh));
                        x[17 + 2 * p] = static_cast<int16_t>(word(h, kOrder[p] * S + B::kQh + 2));
                    }
        }
        return idx;
    }
    static constexpr std::array<int16_t, 64> kQuantIndex = quant_index(), kFieldIndex = field_index();
    static constexpr __mmask32 kHalf1Fields = 0xF0u | (0xF0u << 8) | (0xCCCCCCCCu & 0xFFFF0000u);

    struct Group {
        __m512i z[4];  // z[e]: 64-bit lane L = weights 8e..8e+7 of block kOrder[L]
        __m256 dw, mw;
    };

    MOE_ALWAYS_INLINE static Group decode8(const uint8_t *w) {
        const __m512i qidx[2] = {_mm512_loadu_si512(kQuantIndex.data()), _mm512_loadu_si512(kQuantIndex.data() + 32)};
        const __m512i fidx[2] = {_mm512_loadu_si512(kFieldIndex.data()), _mm512_loadu_si512(kFieldIndex.data() + 32)};
        const __m512i a0 = load512(w + base(0)), a1 = load512(w + base(0) + 64);
        const __m512i b0 = load512(w + base(1)), b1 = load512(w + base(1) + 64);
        const __m512i qa = _mm512_permutex2var_epi16(a0, qidx[0], a1);  // blocks 0..3
        const __m512i qb = _mm512_permutex2var_epi16(b0, qidx[1], b1);  // blocks 4..7
        const __m512i fields = _mm512_mask_blend_epi16(kHalf1Fields, _mm512_permutex2var_epi16(a0, fidx[0], a1),
                                                       _mm512_permutex2var_epi16(b0, fidx[1], b1));
        Group g;
        const __m512 dm = _mm512_cvtph_ps(_mm512_castsi512_si256(fields));
        g.dw = _mm512_castps512_ps256(dm);
        if constexpr (B::kMin) g.mw = _mm512_extractf32x8_ps(dm, 1);
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        const __m512i la = _mm512_and_si512(qa, low4), lb = _mm512_and_si512(qb, low4);
        const __m512i ha = _mm512_and_si512(_mm512_srli_epi16(qa, 4), low4);
        const __m512i hb = _mm512_and_si512(_mm512_srli_epi16(qb, 4), low4);
        g.z[0] = _mm512_unpacklo_epi64(la, lb);
        g.z[1] = _mm512_unpackhi_epi64(la, lb);
        g.z[2] = _mm512_unpacklo_epi64(ha, hb);
        g.z[3] = _mm512_unpackhi_epi64(ha, hb);
        if constexpr (B::kFive) {
            // 64-bit lane L = qh of block kOrder[L]; byte e of it holds the fifth bits of z[e].
            const __m512i qh = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(fields, 1));
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

    MOE_ALWAYS_INLINE static __m256i sums8(const Group &g, const uint8_t *a, size_t) {
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g.z[0], load512(a));
        acc = _mm512_dpbusd_epi32(acc, g.z[1], load512(a + 64));
        acc = _mm512_dpbusd_epi32(acc, g.z[2], load512(a + 128));
        acc = _mm512_dpbusd_epi32(acc, g.z[3], load512(a + 192));
        // Even 32-bit lane 2L: total of block kOrder[L]; back to block order.
        const __m512i t = _mm512_add_epi32(acc, _mm512_srli_epi64(acc, 32));
        const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
        return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, t));
    }

    MOE_ALWAYS_INLINE static int32_t sum1(const uint8_t *w, const uint8_t *a) {
        return hsum_i32(DotVnni::run(B::uints(w), load256(a)));
    }

    static void arrange(const uint8_t *act, size_t blk_bytes, size_t qs, int64_t nb, uint8_t *out) {
        arrange_qwords(act, blk_bytes, qs, nb, kOrder, out);
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
    using Partial = __m512i;
    MOE_ALWAYS_INLINE static __m256i total8(const __m512i *x) { return moe::kernels::detail::total8(x); }
    struct Block {
        __m512i v[4];
        __m512i sc[4];  // int16 scale per lane of the vpmaddubsw result
    };

    static void arrange(const uint8_t *qs, uint8_t *out) {
        static constexpr int kPiece[8] = {0, 2, 1, 3, 4, 6, 5, 7};
        for (int i = 0; i < 8; ++i) std::memcpy(out + 32 * i, qs + 32 * kPiece[i], 32);
    }

    // vpshufb controls: register i takes scale kA[i] in int16 lanes 0..15 and
    // kB[i] in lanes 16..31 (scales as int16 in every 128-bit lane).
    static constexpr std::array<int8_t, 256> scale_picks() {
        constexpr int kA[4] = {0, 1, 4, 5}, kB[4] = {2, 3, 6, 7};
        std::array<int8_t, 256> c{};
        for (int i = 0; i < 4; ++i)
            for (int l = 0; l < 32; ++l) {
                const int s = l < 16 ? kA[i] : kB[i];
                c[64 * i + 2 * l] = static_cast<int8_t>(2 * s);
                c[64 * i + 2 * l + 1] = static_cast<int8_t>(2 * s + 1);
            }
        return c;
    }
    // Fifth-bit tests: qh byte l, bit 2k (2k+1) belongs to element 64k + l (64k + 32 + l).
    static constexpr std::array<uint8_t, 256> fifth_bits() {
        constexpr int kLo[4] = {0, 1, 4, 5}, kHi[4] = {2, 3, 6, 7};
        std::array<uint8_t, 256> c{};
        for (int i = 0; i < 4; ++i)
            for (int l = 0; l < 64; ++l) c[64 * i + l] = static_cast<uint8_t>(1u << (l < 32 ? kLo[i] : kHi[i]));
        return c;
    }
    static constexpr std::array<int8_t, 256> kScalePicks = scale_picks();
    static constexpr std::array<uint8_t, 256> kFifthBits = fifth_bits();

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        const __m128i head = k_head(w, dm);
        mins = static_cast<uint64_t>(_mm_extract_epi64(head, 1));
        const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(head));
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        const __m512i q0 = load512(w + kQs), q1 = load512(w + kQs + 64);
        Block k;
        k.v[0] = _mm512_and_si512(q0, low4);
        k.v[1] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), low4);
        k.v[2] = _mm512_and_si512(q1, low4);
        k.v[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), low4);
        if constexpr (kFive) {
            const __m512i h = _mm512_broadcast_i64x4(load256(w + q5_k::qh));
            const __m512i bit4 = _mm512_set1_epi8(0x10);
            for (int i = 0; i < 4; ++i)
                k.v[i] = _mm512_mask_add_epi8(k.v[i], _mm512_test_epi8_mask(h, _mm512_loadu_si512(kFifthBits.data() + 64 * i)),
                                              k.v[i], bit4);
        }
        for (int i = 0; i < 4; ++i) k.sc[i] = _mm512_shuffle_epi8(sc16, _mm512_loadu_si512(kScalePicks.data() + 64 * i));
        return k;
    }

    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *a, const uint8_t *) {
        __m512i acc = _mm512_setzero_si512();
        for (int i = 0; i < 4; ++i)
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(k.v[i], load512(a + 64 * i)), k.sc[i]);
        return acc;
    }
};

// Q6_K: register i holds elements 64i..64i+63 (groups 4i..4i+3), stored +32.
// int16 lane l of register i's products takes the scale of group 4i + l / 8.
constexpr std::array<int16_t, 128> q6_group_of() {
    std::array<int16_t, 128> c{};
    for (int i = 0; i < 4; ++i)
        for (int l = 0; l < 32; ++l) c[32 * i + l] = static_cast<int16_t>(4 * i + l / 8);
    return c;
}

struct Q6K {
    static constexpr std::array<int16_t, 128> kGroupOf = q6_group_of();
    static constexpr size_t kBytes = q6_k::bytes;
    static constexpr bool kMins = false, kArranged = false;
    using Partial = __m512i;
    MOE_ALWAYS_INLINE static __m256i total8(const __m512i *x) { return moe::kernels::detail::total8(x); }
    struct Block {
        __m512i v[4];
        __m512i sc[4];
        __m512i corr;  // int16 lanes 0..15: -32 * scale of group g
    };

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = load_u32(w + q6_k::d - 2);
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
        for (int i = 0; i < 4; ++i) k.sc[i] = _mm512_permutexvar_epi16(_mm512_loadu_si512(kGroupOf.data() + 32 * i), scz);
        k.corr = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32)));
        return k;
    }

    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        __m512i acc = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(load256(act + q8_k::bsums)),
                                          k.corr);
        for (int i = 0; i < 4; ++i)
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(k.v[i], load512(act + q8_k::qs + 64 * i)), k.sc[i]);
        return acc;
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
