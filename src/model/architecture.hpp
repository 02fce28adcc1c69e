// What distinguishes one MoE architecture from another. Each architecture is
// one file in src/model/archs/ that binds its tensors and states its traits;
// the shared forward pass (runtime/forward_pass.cpp) reads only these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/hparams.hpp"
#include "model/rope.hpp"
#include "model/router.hpp"
#include "model/swiglu.hpp"
#include "model/tensor_binder.hpp"
#include "model/weights.hpp"

namespace moe {

struct ArchTraits {
    RopeType rope_type = RopeType::normal;
    QkNorm qk_norm = QkNorm::none;
    GatingSpec gating;                 // router weights, selection and weight post-processing
    ExpertAct expert_act = ExpertAct::swiglu;
    bool tied_output_allowed = false;  // output.weight may be absent (token_embd reused)
};

class Architecture {
public:
    virtual ~Architecture() = default;
    // general.architecture value this class handles.
    virtual const char *name() const = 0;
    virtual ArchTraits traits(const HParams &hp) const = 0;
    // Binds every tensor of one layer (shape and type checked).
    virtual void bind_layer(TensorBinder &binder, const HParams &hp, int32_t layer, LayerWeights &out) const = 0;
};

// The registry (archs/registry.cpp). Returns nullptr for an unknown name.
const Architecture *find_architecture(const std::string &name);
std::vector<const char *> architecture_names();

// --- pieces shared by the architecture files (arch_common.cpp) --------------
// Which attention biases a file must have: none bound, any of them, Q/K/V
// (attn_output.bias optional), or all four.
enum class AttnBias { none, optional, required, required_with_output };
// attn_norm, attn_q/k/v/output (+ biases), and QK-norm weights of the given kind.
void bind_attention(TensorBinder &b, const HParams &hp, int32_t layer, AttnBias bias, QkNorm qk_norm,
                    LayerWeights &out);
// The FFN pre-norm (ffn_norm.weight, or the tensor suffix `norm`), ffn_gate_inp
// (router; its bias optional unless router_bias_required) and the three 3-D
// expert tensors with n_ff rows each.
void bind_routed_experts(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out,
                         const char *norm = "ffn_norm.weight", bool router_bias_required = false);
// The experts' per-expert biases ffn_{gate,up}_exps.bias [n_ff, n_expert] and
// ffn_down_exps.bias [n_embd, n_expert] (required).
void bind_expert_biases(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out);
// attn_sinks.weight: one softmax sink logit per query head (required).
void bind_attention_sinks(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out);
// ffn_{gate,up,down}_shexp and, when gated, the 1-D ffn_gate_inp_shexp gate.
enum class SharedGate { none, sigmoid };
void bind_shared_expert(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff_shared, SharedGate gate,
                        LayerWeights &out);
// ffn_norm and the dense SwiGLU FFN ffn_{gate,up,down} of a layer without experts.
void bind_dense_ffn(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out);
// attn_norm and latent attention (absorbed MLA): attn_q (or attn_q_a, attn_q_a_norm,
// attn_q_b when hp.q_lora_rank > 0), attn_kv_a_mqa, attn_kv_a_norm, attn_k_b, attn_v_b
// (built from attn_kv_b when hp.joint_kv_b: kv_b_split.hpp), attn_output.
void bind_latent_attention(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out);

}  // namespace moe
