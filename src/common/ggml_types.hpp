// GGML tensor element types as stored in GGUF files, and their block geometry.
// Ids are the on-disk values; they never change.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe {

enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ4_NL = 20,
    IQ4_XS = 23,
    BF16 = 30,
    MXFP4 = 39,
};

constexpr uint32_t kMaxGgmlTypeId = 64;  // table size; ids at or above are unknown

struct TypeTraits {
    const char *name;       // nullptr: id unknown or removed
    uint32_t block_elems;   // elements per block (1 for float types)
    uint32_t block_bytes;   // bytes per block
    bool weight_supported;  // the engine can compute with weights of this type
};

// Traits for an id; an unknown id yields {nullptr, 0, 0, false}.
const TypeTraits &type_traits(uint32_t type_id);
inline const TypeTraits &type_traits(GgmlType t) { return type_traits(static_cast<uint32_t>(t)); }

// Bytes of a row of n elements; n must be a multiple of block_elems (checked by callers).
inline uint64_t row_bytes(GgmlType t, uint64_t n) {
    const TypeTraits &tr = type_traits(t);
    return n / tr.block_elems * tr.block_bytes;
}

}  // namespace moe
