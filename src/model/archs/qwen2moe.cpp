// qwen2moe (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): biased Q/K/V, NEOX RoPE,
// softmax router without renormalisation, plus a shared expert whose output
// is scaled by a per-token sigmoid gate. Untied output.
#include "model/architecture.hpp"

namespace moe {
namespace {

class Qwen2Moe final : public Architecture {
public:
    const char *name() const override { return "qwen2moe"; }
    ArchTraits traits(const HParams &) const override {
        ArchTraits t;
        t.rope_type = RopeType::neox;
        t.qk_norm = QkNorm::none;
        t.gating.norm_weights = false;
        t.tied_output_allowed = false;
        return t;
    }
    void bind_layer(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) const override {
        bind_attention(b, hp, layer, AttnBias::required, QkNorm::none, out);
        bind_routed_experts(b, hp, layer, hp.n_ff_expert, out);
        bind_shared_expert(b, hp, layer, hp.n_ff_shared > 0 ? hp.n_ff_shared : hp.n_ff, SharedGate::sigmoid, out);
    }
};

}  // namespace

const Architecture &qwen2moe_architecture() {
    static const Qwen2Moe arch;
    return arch;
}

}  // namespace moe
