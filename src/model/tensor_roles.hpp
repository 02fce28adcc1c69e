// Which tensors stay resident (dense) and which are routed experts that can be
// streamed, and the byte accounting built on that rule. The runtime and
// `inspect` share it so both report the same numbers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "common/ggml_types.hpp"
#include "gguf/gguf_file.hpp"

namespace moe {

enum class ExpertMatrix { gate, up, down };

struct ExpertTensorName {
    uint32_t layer = 0;
    ExpertMatrix matrix = ExpertMatrix::gate;
};

// Parses "blk.N.ffn_{gate,up,down}_exps.weight"; nullopt for any other name.
std::optional<ExpertTensorName> parse_expert_tensor_name(std::string_view name);

// A routed expert tensor: the name above and at most three dimensions
// (ne[2] = experts; trailing 1s are allowed, as TensorBinder::experts allows them).
// Everything else (attention, norms, router, shared experts, embeddings) is dense.
bool is_expert_tensor(const gguf::TensorInfo &t);

// The dense tensors with bytes that `take` accepts (null: all), ordered by
// shard and offset.
std::vector<const gguf::TensorInfo *> dense_tensors(const gguf::GgufFile &file,
                                                    const std::function<bool(const gguf::TensorInfo &)> &take = nullptr);

// Dense tensors that lie close together in one shard (gaps under 64 KiB),
// as one range: one read or one residency hint instead of many.
struct DenseRun {
    uint32_t shard = 0;
    uint64_t file_offset = 0;
    uint64_t length = 0;
    const uint8_t *mapped = nullptr;  // where the shard's mapping holds it
};
// The runs of `tensors` (in dense_tensors' order), in the same order: each
// tensor lies in the first run not before the previous tensor's.
std::vector<DenseRun> dense_runs(const std::vector<const gguf::TensorInfo *> &tensors);

struct ModelBytes {
    uint64_t total = 0;   // all tensor bytes
    uint64_t dense = 0;
    uint64_t expert = 0;  // all routed expert tensors, all layers
    // Max over layers of gate+up+down bytes of one expert, and of all experts of a layer.
    uint64_t expert_per_expert = 0;
    uint64_t expert_per_layer = 0;
    uint32_t n_tensors = 0;
    std::array<uint32_t, kMaxGgmlTypeId> count_by_type{};  // index = GGML type id
    std::map<uint32_t, uint64_t> expert_bytes_by_layer;      // layer -> bytes of its expert tensors
};

ModelBytes account_bytes(const gguf::GgufFile &file);

}  // namespace moe
