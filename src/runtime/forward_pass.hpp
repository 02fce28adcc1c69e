// The forward pass shared by every architecture: embedding, then per layer
// attention (with the KV cache) and the MoE block (router, routed experts read
// through ExpertSource, optional shared expert), then the output head.
// All scratch is allocated at construction for n_ctx and max_batch tokens;
// run() does not allocate.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/thread_pool.hpp"
#include "experts/routing_trace.hpp"
#include "experts/expert_source.hpp"
#include "model/attention.hpp"
#include "model/kv_cache.hpp"
#include "model/model.hpp"
#include "model/rope.hpp"
#include "model/router.hpp"
#include "runtime/linear.hpp"

namespace moe {

struct ForwardOptions {
    int32_t n_ctx = 0;
    int32_t max_batch = 0;  // tokens per run() call
    bool exact = false;     // f32 activations and f32 KV cache
    // Router lookahead depth: on layer L's state run the routers of layers
    // L+1 .. L+lookahead_layers and hand their predictions to the source as
    // prefetch hints (0 = off).
    int32_t lookahead_layers = 0;
    bool resident_experts = false; // the source has every expert at once: compute a layer's experts together
};

// Compute time by part of the layer, accumulated since construction.
struct ForwardTimes {
    uint64_t attention_ns = 0;
    uint64_t moe_ns = 0;  // without the waits for expert bytes (expert_wait_ns)
};

class ForwardPass {
public:
    ForwardPass(const Model &model, ExpertSource &experts, ThreadPool &pool, const ForwardOptions &opt);

    // Which tokens of a chunk get logits.
    enum class Logits { last, every };
    // Processes n_tokens (1..max_batch) tokens at positions n_past.. and, if
    // logits is not null, writes n_vocab logits: the last token's, or every
    // token's one after another. Writes the KV cache at those positions only
    // (in a sliding-window ring, over rows of positions no query of this or a
    // later step sees); the caller owns n_past.
    void run(const int32_t *tokens, int32_t n_tokens, int32_t n_past, float *logits, Logits which = Logits::last);

    const ForwardOptions &options() const { return opt_; }
    const KvCache &kv() const { return kv_; }
    KvCache &kv() { return kv_; }
    size_t scratch_bytes() const;
    // Nanoseconds spent blocked in ExpertSource::next_ready since construction.
    uint64_t expert_wait_ns() const { return expert_wait_ns_; }
    const ForwardTimes &times() const { return times_; }
    // Records every token's routing (top-k ids per layer); tokens are numbered
    // in the order processed, across resets. Null = off.
    void set_routing_trace(RoutingTraceWriter *trace) { routing_trace_ = trace; }
    // Tokens traced so far, and a way back to that count: a step that fails
    // after some of its chunks ran keeps none of its tokens, so the next step
    // numbers its tokens from there (the context drops the failed step's rows
    // from the writer).
    uint64_t traced_tokens() const { return traced_tokens_; }
    void rewind_trace(uint64_t tokens) { traced_tokens_ = tokens; }

private:
    void attention_block(int32_t layer, int32_t n_tokens, int32_t n_past);
    // Latent attention (MLA, absorbed form; forward_latent_attention.cpp).
    void latent_attention_block(int32_t layer, int32_t n_tokens, int32_t n_past);
    // Causal attention of q_ against the cache into attn_, every head of every token.
    void attend(int32_t layer, int32_t n_tokens, int32_t n_past);
    void moe_block(int32_t layer, int32_t n_tokens);
    void route(const LayerWeights &lw, int32_t n_tokens);
    void group_by_expert(int32_t n_tokens);
    // Converts the normalised tokens for the experts' gate/up matrices (forward_experts.cpp).
    void prepare_expert_inputs(const LayerWeights &lw, int32_t n_tokens);
    // Gate/up/SwiGLU/down of a group of delivered experts, into slot_out_.
    void compute_experts(const LayerWeights &lw, const ReadyExpert *group, int32_t n_group, int32_t n_tokens);
    void shared_expert(const LayerWeights &lw, int32_t n_tokens);
    // down . (silu(gate . xn) * (up . xn)) of the normalised tokens into sh_out_.
    void swiglu_ffn(const MatrixView &gate, const MatrixView &up, const MatrixView &down, int32_t n_tokens);
    void predict_and_prefetch(int32_t layer, int32_t n_tokens);
    // Final norm and output matrix for tokens first .. first + count - 1 of the
    // chunk, logits row after row: the matrix is read once for all of them.
    void output_head(int32_t first, int32_t count, float *logits);

    const Model &model_;
    const HParams &hp_;
    ExpertSource &experts_;
    ThreadPool &pool_;
    ForwardOptions opt_;
    KvCache kv_;
    AttentionShape attn_shape_;
    RopeParams rope_;

    // Dimensions.
    int64_t n_embd_, q_dim_, k_dim_, v_dim_, o_dim_, n_ff_max_, n_ff_shared_max_;
    int32_t n_expert_, n_used_;

    // Scratch (rows of max_batch tokens).
    std::vector<uint8_t> act_;
    Linear linear_;
    std::vector<float> x_, xn_, q_, k_, v_, attn_, tmp_, rope_cs_, scores_;
    std::vector<float> router_, topk_w_, slot_out_, moe_out_;
    std::vector<int32_t> topk_ids_;
    RouterScratch router_scratch_;
    RoutingTraceWriter *routing_trace_ = nullptr;
    uint64_t traced_tokens_ = 0;
    // Routed experts: unique experts in request order and their (token, slot) entries.
    std::vector<int32_t> unique_, count_, offset_, entry_token_, entry_slot_, fill_;
    // Per entry (token, slot) of the layer, in entry order: gate, up, hidden
    // and down rows; converted inputs per token (xq_) and per entry (eq_, hq_).
    std::vector<float> gate_, up_, hidden_, down_;
    std::vector<uint8_t> xq_gate_, xq_up_, eq_gate_, eq_up_, hq_;
    size_t xq_row_gate_ = 0, xq_row_up_ = 0;
    bool up_shares_gate_input_ = true;
    std::vector<ReadyExpert> ready_;
    std::unique_ptr<std::atomic<int32_t>[]> chunks_left_;  // phase-1 chunks not yet done, per group member
    // Shared expert and dense FFN layers.
    std::vector<float> sh_gate_, sh_up_, sh_hidden_, sh_out_, sh_g_;
    // Latent attention: per-head queries before absorption (nope + rope),
    // the q_lora latent, and the decompressed per-head values.
    std::vector<float> q_full_, q_latent_, mla_out_;
    std::vector<uint8_t> mla_act_;  // every head's converted input to attn_k_b or attn_v_b
    // Lookahead.
    std::vector<float> la_xn_, la_router_, la_w_;
    std::vector<int32_t> la_ids_, la_unique_;
    std::vector<uint8_t> la_mark_;
    uint64_t expert_wait_ns_ = 0;
    ForwardTimes times_;
};

}  // namespace moe
