// olmoe (OLMoE-1B-7B): RMSNorm over the whole projected Q and K vectors,
// NEOX RoPE, softmax router without renormalisation, untied output.
#include "model/architecture.hpp"

namespace moe {
namespace {

class Olmoe final : public Architecture {
public:
    const char *name() const override { return "olmoe"; }
    ArchTraits traits(const HParams &) const override {
        ArchTraits t;
        t.rope_type = RopeType::neox;
        t.qk_norm = QkNorm::full;
        t.gating.norm_weights = false;
        t.tied_output_allowed = false;
        return t;
    }
    void bind_layer(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) const override {
        bind_attention(b, hp, layer, AttnBias::none, QkNorm::full, out);
        bind_routed_experts(b, hp, layer, hp.n_ff_expert > 0 ? hp.n_ff_expert : hp.n_ff, out);
    }
};

}  // namespace

const Architecture &olmoe_architecture() {
    static const Olmoe arch;
    return arch;
}

}  // namespace moe
