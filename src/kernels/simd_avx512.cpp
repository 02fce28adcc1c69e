// AVX-512 (F/BW/VL/DQ/VNNI) kernels: decoders of the integer block sums for
// the shared row loops (quant_rows.hpp). The float operations are the shared
// ones, so results are bit-identical to the scalar reference.
//
// Legacy nibble formats (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) take eight
// blocks in four 512-bit registers: 64-bit lane j holds 8 consecutive
// weights of block j, so four vpdpbusd leave two int32 per block. Each
// token's activations are copied once per call into the same order. Weights
// are unsigned (Q4_0 +8, Q5_0 +16, Q8_0 +128, IQ4_NL levels +128, MXFP4
// values +12); the offset times the activation block sum is subtracted. K-quants multiply unsigned weights by activations with
// vpdpbusd too, pack the int32 sums of each sub-block (int16 range) with
// vpackssdw and apply the sub-block scales with vpdpwssd (Q2_K and IQ4_XS
// differ: see simd_avx512_lowbit.hpp).

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 headers start some intrinsics from a deliberately
// undefined register value and then warn about it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <array>

#include "kernels/dispatch.hpp"
#include "kernels/krows_unrolled.hpp"
#include "kernels/mxfp4_rows.hpp"
#include "kernels/quant_rows.hpp"
#include "kernels/simd_avx512_blocks.hpp"
#include "kernels/simd_avx512_lowbit.hpp"

