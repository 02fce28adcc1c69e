// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): per-head QK RMSNorm, NEOX RoPE,
// softmax router with the top-k weights renormalised.
#include "model/architecture.hpp"

namespace moe {
namespace {

class Qwen3Moe final : public Architecture {
public:
    const char *name() const override { return "qwen3moe"; }
    ArchTraits traits(const HParams &) const override {
        ArchTraits t;
        t.rope_type = RopeType::neox;
        t.qk_norm = QkNorm::per_head;
        t.gating.norm_weights = true;
        t.tied_output_allowed = true;
        return t;
    }
    void bind_layer(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) const override {
        bind_attention(b, hp, layer, AttnBias::none, QkNorm::per_head, out);
        bind_routed_experts(b, hp, layer, hp.n_ff_expert, out);
    }
};

}  // namespace

const Architecture &qwen3moe_architecture() {
    static const Qwen3Moe arch;
    return arch;
}

}  // namespace moe
