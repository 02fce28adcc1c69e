// Expert layouts read from a GGUF file's tensor table: where gate, up and
// down of every layer's experts lie (blk.N.ffn_{gate,up,down}_exps.weight).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/expert_source.hpp"
#include "gguf/gguf_file.hpp"

namespace moe {

// One entry per layer (block_count); layers without expert tensors have
// n_expert == 0. Throws moe::Error(bad_format) naming the tensor when a
// layer's expert tensors disagree (expert count, missing up/down).
std::vector<ExpertLayerLayout> expert_layouts_from_gguf(const gguf::GgufFile &file);
// The shard files of the model, by shard index.
std::vector<std::string> shard_paths_of(const gguf::GgufFile &file);
// Fingerprint of the model (header + tensor table of shard 0).
uint64_t model_fingerprint_of(const gguf::GgufFile &file);

}  // namespace moe
