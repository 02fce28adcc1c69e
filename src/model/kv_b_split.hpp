// deepseek2 files converted before absorbed latent attention keep, per
// layer, one attn_kv_b of ne [kv_lora_rank, n_head * (qk_nope + v_head)]:
// for head h, its rows h * (qk_nope + v_head) + d (d < qk_nope) map the
// latent to the head's non-rotary key, the v_head rows after them to its
// value (llama.cpp's converter splits it at these rows for the absorbed
// form). The absorbed form needs, per head, attn_k_b: kv_lora_rank rows of
// qk_nope columns (the key rows transposed), and attn_v_b: the value rows.
// Both are built at open (HParams::joint_kv_b):
//  - attn_v_b: the value rows copied in the file's type, bit for bit;
//  - attn_k_b: the key rows transposed element by element in the file's
//    type when that is a float type (exact); rows of quantised blocks cannot
//    be transposed within their blocks, so they are dequantised and the
//    transpose is F32: exactly the file's values, at 4 bytes a weight
//    (counted in the model's resident bytes).
// A model of this layout then runs exactly as the split layout of the same
// values does, with the same latent KV cache.
#pragma once

#include <cstdint>

#include "model/hparams.hpp"
#include "model/tensor_binder.hpp"
#include "model/weights.hpp"

namespace moe {

// Binds blk.<layer>.attn_kv_b.weight and sets out.wk_b / out.wv_b to the
// matrices built from it (as TensorBinder::stacked_matrices would bind the
// split tensors).
void bind_split_kv_b(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out);

}  // namespace moe
