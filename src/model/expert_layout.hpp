// Where the routed experts of one layer lie in the model's files, as the
// model binds them from the GGUF tensor table. The model owns this description;
// the expert sources (src/experts) read it to map, cache or stream the bytes,
// so it lives below them and the model needs nothing of theirs.
#pragma once

#include <cstdint>

#include "common/ggml_types.hpp"

namespace moe {

// Where one matrix (gate, up or down) of every expert of a layer lives on disk.
struct ExpertMatrixLayout {
    GgmlType type = GgmlType::F32;
    int64_t cols = 0;           // ne[0]: input features (row length)
    int64_t rows = 0;           // ne[1]: output features
    uint32_t shard = 0;         // which file of a split set
    uint64_t file_offset = 0;   // absolute offset of expert 0 in that file
    uint64_t expert_stride = 0; // bytes from one expert to the next (= bytes of one expert's matrix)
    const uint8_t *mapped = nullptr; // expert 0 in the read-only mapping of that file
    uint64_t expert_bytes() const { return expert_stride; }
};

// gate/up/down of one layer's experts. `gate` may be absent (rows == 0) for
// architectures without a gate projection.
struct ExpertLayerLayout {
    int32_t n_expert = 0;
    ExpertMatrixLayout gate, up, down;
    uint64_t bytes_per_expert() const { return gate.expert_bytes() + up.expert_bytes() + down.expert_bytes(); }
};

}  // namespace moe
