// Block layouts of the weight and activation formats, and the scalar
// definitions every kernel variant reproduces:
//  - per-block dequantisation (exact arithmetic spelled out, see kernels.hpp),
//  - per-block integer dot sums and the float "term" each block contributes,
//  - the canonical float summation order (BlockLanes, FmaLanes).
// SIMD files compute the same integer sums and the same float operations in
// the same order, so every ISA produces bit-identical results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/fp_convert.hpp"

namespace moe::kernels::detail {
// Internal linkage: these are compiled into files with different ISA flags,
// and the linker must never substitute one file's copy for another's.
namespace {

constexpr int kQK = 32;    // elements of a legacy block
constexpr int kQKK = 256;  // elements of a K-quant super-block

// Byte offsets (little-endian, packed), see the GGUF block tables.
namespace q4_0 { constexpr size_t bytes = 18, d = 0, qs = 2; }
namespace q4_1 { constexpr size_t bytes = 20, d = 0, m = 2, qs = 4; }
namespace q5_0 { constexpr size_t bytes = 22, d = 0, qh = 2, qs = 6; }
namespace q5_1 { constexpr size_t bytes = 24, d = 0, m = 2, qh = 4, qs = 8; }
namespace q8_0 { constexpr size_t bytes = 34, d = 0, qs = 2; }
namespace q8_1 { constexpr size_t bytes = 36, d = 0, s = 2, qs = 4; }
namespace q4_k { constexpr size_t bytes = 144, d = 0, dmin = 2, scales = 4, qs = 16; }
namespace q5_k { constexpr size_t bytes = 176, d = 0, dmin = 2, scales = 4, qh = 16, qs = 48; }
namespace q6_k { constexpr size_t bytes = 210, ql = 0, qh = 128, scales = 192, d = 208; }
namespace q8_k { constexpr size_t bytes = 292, d = 0, qs = 4, bsums = 260; }
namespace q2_k { constexpr size_t bytes = 84, scales = 0, qs = 16, d = 80, dmin = 82; }
namespace q3_k { constexpr size_t bytes = 110, hmask = 0, qs = 32, scales = 96, d = 108; }
namespace iq4_nl { constexpr size_t bytes = 18, d = 0, qs = 2; }
namespace iq4_xs { constexpr size_t bytes = 136, d = 0, scales_h = 2, scales_l = 4, qs = 8; }

// The 16 non-uniform levels of IQ4_NL / IQ4_XS, indexed by a 4-bit quant.
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline float load_f32(const uint8_t *p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
}
inline int16_t load_i16(const uint8_t *p) {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

// The fp16 scale d of a legacy block (at offset 0 in every layout).
inline float fp16_scale(const uint8_t *block) { return load_half(block); }

// 6-bit (scale, min) pair j of a Q4_K/Q5_K super-block.
inline void k_scale_min(const uint8_t *q, int j, int &sc, int &m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// --- integer weights of one block (as the dot products see them) ------------
// Legacy blocks: 32 values, in element order.
inline void q4_0_ints(const uint8_t *b, int8_t *v) {
    const uint8_t *qs = b + q4_0::qs;
    for (int j = 0; j < 16; ++j) {
        v[j] = static_cast<int8_t>((qs[j] & 0xF) - 8);
        v[j + 16] = static_cast<int8_t>((qs[j] >> 4) - 8);
    }
}
inline void q4_1_ints(const uint8_t *b, int8_t *v) {
    const uint8_t *qs = b + q4_1::qs;
    for (int j = 0; j < 16; ++j) {
        v[j] = static_cast<int8_t>(qs[j] & 0xF);
        v[j + 16] = static_cast<int8_t>(qs[j] >> 4);
    }
}
inline void q5_ints(const uint8_t *qh_p, const uint8_t *qs, int offset, int8_t *v) {
    const uint32_t qh = load_u32(qh_p);
    for (int j = 0; j < 16; ++j) {
        v[j] = static_cast<int8_t>(((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)) - offset);
        v[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - offset);
    }
}
inline void q5_0_ints(const uint8_t *b, int8_t *v) { q5_ints(b + q5_0::qh, b + q5_0::qs, 16, v); }
inline void q5_1_ints(const uint8_t *b, int8_t *v) { q5_ints(b + q5_1::qh, b + q5_1::qs, 0, v); }
inline void q8_0_ints(const uint8_t *b, int8_t *v) { std::memcpy(v, b + q8_0::qs, 32); }

// K-quants: 256 unsigned values (Q4_K 0..15, Q5_K 0..31) or signed (Q6_K -32..31).
inline void q4_k_ints(const uint8_t *b, uint8_t *v) {
    const uint8_t *qs = b + q4_k::qs;
    for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) {
            v[64 * k + l] = qs[32 * k + l] & 0xF;
            v[64 * k + 32 + l] = qs[32 * k + l] >> 4;
        }
}
inline void q5_k_ints(const uint8_t *b, uint8_t *v) {
    const uint8_t *qs = b + q5_k::qs;
    const uint8_t *qh = b + q5_k::qh;
    for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) {
            v[64 * k + l] = static_cast<uint8_t>((qs[32 * k + l] & 0xF) | (((qh[l] >> (2 * k)) & 1) << 4));
            v[64 * k + 32 + l] =
                static_cast<uint8_t>((qs[32 * k + l] >> 4) | (((qh[l] >> (2 * k + 1)) & 1) << 4));
        }
}
inline void q6_k_ints(const uint8_t *b, int8_t *v) {
    for (int n = 0; n < 2; ++n) {
        const uint8_t *ql = b + q6_k::ql + 64 * n;
        const uint8_t *qh = b + q6_k::qh + 32 * n;
        int8_t *y = v + 128 * n;
        for (int l = 0; l < 32; ++l) {
            y[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            y[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            y[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            y[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

// Q2_K / Q3_K: element 128n + 32j + l holds bits 2j..2j+1 of quant byte
// 32n + l, and belongs to the 16-element group 8n + 2j + l / 16 (the groups
// are consecutive: group g is elements 16g..16g+15).
inline void two_bit_ints(const uint8_t *qs, uint8_t *v) {
    for (int n = 0; n < 2; ++n)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l) v[128 * n + 32 * j + l] = (qs[32 * n + l] >> (2 * j)) & 3;
}
inline void q2_k_ints(const uint8_t *b, uint8_t *v) { two_bit_ints(b + q2_k::qs, v); }
// Q2_K: the 4-bit scale and min of group g (low and high nibble of scale byte g).
inline void q2_k_scales_mins(const uint8_t *b, int *sc, int *m) {
    for (int g = 0; g < 16; ++g) {
        sc[g] = b[q2_k::scales + g] & 0xF;
        m[g] = b[q2_k::scales + g] >> 4;
    }
}
// Q3_K: the two low bits as Q2_K, minus 4 where the high bit (hmask bit
// 4n + j of byte l) is clear: -4..3.
inline void q3_k_ints(const uint8_t *b, int8_t *v) {
    two_bit_ints(b + q3_k::qs, reinterpret_cast<uint8_t *>(v));
    const uint8_t *hm = b + q3_k::hmask;
    for (int n = 0; n < 2; ++n)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l) {
                const int high = (hm[l] >> (4 * n + j)) & 1;
                int8_t &q = v[128 * n + 32 * j + l];
                q = static_cast<int8_t>(q - (high ? 0 : 4));
            }
}
// Q3_K: the 16 signed 6-bit group scales (-32..31) from the 12 packed bytes.
inline void q3_k_scales(const uint8_t *b, int *s) {
    const uint8_t *p = b + q3_k::scales;
    for (int i = 0; i < 16; ++i) {
        const int low4 = i < 8 ? p[i] & 0xF : p[i - 8] >> 4;
        const int hi2 = (p[8 + i % 4] >> (2 * (i / 4))) & 3;
        s[i] = (low4 | hi2 << 4) - 32;
    }
}
// 16 bytes of nibbles -> the 32 table values they index: low nibbles first,
// then high (the element order of Q4_0, IQ4_NL and MXFP4 blocks).
inline void nibble_lookup32(const int8_t (&table)[16], const uint8_t *qs, int8_t *v) {
    for (int j = 0; j < 16; ++j) {
        v[j] = table[qs[j] & 0xF];
        v[j + 16] = table[qs[j] >> 4];
    }
}
// IQ4 nibbles of 16 bytes -> 32 levels.
inline void iq4_levels32(const uint8_t *qs, int8_t *v) { nibble_lookup32(kIq4Levels, qs, v); }
inline void iq4_nl_ints(const uint8_t *b, int8_t *v) { iq4_levels32(b + iq4_nl::qs, v); }
inline void iq4_xs_ints(const uint8_t *b, int8_t *v) {
    for (int ib = 0; ib < 8; ++ib) iq4_levels32(b + iq4_xs::qs + 16 * ib, v + 32 * ib);
}
// IQ4_XS: the signed 6-bit scale (-32..31) of 32-element sub-block ib.
inline int iq4_xs_scale(const uint8_t *b, int ib) {
    const int low = (b[iq4_xs::scales_l + ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int high = (load_u16(b + iq4_xs::scales_h) >> (2 * ib)) & 3;
    return (low | high << 4) - 32;
}

// --- canonical float accumulation ---------------------------------------------
// Quantised dots: block b adds its term to lane b % 8; lanes are combined by
// pairwise halving (lane i += lane i+4, then i += i+2, then 0 + 1), the order
// a 256-bit horizontal sum takes.
struct BlockLanes {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    void add(int64_t block, float term) { lane[block & 7] += term; }
    float total() const { return reduce8(lane); }
    static float reduce8(const float *l) {
        const float a0 = l[0] + l[4], a1 = l[1] + l[5], a2 = l[2] + l[6], a3 = l[3] + l[7];
        const float b0 = a0 + a2, b1 = a1 + a3;
        return b0 + b1;
    }
};

// Float dots (F32/F16/BF16 and exact mode): element i is fused-multiply-added
// into lane i % 32; lanes are combined by halving 32 -> 16 -> 8, then as above.
struct FmaLanes {
    float lane[32] = {};
    float total() const { return reduce32(lane); }
    static float reduce32(const float *l) {
        float s16[16], s8[8];
        for (int i = 0; i < 16; ++i) s16[i] = l[i] + l[i + 16];
        for (int i = 0; i < 8; ++i) s8[i] = s16[i] + s16[i + 8];
        return BlockLanes::reduce8(s8);
    }
};

}  // namespace
}  // namespace moe::kernels::detail