namespace moe::kernels::detail {
namespace {

// --- legacy nibble formats, eight blocks per group ---------------------------------

// Four 16-byte pieces kStride bytes apart, piece k in 128-bit lane k.
template <size_t kStride>
MOE_ALWAYS_INLINE __m512i lanes4(const uint8_t *p) {
    const auto piece = [p](int k) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + k * kStride)); };
    const __m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(piece(0)), piece(1), 1);
    return _mm512_inserti32x4(_mm512_inserti32x4(v, piece(2), 2), piece(3), 3);
}

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

    // Q4_0: the group's only fields, the eight d, all lie in its first 128
    // bytes (block 7's d ends at byte 128), so one permute of the first two
    // loads gathers them instead of two permutes and a blend.
    static constexpr bool kScalesInFirstLoads = !B::kMin && !B::kFive && 7 * S + B::kD + 2 <= 128;
    static constexpr std::array<int16_t, 32> scale_index() {
        std::array<int16_t, 32> idx{};
        for (int j = 0; j < 8; ++j) idx[j] = static_cast<int16_t>(word(0, j * S + B::kD));
        return idx;
    }
    static constexpr std::array<int16_t, 32> kScaleIndex = scale_index();

    // MXFP4: a scale byte per block (the exponent at kD), all eight in the
    // group's first 128 bytes, gathered by the same word permute as Q4_0's d.
    static constexpr bool kExponentScales = requires { B::scales_of(__m256i{}); };
    static_assert(!kExponentScales || 7 * S + B::kD < 128);
    static constexpr std::array<int32_t, 8> kExponentShift = [] {
        std::array<int32_t, 8> c{};
        for (int j = 0; j < 8; ++j) c[j] = (j * S + B::kD) % 2 ? 8 : 0;
        return c;
    }();

    // Q4_0 and Q4_1 read each block's quants with its own 16-byte load into
    // its lane instead of two word permutes over the group: fewer
    // cross-lane operations, and while streaming from memory 1.05-1.2x the
    // bandwidth (docs/performance.md), although the L2-resident loop is a
    // little slower. Q5_0 / Q5_1 measured no better this way.
    static constexpr bool kQuantsByLanes = !B::kFive;

    struct Group {
        __m512i z[4];  // z[e]: 64-bit lane L = weights 8e..8e+7 of block kOrder[L]
        __m256 dw, mw;
    };

    MOE_ALWAYS_INLINE static Group decode8(const uint8_t *w) {
        const __m512i a0 = load512(w + base(0)), a1 = load512(w + base(0) + 64);
        const __m512i b0 = load512(w + base(1)), b1 = load512(w + base(1) + 64);
        __m512i qa, qb;  // 128-bit lane k: the 16 quant bytes of block k (qa) and 4 + k (qb)
        if constexpr (kQuantsByLanes) {
            qa = lanes4<S>(w + B::kQs);
            qb = lanes4<S>(w + 4 * S + B::kQs);
        } else {
            const __m512i qidx[2] = {_mm512_loadu_si512(kQuantIndex.data()), _mm512_loadu_si512(kQuantIndex.data() + 32)};
            qa = _mm512_permutex2var_epi16(a0, qidx[0], a1);
            qb = _mm512_permutex2var_epi16(b0, qidx[1], b1);
        }
        Group g;
        __m512i fields;
        if constexpr (kExponentScales) {
            // The eight exponent bytes: word permute, then the odd ones shifted down.
            const __m512i words = _mm512_permutex2var_epi16(a0, _mm512_loadu_si512(kScaleIndex.data()), a1);
            const __m256i e =
                _mm256_srlv_epi32(_mm256_cvtepu16_epi32(_mm512_castsi512_si128(words)), load256(kExponentShift.data()));
            g.dw = B::scales_of(_mm256_and_si256(e, _mm256_set1_epi32(0xFF)));
        } else if constexpr (kScalesInFirstLoads) {
            fields = _mm512_permutex2var_epi16(a0, _mm512_loadu_si512(kScaleIndex.data()), a1);
            g.dw = _mm256_cvtph_ps(_mm512_castsi512_si128(fields));
        } else {
            const __m512i fidx[2] = {_mm512_loadu_si512(kFieldIndex.data()), _mm512_loadu_si512(kFieldIndex.data() + 32)};
            fields = _mm512_mask_blend_epi16(kHalf1Fields, _mm512_permutex2var_epi16(a0, fidx[0], a1),
                                             _mm512_permutex2var_epi16(b0, fidx[1], b1));
            const __m512 dm = _mm512_cvtph_ps(_mm512_castsi512_si256(fields));
            g.dw = _mm512_castps512_ps256(dm);
            if constexpr (B::kMin) g.mw = _mm512_extractf32x8_ps(dm, 1);
        }
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        __m512i la = _mm512_and_si512(qa, low4), lb = _mm512_and_si512(qb, low4);
        __m512i ha = _mm512_and_si512(_mm512_srli_epi16(qa, 4), low4);
        __m512i hb = _mm512_and_si512(_mm512_srli_epi16(qb, 4), low4);
        if constexpr (requires { B::levels(); }) {
            // Non-uniform levels (IQ4_NL): each nibble indexes the decoder's table.
            const __m512i table = _mm512_broadcast_i32x4(B::levels());
            la = _mm512_shuffle_epi8(table, la);
            lb = _mm512_shuffle_epi8(table, lb);
            ha = _mm512_shuffle_epi8(table, ha);
            hb = _mm512_shuffle_epi8(table, hb);
        }
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

    MOE_ALWAYS_INLINE static __m256i sum8(const Group &g, const uint8_t *a, size_t) {
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g.z[0], load512(a));
        acc = _mm512_dpbusd_epi32(acc, g.z[1], load512(a + 64));
        acc = _mm512_dpbusd_epi32(acc, g.z[2], load512(a + 128));
        acc = _mm512_dpbusd_epi32(acc, g.z[3], load512(a + 192));
        // Even 32-bit lane 2L: total of block kOrder[L]; back to block order.
        const __m512i sum = _mm512_add_epi32(acc, _mm512_srli_epi64(acc, 32));
        const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
        return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, sum));
    }

    MOE_ALWAYS_INLINE static int32_t sum1(const uint8_t *w, const uint8_t *a) {
        return hsum_i32(DotVnni::run(B::uints(w), load256(a)));
    }

    static void arrange(const uint8_t *act, size_t blk_bytes, size_t qs, int64_t nb, uint8_t *out) {
        arrange_qwords(act, blk_bytes, qs, nb, kOrder, out);
    }
};

// --- K-quants ---------------------------------------------------------------------------

// Q4_K / Q5_K with vpdpbusd: the 128 quant bytes are regrouped in 16-byte
// pieces so that 128-bit lane L of every weight register belongs to
// sub-block 2L (registers 0, 1: low nibbles, elements 0..15 and 16..31 of
// the sub-block) or 2L + 1 (registers 2, 3: high nibbles). Two vpdpbusd per
// parity leave int32 sums of 8 products (|sum| <= 8 * 31 * 127, int16
// range), which vpackssdw packs exactly into int16 and one vpdpwssd
// multiplies by the sub-block scales.
template <bool kFive>
struct Q45K {
    static constexpr size_t kBytes = kFive ? q5_k::bytes : q4_k::bytes;
    static constexpr size_t kQs = kFive ? q5_k::qs : q4_k::qs;
    static constexpr bool kMins = true, kArranged = true;
    using Partial = __m512i;
    using Fold = Fold512;
    MOE_ALWAYS_INLINE static __m256i total8(const __m512i *x) { return moe::kernels::detail::total8(x); }
    struct Block {
        __m512i v[4];
        __m512i sc;  // int16 lanes 8L..8L+3: scale 2L, 8L+4..8L+7: scale 2L + 1
    };

