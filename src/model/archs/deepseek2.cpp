// deepseek2 (DeepSeek-V2/V2-Lite, DeepSeek-V3, Kimi K2): latent attention
// (absorbed MLA, keys-only cache), NORMAL RoPE on the rotary part only,
// leading dense SwiGLU layers, then routed experts gated by softmax or by
// sigmoid with a selection-only bias and group-limited choice, weights
// optionally renormalised and scaled, plus ungated shared experts. The
// output may be tied to the embedding.
#include "model/architecture.hpp"

namespace moe {
namespace {

class Deepseek2 final : public Architecture {
public:
    const char *name() const override { return "deepseek2"; }
    ArchTraits traits(const HParams &hp) const override {
        ArchTraits t;
        t.rope_type = RopeType::normal;
        t.qk_norm = QkNorm::none;
        t.gating.func = hp.gating_func;
        t.gating.norm_weights = hp.expert_weights_norm;
        t.gating.weights_scale = hp.expert_weights_scale;
        t.gating.n_group = hp.n_expert_group > 1 ? hp.n_expert_group : 1;
        t.gating.n_group_used = hp.n_expert_group > 1 ? hp.n_expert_group_used : 1;
        t.tied_output_allowed = true;
        return t;
    }
    void bind_layer(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) const override {
        bind_latent_attention(b, hp, layer, out);
        if (!hp.layer_has_experts(layer)) {
            bind_dense_ffn(b, hp, layer, hp.n_ff, out);
            return;
        }
        bind_routed_experts(b, hp, layer, hp.n_ff_expert, out);
        out.selection_bias = b.vector(TensorBinder::layer_name(layer, "exp_probs_b.bias"), hp.n_expert, false);
        if (hp.n_ff_shared > 0) bind_shared_expert(b, hp, layer, hp.n_ff_shared, SharedGate::none, out);
    }
};

}  // namespace

const Architecture &deepseek2_architecture() {
    static const Deepseek2 arch;
    return arch;
}

}  // namespace moe
