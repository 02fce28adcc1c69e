// A running model: the bound weights, the KV cache and scratch (sized at open
// for n_ctx and max_batch), the compute threads, the expert source and the
// statistics. step() appends tokens; a failed step leaves it unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/log.hpp"
#include "common/stats.hpp"
#include "common/thread_pool.hpp"
#include "experts/expert_source.hpp"
#include "experts/routing_trace.hpp"
#include "model/model.hpp"
#include "runtime/dense_copy.hpp"
#include "runtime/forward_pass.hpp"
#include "runtime/sampler.hpp"
#include "runtime/state_file.hpp"

namespace moe {

inline constexpr int32_t kDefaultLookaheadLayers = 1;
inline constexpr int32_t kMaxLookaheadLayers = 4;  // the expert source tracks this many distances
// Tokens per forward chunk unless the caller or the streaming plan says otherwise.
inline constexpr int32_t kDefaultMaxBatch = 64;

struct ContextParams {
    std::string model_path;
    uint64_t memory_budget = 0;  // 0 = automatic
    int32_t n_threads = 0;       // 0 = one per physical core
    int32_t n_ctx = 0;           // 0 = min(model's, 4096)
    int32_t io_mode = MOESTREAM_IO_AUTO;
    int32_t prefetch = MOESTREAM_PREFETCH_AUTO;
    int32_t lookahead_layers = 0;  // router lookahead depth when the prefetch mode uses it; 0 = default
    int32_t cache_policy = MOESTREAM_CACHE_AUTO;
    bool exact = false;
    std::string packed_path;     // "" = default
    std::string profile_path;    // "" with profile_disabled = off
    bool profile_disabled = false;
    // Tokens per internal forward chunk; 0 = automatic: kDefaultMaxBatch, or
    // more when experts are streamed and the budget affords the scratch
    // (expert_source_factory.cpp, streaming_max_batch).
    int32_t max_batch = kDefaultMaxBatch;
    std::string routing_trace_path;  // "" = no routing trace
    int32_t numa_placement = MOESTREAM_NUMA_LOCAL;  // the expert cache's, the dense copy's, the built matrices' memory
    Log log;  // the caller's callback: what closing cannot return as a status is reported here
};

inline NumaPlacement numa_placement_of(int32_t v) {
    return v == MOESTREAM_NUMA_INTERLEAVE ? NumaPlacement::interleave : NumaPlacement::local;
}

// What the expert source chosen for a context reports about itself.
struct ExpertSourceChoice {
    std::unique_ptr<ExpertSource> source;
    int32_t io_mode = MOESTREAM_IO_MMAP;
    std::string reason;
    bool resident = true;             // everything served from the mapping (prefetch is pointless)
    uint64_t cache_bytes = 0;         // capacity of an expert cache, 0 without one
    // The chunk size the source's plan chose when ContextParams::max_batch is
    // automatic; 0 = no choice (kDefaultMaxBatch).
    int32_t max_batch = 0;
};

// Picks and builds the expert source for these parameters (expert_source_select.cpp).
ExpertSourceChoice select_expert_source(const Model &model, const ContextParams &params, Stats &stats);

class Context {
public:
    explicit Context(const ContextParams &params);
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    // Validates everything before touching state: n_tokens > 0, every token
    // < n_vocab, room for n_tokens in the context (context_full otherwise).
    // logits_out (may be null) gets the last token's n_vocab logits, or with
    // every_token each token's, n_tokens * n_vocab floats.
    void step(const int32_t *tokens, int32_t n_tokens, float *logits_out, bool every_token = false);
    void reset();
    // Keeps the first n_keep tokens (0..n_past) and forgets the rest, so the
    // next step continues at position n_keep exactly as if the forgotten
    // tokens had never been stepped. Sliding-window layers keep a ring of
    // their last positions, so past a point (KvCache::min_keep) they can no
    // longer go back: unsupported then, and the context is unchanged.
    void truncate(int32_t n_keep);

    // Tokens, positions and KV cache to / from a state file
    // (docs/state-format.md; context_state.cpp), with the sampler's
    // parameters, generator state and token history when a sampler is given. Both wait for
    // expert reads in flight first. A failed load leaves the context and the
    // sampler unchanged; a failed save leaves any previous file at path intact.
    // Loading into a sampler needs a file with a sampler section
    // (state_mismatch otherwise); without one, a sampler section is ignored.
    // save_state returns write_state_file's warning ("" when none).
    std::string save_state(const std::string &path, const Sampler *sampler = nullptr);
    void load_state(const std::string &path, Sampler *sampler = nullptr);
    state::StateShape state_shape() const;

    const Model &model() const { return *model_; }
    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_past() const { return n_past_; }
    int32_t n_vocab() const { return model_->hparams().n_vocab; }
    const ContextParams &params() const { return params_; }
    // Why this I/O mode and how its memory is placed, in full (the stats
    // carry the first 159 characters).
    const std::string &io_mode_reason() const { return source_.reason; }

    // The keys and values of the tokens in the context (rings for sliding-window layers).
    const KvCache &kv_cache() const { return forward_->kv(); }

    void fill_stats(moestream_stats &out) const;
    void reset_stats();
    ExpertSource &expert_source() { return *source_.source; }

private:
    ContextParams params_;
    // Declared before the model so that it outlives the views pointing into it.
    std::unique_ptr<DenseCopy> dense_;  // the dense matrices when experts are streamed
    ThreadPool pool_;                   // before the model: it builds the matrices the model derives at open
    std::unique_ptr<Model> model_;
    int32_t n_ctx_ = 0;
    Stats stats_;
    ExpertSourceChoice source_;
    std::unique_ptr<RoutingTraceWriter> routing_trace_;
    std::unique_ptr<ForwardPass> forward_;
    int32_t n_past_ = 0;
    std::vector<int32_t> tokens_;  // the n_past_ tokens in the context (n_ctx_ entries)
    uint64_t wait_ns_at_reset_ = 0;
};

}  // namespace moe
