// What distinguishes one MoE architecture from another. Each architecture is
// one file in src/model/archs/ that binds its tensors and states its traits;
// the shared forward pass (runtime/forward_pass.cpp) reads only these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/hparams.hpp"
#include "model/router.hpp"
#include "model/swiglu.hpp"
#include "model/tensor_binder.hpp"
#include "model/weights.hpp"

namespace moe {

struct ArchTraits {
    RopeType rope_type = RopeType::normal;
    QkNorm qk_norm = QkNorm::none;
    Gating gating = Gating::softmax;   // how router logits become routing weights
    bool norm_topk = false;            // renormalise the top-k routing weights to sum 1
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
enum class AttnBias { none, optional, required };
// attn_norm, attn_q/k/v/output (+ biases), and QK-norm weights of the given kind.
void bind_attention(TensorBinder &b, const HParams &hp, int32_t layer, AttnBias bias, QkNorm qk_norm,
                    LayerWeights &out);
// The FFN pre-norm (ffn_norm.weight, or the tensor suffix `norm`), ffn_gate_inp
// (router, optional bias) and the three 3-D expert tensors with n_ff rows each.
void bind_routed_experts(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out,
                         const char *norm = "ffn_norm.weight");
// The experts' per-expert biases ffn_{gate,up}_exps.bias [n_ff, n_expert] and
// ffn_down_exps.bias [n_embd, n_expert] (required).
void bind_expert_biases(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out);
// attn_sinks.weight: one softmax sink logit per query head (required).
void bind_attention_sinks(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out);
// ffn_{gate,up,down}_shexp and the 1-D ffn_gate_inp_shexp gate.
void bind_shared_expert(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff_shared,
                        LayerWeights &out);

}  // namespace moe