    // Register i, 128-bit lane L takes activation quants 32 * (2L + i / 2) + 16 * (i % 2) + 0..15.
    static void arrange(const uint8_t *qs, uint8_t *out) {
        for (int i = 0; i < 4; ++i)
            for (int l = 0; l < 4; ++l) std::memcpy(out + 64 * i + 16 * l, qs + 32 * (2 * l + i / 2) + 16 * (i % 2), 16);
    }

    // vpshufb control: int16 lane p of 128-bit lane L takes scale 2L + p / 4
    // (the scales as int16 in every 128-bit lane).
    static constexpr std::array<int8_t, 64> scale_picks() {
        std::array<int8_t, 64> c{};
        for (int l = 0; l < 4; ++l)
            for (int p = 0; p < 8; ++p) {
                const int s = 2 * l + p / 4;
                c[16 * l + 2 * p] = static_cast<int8_t>(2 * s);
                c[16 * l + 2 * p + 1] = static_cast<int8_t>(2 * s + 1);
            }
        return c;
    }
    // Fifth-bit tests: qh byte e, bit s belongs to element e of sub-block s.
    static constexpr std::array<uint8_t, 256> fifth_bits() {
        std::array<uint8_t, 256> c{};
        for (int i = 0; i < 4; ++i)
            for (int l = 0; l < 4; ++l)
                for (int p = 0; p < 16; ++p) c[64 * i + 16 * l + p] = static_cast<uint8_t>(1u << (2 * l + i / 2));
        return c;
    }
    static constexpr std::array<int8_t, 64> kScalePicks = scale_picks();
    static constexpr std::array<uint8_t, 256> kFifthBits = fifth_bits();

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        const __m128i head = k_head(w, dm);
        mins = static_cast<uint64_t>(_mm_extract_epi64(head, 1));
        const __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(head));
        Block k = quants(w);
        k.sc = _mm512_shuffle_epi8(sc16, _mm512_loadu_si512(kScalePicks.data()));
        return k;
    }

    // The quants of one block (k.sc left unset).
    MOE_ALWAYS_INLINE static Block quants(const uint8_t *w) {
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        const __m512i q0 = load512(w + kQs), q1 = load512(w + kQs + 64);
        // 128-bit lanes of q0: quant bytes 0-15, 16-31 (sub-blocks 0, 1), 32-47, 48-63 (2, 3); of q1: 4, 5, 6, 7.
        const __m512i t0 = _mm512_shuffle_i64x2(q0, q1, _MM_SHUFFLE(2, 0, 2, 0));  // elements 0..15
        const __m512i t1 = _mm512_shuffle_i64x2(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));  // elements 16..31
        Block k;
        k.v[0] = _mm512_and_si512(t0, low4);
        k.v[1] = _mm512_and_si512(t1, low4);
        k.v[2] = _mm512_and_si512(_mm512_srli_epi16(t0, 4), low4);
        k.v[3] = _mm512_and_si512(_mm512_srli_epi16(t1, 4), low4);
        if constexpr (kFive) {
            // qh byte e, bit s: fifth bit of element e of sub-block s.
            const __m512i h0 = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q5_k::qh)));
            const __m512i h1 = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q5_k::qh + 16)));
            const __m512i bit4 = _mm512_set1_epi8(0x10);
            for (int i = 0; i < 4; ++i)
                k.v[i] = _mm512_mask_add_epi8(
                    k.v[i], _mm512_test_epi8_mask(i % 2 ? h1 : h0, _mm512_loadu_si512(kFifthBits.data() + 64 * i)),
                    k.v[i], bit4);
        }
        return k;
    }

    // The heads of 8 consecutive super-blocks, decoded together (k_head on
    // four blocks per register).
    struct Head {
        __m256i dm;     // lane j: d | dmin << 16 of block j
        __m512i mins;   // byte 8j + s: min s of block j
        __m512i sc[2];  // int16 lane 8(j % 4) + s of sc[j / 4]: scale s of block j
    };
    static constexpr std::array<int16_t, 128> head_picks() {
        std::array<int16_t, 128> c{};
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 4; ++l)
                for (int p = 0; p < 8; ++p) c[32 * j + 8 * l + p] = static_cast<int16_t>(8 * j + 2 * l + p / 4);
        return c;
    }
    static constexpr std::array<int16_t, 128> kHeadPicks = head_picks();

    // k_head's decoding of the 12 scale bytes, per 128-bit lane.
    MOE_ALWAYS_INLINE static __m512i scales_mins4(__m512i x) {
        const __m512i a = _mm512_shuffle_epi8(
            x, _mm512_broadcast_i32x4(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15)));
        const __m512i b = _mm512_shuffle_epi8(
            x, _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11)));
        const __m512i low = _mm512_and_si512(_mm512_mask_blend_epi16(0xC0C0C0C0u, a, _mm512_srli_epi16(a, 4)),
                                             _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)));
        return _mm512_or_si512(low, _mm512_and_si512(_mm512_srli_epi16(b, 2), _mm512_set1_epi8(0x30)));
    }
    // Blocks `stride` bytes apart: consecutive in a row (kBytes), or the same
    // block of eight consecutive rows (the row size).
    MOE_ALWAYS_INLINE static Head head8(const uint8_t *w, size_t stride = kBytes) {
        const __m512i x0 = blocks4_128(w, stride), x1 = blocks4_128(w + 4 * stride, stride);
        const __m512i h0 = scales_mins4(x0), h1 = scales_mins4(x1);
        Head h;
        h.dm = lane_words8<0>(x0, x1);
        h.mins = _mm512_permutex2var_epi64(h0, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), h1);
        const __m512i sc = _mm512_permutex2var_epi64(h0, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), h1);
        h.sc[0] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sc));
        h.sc[1] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sc, 1));
        return h;
    }
    // sum_s m_s * bpair_s for the eight blocks of h against the pair sums
    // from bpair: of eight consecutive blocks, or of one (kOneBlock: the same
    // block of eight rows).
    template <bool kOneBlock>
    MOE_ALWAYS_INLINE static __m256i min_sums8(const Head &h, const int16_t *bpair) {
        if constexpr (kOneBlock) {
            const __m512i bp = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(bpair)));
            return min_sums8(h.mins, bp, bp);
        } else {
            return min_sums8(h.mins, _mm512_loadu_si512(bpair), _mm512_loadu_si512(bpair + 32));
        }
    }
    // bpair_lo (hi): the pair sums against blocks 0..3 (4..7), 8 int16 per 128-bit lane.
    MOE_ALWAYS_INLINE static __m256i min_sums8(__m512i mins, __m512i bpair_lo, __m512i bpair_hi) {
        // 128-bit lane L of lo (hi): the four pair products of block L (4 + L).
        const __m512i lo = _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(mins)), bpair_lo);
        const __m512i hi = _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(mins, 1)), bpair_hi);
        const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(lo, hi), _mm512_unpackhi_epi32(lo, hi));
        const __m512i v = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
        // Dwords 0, 1 of lane L: blocks L, 4 + L.
        return _mm512_castsi512_si256(
            _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), v));
    }
    // Block j of the group whose head is h.
    template <int J>
    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, const Head &h) {
        Block k = quants(w);
        k.sc = _mm512_permutexvar_epi16(_mm512_loadu_si512(kHeadPicks.data() + 32 * (J % 4)), h.sc[J / 4]);
        return k;
    }

    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *a, const uint8_t *) {
        __m512i even = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k.v[0], load512(a));
        __m512i odd = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k.v[2], load512(a + 128));
        even = _mm512_dpbusd_epi32(even, k.v[1], load512(a + 64));
        odd = _mm512_dpbusd_epi32(odd, k.v[3], load512(a + 192));
        return _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(even, odd), k.sc);
    }
};

