// llama with routed experts (Mixtral): NORMAL RoPE (the converter permutes
// Q/K), optional biases, optional rope_freqs, softmax router with the top-k
// weights renormalised. Dense llama models are rejected as unsupported.
#include "model/architecture.hpp"

namespace moe {
namespace {

class LlamaMoe final : public Architecture {
public:
    const char *name() const override { return "llama"; }
    ArchTraits traits(const HParams &) const override {
        ArchTraits t;
        t.rope_type = RopeType::normal;
        t.qk_norm = QkNorm::none;
        t.gating.norm_weights = true;
        t.tied_output_allowed = true;
        return t;
    }
    void bind_layer(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) const override {
        bind_attention(b, hp, layer, AttnBias::optional, QkNorm::none, out);
        bind_routed_experts(b, hp, layer, hp.n_ff_expert > 0 ? hp.n_ff_expert : hp.n_ff, out);
    }
};

}  // namespace

const Architecture &llama_moe_architecture() {
    static const LlamaMoe arch;
    return arch;
}

}  // namespace moe
