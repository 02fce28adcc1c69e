// AVX2 + FMA + F16C kernels: decoders of the integer block sums for the
// shared row loops (quant_rows.hpp). The float operations are the shared
// ones, so results are bit-identical to the scalar reference.
#include <immintrin.h>

#include <array>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.hpp"
#include "kernels/krows_unrolled.hpp"
#include "kernels/mxfp4_rows.hpp"
#include "kernels/quant_rows.hpp"
#include "kernels/simd_avx2_kquants.hpp"
#include "kernels/simd_lowbit_blocks.hpp"

namespace moe::kernels::detail {
namespace {

// Eight fields of one to four bytes (kWidth), one per block of kStride
// bytes at offset kOffset, from four 32-byte loads (offset_lanes), one in
// each 64-bit span of the group's 17- or 18-byte blocks: the d of Q4_0 and
// IQ4_NL (halves) and MXFP4's exponent byte (bytes). Q4_1 / Q5_0 / Q5_1 take
// theirs from 16-byte loads at the start of each block (NibblePairs::head_scales).
template <size_t kStride, size_t kOffset, int kWidth>
struct PairedFields {
    static_assert(kStride >= 16 && kStride - 16 + kWidth <= 4, "block 2c + 1's field in dword c of the high lane");
    static_assert(kOffset + 20 <= 2 * kStride, "the last load ends inside the group");
    // 32-bit lane c of each 128-bit half from load(c), c = 0..3: three blends.
    template <typename Load>
    MOE_ALWAYS_INLINE static __m256i lane_c_of_load_c(const Load &load) {
        return _mm256_blend_epi32(_mm256_blend_epi32(load(0), load(1), 0x22),
                                  _mm256_blend_epi32(load(2), load(3), 0x88), 0xCC);
    }

    // Load c starting (2 kStride - 4) c bytes after the first field puts
    // block 2c's field at byte 4c (dword c of the low lane) and block
    // 2c + 1's at byte 4c + kStride, dword c of the high lane at byte
    // kStride - 16 of it: three blends give dword c of each lane from load c
    // (the last load ends at kOffset + 6 kStride + 20, inside the group).
    // Dwords 0..3: blocks 0, 2, 4, 6; 4..7: 1, 3, 5, 7.
    MOE_ALWAYS_INLINE static __m256i offset_lanes(const uint8_t *w) {
        const auto load = [&](int c) { return load256(w + kOffset + (2 * kStride - 4) * c); };
        return lane_c_of_load_c(load);
    }

    // The fields as f32, when they are fp16 and the blocks 18 bytes long (the
    // d of Q4_0 and IQ4_NL): block 2c's field is word 2c of the low lane of
    // offset_lanes, block 2c + 1's word 2c + 1 of the high lane, so one word
    // blend of the two lanes and the conversion place them.
    MOE_ALWAYS_INLINE static __m256 halves(const uint8_t *w)
        requires(kStride == 18 && kWidth == 2)
    {
        const __m256i x = offset_lanes(w);
        const __m128i words = _mm_blend_epi16(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1), 0xAA);
        return _mm256_cvtph_ps(words);
    }

    // Lane j: the byte field of block j, zero-extended (MXFP4's exponent):
    // offset_lanes, one vpshufb to keep byte 0 (low lane) or kStride - 16
    // (high lane) of each dword, and a permute to block order. Before, one
    // 32-byte load at every second block and one vpshufb per load placed
    // the fields (four vpshufb instead of one).
    MOE_ALWAYS_INLINE static __m256i bytes(const uint8_t *w)
        requires(kWidth == 1)
    {
        static constexpr std::array<int8_t, 32> kKeep = [] {
            std::array<int8_t, 32> x{};
            for (int i = 0; i < 32; ++i)
                x[i] = i % 4 == 0 ? static_cast<int8_t>(i % 16 + (i < 16 ? 0 : kStride - 16)) : -1;
            return x;
        }();
        const __m256i x = _mm256_shuffle_epi8(offset_lanes(w), load256(kKeep.data()));
        return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
};

// Q5_0 / Q5_1: the fifth bits (qh: bit i = element i) added as 0x10 to the
// nibbles of NibblePairs' pair k, from the first 16 bytes of blocks k and
// 4 + k (one per 128-bit lane, as the pair holds their quants), so each
// lane's qh word is already where its register needs it. Per register one
// vpshufb puts qh byte i / 8 in byte i, one and keeps bit i % 8 of it, and
// vpsignb turns the bit into 16: the constant's byte is +16, or -16 where
// the bit is bit 7 (a negative byte), and a zero byte stays zero. Four
// operations per 32 weights and nothing per pair (vpminub instead of
// vpsignb needs every bit at bit 4..7: a copy of the head shifted by 4 and
// an unpack per pair).
template <size_t kQh>
struct FifthBits {
    static_assert(kQh + 4 <= 16, "the qh word lies in the head");
    // vpshufb controls of the low-nibble (elements 0..15) and high-nibble
    // (16..31) registers: byte i takes the qh byte of element 16 * half + i.
    static constexpr std::array<int8_t, 64> kPicks = [] {
        std::array<int8_t, 64> c{};
        for (int half = 0; half < 2; ++half)
            for (int i = 0; i < 32; ++i) c[32 * half + i] = static_cast<int8_t>(kQh + (16 * half + i % 16) / 8);
        return c;
    }();
    __m256i src;