// Q6_K: register i holds elements 64i..64i+63 (128-bit lane L = group 4i + L),
// stored +32 (0..63, unsigned). vpdpbusd leaves int32 sums of 4 products
// (|sum| <= 4 * 63 * 128, int16 range) per register; registers 0, 1 and 2, 3
// are packed exactly into int16 (vpackssdw) and multiplied by the group
// scales with one vpdpwssd each; the +32 is removed with the activation
// block sums (-32 * scale of group g times bsum g).
struct Q6K : KDecoder512<q6_k::bytes, false> {
    using Block = CorrBlock;  // corr: -32 * scale of group g

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
        group_pair_scales(sc16, k.sc);
        k.corr = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32)));
        return k;
    }

    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        return corrected_group_sums512(k, act);
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
    Tiled<KRowsUnrolled<Q45K<false>>>::install(t, GgmlType::Q4_K);
    Tiled<KRowsUnrolled<Q45K<true>>>::install(t, GgmlType::Q5_K);
    Tiled<KRowsUnrolled<Q6K>>::install(t, GgmlType::Q6_K);
    Tiled<KRowsUnrolled<Q2K512>>::install(t, GgmlType::Q2_K);
    Tiled<KRowsUnrolled<Q3K512>>::install(t, GgmlType::Q3_K);
    Tiled<KRowsUnrolled<IQ4XS512>>::install(t, GgmlType::IQ4_XS);
    Tiled<LegacyRows<Nibbles8<IQ4NLDec>>>::install(t, GgmlType::IQ4_NL);
    Tiled<LegacyRows<Nibbles8<Mxfp4Dec>>>::install(t, GgmlType::MXFP4);
}

bool isa_has_kernels(Isa) { return true; }

}  // namespace moe::kernels::detail
