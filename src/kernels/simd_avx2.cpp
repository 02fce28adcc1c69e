// AVX2 + FMA + F16C kernels: decoders of the integer block sums for the
// shared row loops (quant_rows.hpp). The float operations are the shared
// ones, so results are bit-identical to the scalar reference.
#include <immintrin.h>

#include <array>
#include <cstring>

#include "kernels/dispatch.hpp"
#include "kernels/mxfp4_rows.hpp"
#include "kernels/quant_rows.hpp"
#include "kernels/simd_lowbit_blocks.hpp"

namespace moe::kernels::detail {
namespace {

// Q4_K / Q5_K: v[2k] = sub-block 2k (low nibbles of quant bytes 32k..32k+31),
// v[2k+1] = sub-block 2k+1 (high nibbles).
// sc[s]: the int16 scale of sub-block s in every lane.
template <bool kFive>
struct Q45K : KDecoder256<kFive ? q5_k::bytes : q4_k::bytes, true> {
    using Block = typename Q45K::Block;
    static constexpr size_t kQs = kFive ? q5_k::qs : q4_k::qs;

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        const __m128i head = k_head(w, dm);
        mins = static_cast<uint64_t>(_mm_extract_epi64(head, 1));
        const __m256i low4 = _mm256_set1_epi8(0x0F);
        __m256i hbits = kFive ? load256(w + q5_k::qh) : __m256i{};
        Block k;
        for (int j = 0; j < 4; ++j) {
            const __m256i q = load256(w + kQs + 32 * j);
            k.v[2 * j] = _mm256_and_si256(q, low4);
            k.v[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if constexpr (kFive) {
                const __m256i bit = _mm256_set1_epi8(0x10);
                k.v[2 * j] = _mm256_or_si256(k.v[2 * j], _mm256_and_si256(_mm256_slli_epi16(hbits, 4), bit));
                k.v[2 * j + 1] = _mm256_or_si256(k.v[2 * j + 1], _mm256_and_si256(_mm256_slli_epi16(hbits, 3), bit));
                hbits = _mm256_srli_epi16(hbits, 2);
            }
        }
        broadcast_scales(_mm_cvtepu8_epi16(head), k.sc);
        return k;
    }

    MOE_ALWAYS_INLINE static __m256i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        return group_sums256(k.v, k.sc, act, _mm256_setzero_si256());
    }
};

// Q6_K: v[i] = elements 32i..32i+31 (groups 2i, 2i+1), stored +32.
struct Q6K : KDecoder256<q6_k::bytes, false> {
    using Block = CorrBlock;  // corr: int16 -32 * scale of group g

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = load_u32(w + q6_k::d - 2);
        const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
        Block k;
        for (int half = 0; half < 2; ++half) {
            const __m256i l0 = load256(w + q6_k::ql + 64 * half), l1 = load256(w + q6_k::ql + 64 * half + 32);
            const __m256i h = load256(w + q6_k::qh + 32 * half);
            __m256i *v = k.v + 4 * half;
            v[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), two));
            v[1] = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), two));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(h, two));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                   _mm256_and_si256(_mm256_srli_epi16(h, 2), two));
        }
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q6_k::scales)));
        pair_scales(sc16, k.sc);
        k.corr = _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32));
        return k;
    }

    MOE_ALWAYS_INLINE static __m256i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        return corrected_group_sums256(k, act);
    }
};

// Eight one- or two-byte fields (kWidth), one per block of kStride bytes at
// offset kOffset, from the group's first 128 bytes in four 32-byte loads:
// load c holds the field of block 2c in its low 128-bit lane and that of
// block 2c + 1 in its high lane (true of 17- and 18-byte blocks with the
// field at offset 0), so in-lane shuffles and one permute place them.
template <size_t kStride, size_t kOffset, int kWidth>
struct PairedFields {
    static constexpr size_t at(int j) { return j * kStride + kOffset; }
    static constexpr bool in_lanes() {
        for (int j = 0; j < 8; ++j) {
            const size_t lane = 16 * static_cast<size_t>(j);  // load j / 2, lane j % 2
            if (at(j) < lane || at(j) + kWidth > lane + 16) return false;
        }
        return true;
    }
    static_assert(in_lanes());
    // vpshufb control of load c: 32-bit lane c of each half takes the field
    // of block 2c (low half) or 2c + 1 (high half), zero-extended.
    static constexpr std::array<int8_t, 128> controls() {
        std::array<int8_t, 128> x{};
        for (auto &v : x) v = -1;
        for (int j = 0; j < 8; ++j)
            for (int b = 0; b < kWidth; ++b)
                x[32 * (j / 2) + 16 * (j % 2) + 4 * (j / 2) + b] = static_cast<int8_t>(at(j) - 16 * j + b);
        return x;
    }
    static constexpr std::array<int8_t, 128> kControls = controls();