    // head: the first 16 bytes of block k (low lane) and 4 + k (high lane).
    MOE_ALWAYS_INLINE explicit FifthBits(__m256i head) : src(head) {}
    // The nibbles v of the low (half 0) or high (half 1) register with their fifth bits.
    MOE_ALWAYS_INLINE __m256i add(__m256i v, int half) const {
        const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
        const __m256i sixteen = _mm256_set1_epi64x(static_cast<long long>(0xF010101010101010ull));
        const __m256i spread = _mm256_shuffle_epi8(src, load256(kPicks.data() + 32 * half));
        return _mm256_or_si256(v, _mm256_sign_epi8(sixteen, _mm256_and_si256(spread, select)));
    }
};

// Fold's network for the partial sums of four block pairs, as NibblePairs
// lays them out (register k: block k in its low 128-bit lane, 4 + k in its
// high lane): in each 128-bit lane a 4 x 4 transpose by unpacks whose two
// halves are added at once, so dword k of the lane is register k's total.
// The sums are int16 (DotMaddubs::pair16, four products per lane) for the
// first kWordLevels levels, each of which doubles the products per int16
// lane, so it is exact while their bound stays in int16; one vpmaddwd then
// widens them (kWordLevels = 0: int32 sums throughout). vphaddw / vphaddd
// do the same joins in fewer instructions, but on this CPU (Zen 4) the
// network of three of them took 4.2 TSC ticks per group against 2.5 for
// the unpacks in a loop that runs only the network.
template <int kWordLevels>
struct LaneSum {
    static_assert(kWordLevels >= 0 && kWordLevels <= 2);
    using V = __m256i;
    MOE_ALWAYS_INLINE static __m256i widen(__m256i x) { return _mm256_madd_epi16(x, _mm256_set1_epi16(1)); }
    // Per lane: a's dwords 0 + 2 and b's, then a's dwords 1 + 3 and b's.
    MOE_ALWAYS_INLINE static __m256i pair(__m256i a, __m256i b) {
        const __m256i lo = _mm256_unpacklo_epi32(a, b), hi = _mm256_unpackhi_epi32(a, b);
        if constexpr (kWordLevels == 0) return _mm256_add_epi32(lo, hi);
        const __m256i s = _mm256_add_epi16(lo, hi);
        if constexpr (kWordLevels == 1) return widen(s);
        else return s;
    }
    // Dword k of a lane: the total of pair(...)'s register k.
    MOE_ALWAYS_INLINE static __m256i quad(__m256i x, __m256i y) {
        const __m256i lo = _mm256_unpacklo_epi64(x, y), hi = _mm256_unpackhi_epi64(x, y);
        if constexpr (kWordLevels == 2) return widen(_mm256_add_epi16(lo, hi));
        else return _mm256_add_epi32(lo, hi);
    }
};

// Legacy nibble blocks (16 quant bytes, low nibbles elements 0..15, high
// nibbles 16..31) eight at a time in pairs: register k holds the quants of
// block k in its low 128-bit lane and of block 4 + k in its high lane, so its
// low nibbles are elements 0..15 of both blocks and its high nibbles elements
// 16..31, without crossing lanes. Each token's activations are arranged once
// per call in the same order (and their magnitudes, for a Dot that
// multiplies by them); LaneSum's network turns the four pair
// registers' partial sums into the eight block sums (lane j: block j). B
// provides kQs, kMin (the fp16 m after d), kFive (the qh word at kQh),
// kMaxWeight (with DotMaddubs) and optionally
// levels() (the nibbles' vpshufb table) and scales_of (MXFP4's exponent
// bytes, instead of the fp16 d at kD); blocks after the last full group
// take PerBlock's sum1.
template <typename B, typename Dot>
struct NibblePairs : PerBlock<B, Dot> {
    static constexpr bool kArranged = true;
    static constexpr size_t S = B::kBytes;
    // Register pair k: elements 0..15 (lo) and 16..31 (hi) of blocks k and 4 + k.
    struct Pair {
        __m256i lo, hi;
    };
    // A group's scales and its decoded pairs x, except Q5_0 / Q5_1's: their
    // pairs are decoded in sums8, from the group's weights w and the blocks'
    // heads (the first 16 bytes of blocks k and 4 + k, which also hold their
    // d, m and qh).
    struct DecodedPairs {
        Pair x[4];
    };
    struct PairHeads {
        const uint8_t *w;
        __m256i heads[4];
    };
    struct Group : std::conditional_t<B::kFive, PairHeads, DecodedPairs> {
        __m256 dw, mw;
    };

