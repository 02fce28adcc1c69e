// The tensor table of a GGUF file (names and byte sizes), read from the header
// without loading weights: 'moestream bench' uses it to count the weight bytes
// a decode token touches. Sizes come from the data offsets (each tensor ends
// where the next begins), so no knowledge of quant formats is needed; they
// include the alignment padding (< general.alignment bytes per tensor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moestream.h"

namespace cli {

struct GgufTensorSize {
    std::string name;
    uint64_t bytes = 0;
};

// Returns false with `why` when the file is not a readable GGUF (v2/v3).
bool read_gguf_tensor_sizes(const std::string &path, std::vector<GgufTensorSize> &out, std::string &why);

// Weight bytes one decode token reads from a model's tensor table and the
// facts moestream_inspect gives: every tensor except routed experts and the
// token embedding table, one row of the embedding table (or all of it when it
// doubles as the output head), and, per layer, `experts_used[l]` experts'
// gate/up/down bytes. bytes_per_expert[l] is filled with layer l's bytes of
// one routed expert. Tensors open only reads to build other matrices from
// (deepseek2's attn_kv_b) count as the matrices built, which the forward pass
// reads instead: their difference is what inspect's dense bytes add to the
// file's (within the built-from tensors' alignment padding, counted still).
struct TouchedBytes {
    uint64_t dense = 0;                      // per token, without experts
    std::vector<uint64_t> bytes_per_expert;  // per layer
};
TouchedBytes touched_bytes_model(const std::vector<GgufTensorSize> &tensors, const moestream_model_info &info);

}  // namespace cli