    // Lane j: the field of block j.
    MOE_ALWAYS_INLINE static __m256i gather(const uint8_t *w) {
        __m256i x = _mm256_shuffle_epi8(load256(w), load256(kControls.data()));
        for (int c = 1; c < 4; ++c)
            x = _mm256_or_si256(x, _mm256_shuffle_epi8(load256(w + 32 * c), load256(kControls.data() + 32 * c)));
        // Lanes 0..3: blocks 0, 2, 4, 6; lanes 4..7: blocks 1, 3, 5, 7.
        return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
};

// Legacy nibble blocks (16 quant bytes, low nibbles elements 0..15, high
// nibbles 16..31) eight at a time in pairs: register k holds the quants of
// block k in its low 128-bit lane and of block 4 + k in its high lane, so its
// low nibbles are elements 0..15 of both blocks and its high nibbles elements
// 16..31, without crossing lanes. Each token's activations are arranged once
// per call in the same order; three vphaddd turn the four pair registers'
// partial sums into the eight block sums (lane j: block j). B provides kQs,
// levels() (the nibbles' vpshufb table) and either scales_of (MXFP4's
// exponent bytes) or the fp16 d at kD; blocks after the last full group
// take PerBlock's sum1.
template <typename B, typename Dot>
struct NibblePairs : PerBlock<B, Dot> {
    static constexpr bool kArranged = true;
    static constexpr size_t S = B::kBytes;
    struct Group {
        __m256i lo[4], hi[4];  // elements 0..15 (lo) and 16..31 (hi) of blocks k and 4 + k
        __m256 dw, mw;
    };

    MOE_ALWAYS_INLINE static Group decode8(const uint8_t *w) {
        const __m256i table = _mm256_broadcastsi128_si256(B::levels()), low4 = _mm256_set1_epi8(0x0F);
        Group g;
        for (int k = 0; k < 4; ++k) {
            const __m256i q = _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(w + (4 + k) * S + B::kQs),
                                                  reinterpret_cast<const __m128i *>(w + k * S + B::kQs));
            g.lo[k] = _mm256_shuffle_epi8(table, _mm256_and_si256(q, low4));
            g.hi[k] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
        }
        if constexpr (requires { B::scales_of(__m256i{}); })
            g.dw = B::scales_of(PairedFields<S, B::kD, 1>::gather(w));
        else
            g.dw = half8<false>(PairedFields<S, B::kD, 2>::gather(w));
        return g;
    }

    // a: the arranged group (register k's activations at 64k: elements 0..15, then 16..31).
    MOE_ALWAYS_INLINE static __m256i sums8(const Group &g, const uint8_t *a, size_t) {
        __m256i x[4];
        for (int k = 0; k < 4; ++k) x[k] = Dot::pair(g.lo[k], load256(a + 64 * k), g.hi[k], load256(a + 64 * k + 32));
        return _mm256_hadd_epi32(_mm256_hadd_epi32(x[0], x[1]), _mm256_hadd_epi32(x[2], x[3]));
    }

    static void arrange(const uint8_t *act, size_t blk_bytes, size_t qs, int64_t nb, uint8_t *out) {
        for (int64_t g = 0; g + 8 <= nb; g += 8, out += 256)
            for (int k = 0; k < 4; ++k)
                for (int half = 0; half < 2; ++half)
                    for (int pair = 0; pair < 2; ++pair)
                        std::memcpy(out + 64 * k + 32 * half + 16 * pair,
                                    act + (g + k + 4 * pair) * blk_bytes + qs + 16 * half, 16);
    }
};

}  // namespace

void fill_avx2_kernels(KernelTable &t) {
    Tiled<FloatRows<FloatKind::f32>>::install(t, GgmlType::F32);
    Tiled<FloatRows<FloatKind::f16>>::install(t, GgmlType::F16);
    Tiled<FloatRows<FloatKind::bf16>>::install(t, GgmlType::BF16);
    Tiled<LegacyRows<PerBlock<Q4_0Dec, DotMaddubs>>>::install(t, GgmlType::Q4_0);
    Tiled<LegacyRows<PerBlock<Q5_0Dec, DotMaddubs>>>::install(t, GgmlType::Q5_0);
    Tiled<LegacyRows<PerBlock<Q4_1Dec, DotMaddubs>>>::install(t, GgmlType::Q4_1);
    Tiled<LegacyRows<PerBlock<Q5_1Dec, DotMaddubs>>>::install(t, GgmlType::Q5_1);
    Tiled<LegacyRows<PerBlock<Q8_0SignedDec, DotSigned>>>::install(t, GgmlType::Q8_0);
    Tiled<KRows<Q45K<false>>>::install(t, GgmlType::Q4_K);
    Tiled<KRows<Q45K<true>>>::install(t, GgmlType::Q5_K);
    Tiled<KRows<Q6K>>::install(t, GgmlType::Q6_K);
    Tiled<KRows<Q2K>>::install(t, GgmlType::Q2_K);
    Tiled<KRows<Q3K>>::install(t, GgmlType::Q3_K);
    Tiled<KRows<IQ4XS>>::install(t, GgmlType::IQ4_XS);
    Tiled<LegacyRows<NibblePairs<IQ4NLSignedDec, DotSigned>>>::install(t, GgmlType::IQ4_NL);
    Tiled<LegacyRows<NibblePairs<Mxfp4Dec, DotMaddubs>>>::install(t, GgmlType::MXFP4);
}

}  // namespace moe::kernels::detail
