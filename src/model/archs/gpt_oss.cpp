// gpt-oss (gpt-oss-20b / 120b): biased Q/K/V and output projections, one
// softmax sink per query head, sliding-window attention on the layers the
// pattern marks (even layers), YaRN NEOX RoPE, post_attention_norm as the FFN
// pre-norm, a biased router whose top-k raw logits are softmaxed, and experts
// (MXFP4 in released files) with per-expert biases and the clamped SwiGLU.
// Untied output.
#include "model/architecture.hpp"

namespace moe {
namespace {

class GptOss final : public Architecture {
public:
    const char *name() const override { return "gpt-oss"; }
    ArchTraits traits(const HParams &) const override {
        ArchTraits t;
        t.rope_type = RopeType::neox;
        t.qk_norm = QkNorm::none;
        t.gating.func = GatingFunc::softmax_weight;
        t.gating.norm_weights = false;
        t.expert_act = ExpertAct::swiglu_oai;
        t.tied_output_allowed = false;
        return t;
    }
    void bind_layer(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) const override {
        // Every gpt-oss file has its output projection's and router's biases:
        // one without them is not this model with zero biases.
        bind_attention(b, hp, layer, AttnBias::required_with_output, QkNorm::none, out);
        bind_attention_sinks(b, hp, layer, out);
        bind_routed_experts(b, hp, layer, hp.n_ff_expert, out, "post_attention_norm.weight", true);
        bind_expert_biases(b, hp, layer, hp.n_ff_expert, out);
    }
};

}  // namespace

const Architecture &gpt_oss_architecture() {
    static const GptOss arch;
    return arch;
}

}  // namespace moe