    MOE_ALWAYS_INLINE static Group decode8(const uint8_t *w) {
        Group g;
        if constexpr (!B::kFive)
            for (int k = 0; k < 4; ++k) g.x[k] = pair(w, k);
        if constexpr (requires { B::scales_of(__m256i{}); }) {
            g.dw = B::scales_of(PairedFields<S, B::kD, 1>::bytes(w));
        } else if constexpr (B::kFive) {
            g.w = w;
            for (int k = 0; k < 4; ++k) g.heads[k] = pair_load(w + k * S);
            head_scales(g.heads, g);
        } else if constexpr (B::kMin) {
            // Q4_1: its d and m from the heads of its pairs (four more 16-byte loads).
            __m256i heads[4];
            for (int k = 0; k < 4; ++k) heads[k] = pair_load(w + k * S);
            head_scales(heads, g);
        } else {
            // Q4_0 and IQ4_NL, the formats left: 18-byte blocks, which halves() requires.
            g.dw = PairedFields<S, B::kD, 2>::halves(w);
        }
        return g;
    }

    // The d (and m) of the group from the heads of its pairs (the first 16
    // bytes of blocks k and 4 + k): per lane, word 0 (d) of the four heads,
    // then word 1 (m), three unpacks and a vpermq away.
    MOE_ALWAYS_INLINE static void head_scales(const __m256i *heads, Group &g) {
        static_assert(B::kD == 0, "d is word 0 of the head");
        if constexpr (B::kMin) static_assert(B::kM == 2, "m is word 1 of the head, unpacked with d");
        const __m256i words = _mm256_unpacklo_epi32(_mm256_unpacklo_epi16(heads[0], heads[1]),
                                                    _mm256_unpacklo_epi16(heads[2], heads[3]));
        g.dw = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(words, 0x08)));
        if constexpr (B::kMin) g.mw = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(words, 0x0D)));
    }

    // 16 bytes from p (low 128-bit lane) and from the same place in block 4 + k (high lane).
    MOE_ALWAYS_INLINE static __m256i pair_load(const uint8_t *p) {
        return _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(p + 4 * S), reinterpret_cast<const __m128i *>(p));
    }

    // Pair k of the group at w: its nibbles (through levels(), if any).
    MOE_ALWAYS_INLINE static Pair pair(const uint8_t *w, int k) {
        const __m256i low4 = _mm256_set1_epi8(0x0F);
        const __m256i q = pair_load(w + k * S + B::kQs);
        Pair x{_mm256_and_si256(q, low4), _mm256_and_si256(_mm256_srli_epi16(q, 4), low4)};
        if constexpr (requires { B::levels(); }) {
            const __m256i table = _mm256_broadcastsi128_si256(B::levels());
            x.lo = _mm256_shuffle_epi8(table, x.lo);
            x.hi = _mm256_shuffle_epi8(table, x.hi);
        }
        return x;
    }

    // LaneSum's int16 levels before widening that keep the sums of
    // unsigned weights up to kMaxWeight against int8 activations exact:
    // 4 << levels products of at most kMaxWeight * 128 per int16 lane; 0
    // (int32 pair sums) for signed weights or larger ones.
    static constexpr int kWordLevels = [] {
        if constexpr (requires { Dot::pair16(__m256i{}, __m256i{}, __m256i{}, __m256i{}); B::kMaxWeight; }) {
            int levels = 0;
            while (levels < 2 && (4 << (levels + 1)) * B::kMaxWeight * 128 <= 32767) ++levels;
            return levels;
        } else {
            return 0;
        }
    }();
    using Fold = avx2::Fold<LaneSum<kWordLevels>>;

    // Signed weights (DotSigned) take one token's activations with their
    // magnitudes (LegacyRows prepares them once per call), so each register
    // of weights costs one vpsignb instead of a vpabsb and a vpsignb.
    // Several tokens share each register's vpabsb (sum8).
    static constexpr bool kMagnitudes =
        requires { Dot::pair_by_magnitude(__m256i{}, __m256i{}, __m256i{}, __m256i{}, __m256i{}, __m256i{}); };

    // Pair k's dot against one token's arranged group (register pair k's
    // activations at 64k: elements 0..15, then 16..31): the partial sums Fold takes.
    MOE_ALWAYS_INLINE static __m256i pair_sums(const Pair &x, int k, const uint8_t *a) {
        const uint8_t *ak = a + 64 * k;
        if constexpr (kWordLevels > 0) return Dot::pair16(x.lo, load256(ak), x.hi, load256(ak + 32));
        else return Dot::pair(x.lo, load256(ak), x.hi, load256(ak + 32));
    }

    // One token against signed weights: m, the magnitudes of a, in a's layout.
    MOE_ALWAYS_INLINE static __m256i sum8_by_magnitude(const Group &g, const uint8_t *a, const uint8_t *m)
        requires(kMagnitudes && !B::kFive)
    {
        Fold fold;
        unrolled(std::make_integer_sequence<int, 4>{}, [&](auto kc) {
            constexpr int k = decltype(kc)::value;
            const uint8_t *ak = a + 64 * k, *mk = m + 64 * k;
            fold.template add<k>(
                Dot::pair_by_magnitude(g.x[k].lo, load256(ak), load256(mk), g.x[k].hi, load256(ak + 32), load256(mk + 32)));
        });
        return fold.lane_totals4();
    }

    // The nibble formats take the pairs decode8 gave.
    MOE_ALWAYS_INLINE static __m256i sum8(const Group &g, const uint8_t *a, size_t)
        requires(!B::kFive)
    {
        Fold fold;
        unrolled(std::make_integer_sequence<int, 4>{}, [&](auto kc) {
            constexpr int k = decltype(kc)::value;
            fold.template add<k>(pair_sums(g.x[k], k, a));
        });
        return fold.lane_totals4();
    }

    // Q5_0 / Q5_1 dot each pair against every token before decoding the
    // next (with their whole group decoded, its registers and the fifth
    // bits' constants spilled); the other formats decode the group first,
    // which measured 1.03-1.08x faster for them.
    template <int T>
    MOE_ALWAYS_INLINE static void sums8(const Group &g, const uint8_t *const *a, size_t, __m256i *out)
        requires B::kFive
    {
        Fold fold[T];
        unrolled(std::make_integer_sequence<int, 4>{}, [&](auto kc) {
            constexpr int k = decltype(kc)::value;
            Pair x = pair(g.w, k);
            const FifthBits<B::kQh> fifth(g.heads[k]);
            x.lo = fifth.add(x.lo, 0);
            x.hi = fifth.add(x.hi, 1);
            for (int t = 0; t < T; ++t) fold[t].template add<k>(pair_sums(x, k, a[t]));
        });
        for (int t = 0; t < T; ++t) out[t] = fold[t].lane_totals4();
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
    Tiled<LegacyRows<NibblePairs<Q4_0Dec, DotMaddubs>>>::install(t, GgmlType::Q4_0);
    Tiled<LegacyRows<NibblePairs<Q5_0Dec, DotMaddubs>>>::install(t, GgmlType::Q5_0);
    Tiled<LegacyRows<NibblePairs<Q4_1Dec, DotMaddubs>>>::install(t, GgmlType::Q4_1);
    Tiled<LegacyRows<NibblePairs<Q5_1Dec, DotMaddubs>>>::install(t, GgmlType::Q5_1);
    Tiled<LegacyRows<PerBlock<Q8_0SignedDec, DotSigned>>>::install(t, GgmlType::Q8_0);
    Tiled<KRowsUnrolled<Q45K<false>>>::install(t, GgmlType::Q4_K);
    Tiled<KRowsUnrolled<Q45K<true>>>::install(t, GgmlType::Q5_K);
    Tiled<KRowsUnrolled<Q6K>>::install(t, GgmlType::Q6_K);
    Tiled<KRowsUnrolled<Q2K>>::install(t, GgmlType::Q2_K);
    Tiled<KRowsUnrolled<Q3K>>::install(t, GgmlType::Q3_K);
    Tiled<KRows<IQ4XS>>::install(t, GgmlType::IQ4_XS);
    Tiled<LegacyRows<NibblePairs<IQ4NLSignedDec, DotSigned>>>::install(t, GgmlType::IQ4_NL);
    Tiled<LegacyRows<NibblePairs<Mxfp4Dec, DotMaddubs>>>::install(t, GgmlType::MXFP4);
}

}  // namespace moe::kernels::detail
