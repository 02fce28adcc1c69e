#include "common/error.hpp"
#include "model/architecture.hpp"
#include "model/kv_b_split.hpp"

namespace moe {

void bind_attention(TensorBinder &b, const HParams &hp, int32_t layer, AttnBias bias, QkNorm qk_norm,
                    LayerWeights &out) {
    auto name = [layer](const char *suffix) { return TensorBinder::layer_name(layer, suffix); };
    const int64_t n_embd = hp.n_embd;
    const int64_t q_dim = int64_t(hp.n_head) * hp.head_dim_k;
    const int64_t k_dim = int64_t(hp.n_head_kv) * hp.head_dim_k;
    const int64_t v_dim = int64_t(hp.n_head_kv) * hp.head_dim_v;
    const int64_t o_dim = int64_t(hp.n_head) * hp.head_dim_v;
    out.attn_norm = b.vector(name("attn_norm.weight"), n_embd);
    out.wq = b.matrix(name("attn_q.weight"), n_embd, q_dim);
    out.wk = b.matrix(name("attn_k.weight"), n_embd, k_dim);
    out.wv = b.matrix(name("attn_v.weight"), n_embd, v_dim);
    out.wo = b.matrix(name("attn_output.weight"), o_dim, n_embd);
    if (bias != AttnBias::none) {
        const bool req = bias == AttnBias::required || bias == AttnBias::required_with_output;
        out.bq = b.vector(name("attn_q.bias"), q_dim, req);
        out.bk = b.vector(name("attn_k.bias"), k_dim, req);
        out.bv = b.vector(name("attn_v.bias"), v_dim, req);
        out.bo = b.vector(name("attn_output.bias"), n_embd, bias == AttnBias::required_with_output);
    }
    switch (qk_norm) {
    case QkNorm::none: break;
    case QkNorm::per_head:
        out.q_norm = b.vector(name("attn_q_norm.weight"), hp.head_dim_k);
        out.k_norm = b.vector(name("attn_k_norm.weight"), hp.head_dim_k);
        break;
    case QkNorm::full:
        out.q_norm = b.vector(name("attn_q_norm.weight"), q_dim);
        out.k_norm = b.vector(name("attn_k_norm.weight"), k_dim);
        break;
    }
}

void bind_routed_experts(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out,
                         const char *norm, bool router_bias_required) {
    auto name = [layer](const char *suffix) { return TensorBinder::layer_name(layer, suffix); };
    if (hp.n_expert <= 0 || hp.n_expert_used <= 0)
        fail(Status::unsupported, "%s: architecture '%s' without routed experts (expert_count = %d) is not supported",
             b.file().path().c_str(), hp.arch.c_str(), hp.n_expert);
    if (n_ff <= 0)
        fail(Status::bad_format, "%s: expert feed-forward length is missing (layer %d)", b.file().path().c_str(),
             layer);
    const int64_t n_embd = hp.n_embd, n_expert = hp.n_expert;
    out.ffn_norm = b.vector(name(norm), n_embd);
    out.router = b.matrix(name("ffn_gate_inp.weight"), n_embd, n_expert);
    out.router_bias = b.vector(name("ffn_gate_inp.bias"), n_expert, router_bias_required);
    out.experts.n_expert = hp.n_expert;
    out.experts.gate = b.experts(name("ffn_gate_exps.weight"), n_embd, n_ff, n_expert);
    out.experts.up = b.experts(name("ffn_up_exps.weight"), n_embd, n_ff, n_expert);
    out.experts.down = b.experts(name("ffn_down_exps.weight"), n_ff, n_embd, n_expert);
}

void bind_expert_biases(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out) {
    auto name = [layer](const char *suffix) { return TensorBinder::layer_name(layer, suffix); };
    out.exp_gate_bias = b.table(name("ffn_gate_exps.bias"), n_ff, hp.n_expert);
    out.exp_up_bias = b.table(name("ffn_up_exps.bias"), n_ff, hp.n_expert);
    out.exp_down_bias = b.table(name("ffn_down_exps.bias"), hp.n_embd, hp.n_expert);
}

void bind_attention_sinks(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) {
    out.attn_sinks = b.vector(TensorBinder::layer_name(layer, "attn_sinks.weight"), hp.n_head);
}

void bind_shared_expert(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff_shared, SharedGate gate,
                        LayerWeights &out) {
    auto name = [layer](const char *suffix) { return TensorBinder::layer_name(layer, suffix); };
    if (n_ff_shared <= 0)
        fail(Status::bad_format, "%s: shared expert feed-forward length is missing (layer %d)",
             b.file().path().c_str(), layer);
    const int64_t n_embd = hp.n_embd;
    out.shexp_gate = b.matrix(name("ffn_gate_shexp.weight"), n_embd, n_ff_shared);
    out.shexp_up = b.matrix(name("ffn_up_shexp.weight"), n_embd, n_ff_shared);
    out.shexp_down = b.matrix(name("ffn_down_shexp.weight"), n_ff_shared, n_embd);
    if (gate == SharedGate::sigmoid) out.shexp_gate_inp = b.matrix(name("ffn_gate_inp_shexp.weight"), n_embd, 1);
}

void bind_dense_ffn(TensorBinder &b, const HParams &hp, int32_t layer, int64_t n_ff, LayerWeights &out) {
    auto name = [layer](const char *suffix) { return TensorBinder::layer_name(layer, suffix); };
    if (n_ff <= 0)
        fail(Status::bad_format, "%s: feed-forward length of dense layer %d is missing", b.file().path().c_str(),
             layer);
    const int64_t n_embd = hp.n_embd;
    out.ffn_norm = b.vector(name("ffn_norm.weight"), n_embd);
    out.ffn_gate = b.matrix(name("ffn_gate.weight"), n_embd, n_ff);
    out.ffn_up = b.matrix(name("ffn_up.weight"), n_embd, n_ff);
    out.ffn_down = b.matrix(name("ffn_down.weight"), n_ff, n_embd);
}

void bind_latent_attention(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) {
    auto name = [layer](const char *suffix) { return TensorBinder::layer_name(layer, suffix); };
    const int64_t n_embd = hp.n_embd, n_head = hp.n_head, kv_lora = hp.kv_lora_rank;
    const int64_t q_rows = n_head * hp.head_dim_k_mla, nope = hp.head_dim_k_mla - hp.n_rot;
    out.attn_norm = b.vector(name("attn_norm.weight"), n_embd);
    if (hp.q_lora_rank > 0) {
        out.wq_a = b.matrix(name("attn_q_a.weight"), n_embd, hp.q_lora_rank);
        out.q_a_norm = b.vector(name("attn_q_a_norm.weight"), hp.q_lora_rank);
        out.wq_b = b.matrix(name("attn_q_b.weight"), hp.q_lora_rank, q_rows);
    } else {
        out.wq = b.matrix(name("attn_q.weight"), n_embd, q_rows);
    }
    out.wkv_a = b.matrix(name("attn_kv_a_mqa.weight"), n_embd, kv_lora + hp.n_rot);
    out.kv_a_norm = b.vector(name("attn_kv_a_norm.weight"), kv_lora);
    if (hp.joint_kv_b) {
        bind_split_kv_b(b, hp, layer, out);
    } else {
        out.wk_b = b.stacked_matrices(name("attn_k_b.weight"), nope, kv_lora, n_head);
        out.wv_b = b.stacked_matrices(name("attn_v_b.weight"), kv_lora, hp.head_dim_v_mla, n_head);
    }
    out.wo = b.matrix(name("attn_output.weight"), n_head * hp.head_dim_v_mla, n_embd);
}

}  // namespace moe
