// Matrices built at open from the file's tensors instead of mapped from it:
// deepseek2's attn_kv_b, in files converted before absorbed latent
// attention, split into the per-head attn_k_b / attn_v_b (kv_b_split.hpp).
// The views point into buffers held here; ModelWeights keeps them, so they
// live as long as the model. They are dense weights the model owns: they
// count in its resident bytes, and they are neither copied out of the file
// mapping nor relocated with the mapped matrices.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/weights.hpp"

namespace moe {

class DerivedMatrices {
public:
    // Whether matrices get memory (false: only their bytes are counted, for
    // a binding that checks the file without reading tensor data).
    explicit DerivedMatrices(bool allocate = true) : allocate_(allocate) {}

    // A zeroed matrix of `rows` rows of `cols` elements of `type`, and its
    // bytes to fill in `*writable` (null, as the view's data, when not
    // allocating). Throws out_of_memory when the memory cannot be had.
    MatrixView add(GgmlType type, int64_t cols, int64_t rows, uint8_t **writable);

    // Whether `p` points into one of the matrices.
    bool holds(const uint8_t *p) const;
    uint64_t bytes() const { return bytes_; }

private:
    struct AlignedFree {
        void operator()(uint8_t *p) const;
    };
    struct Buffer {
        std::unique_ptr<uint8_t, AlignedFree> data;
        size_t size = 0;
    };
    bool allocate_ = true;
    std::vector<Buffer> buffers_;
    uint64_t bytes_ = 0;
};

}  // namespace moe
