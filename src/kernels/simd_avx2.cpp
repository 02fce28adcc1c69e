// AVX2 + FMA + F16C kernels: decoders of the integer block sums for the
// shared row loops (quant_rows.hpp). The float operations are the shared
// ones, so results are bit-identical to the scalar reference.
#include <immintrin.h>

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
    Tiled<LegacyRows<PerBlock<IQ4NLSignedDec, DotSigned>>>::install(t, GgmlType::IQ4_NL);
    Tiled<LegacyRows<PerBlock<Mxfp4Dec, DotMaddubs>>>::install(t, GgmlType::MXFP4);
}

}  // namespace moe::kernels::detail
