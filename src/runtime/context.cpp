#include "runtime/context.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "common/error.hpp"
#include "common/monotonic_clock.hpp"
#include "io/observed_backend.hpp"

namespace moe {
namespace {

int32_t choose_n_ctx(const ContextParams &p, const HParams &hp) {
    if (p.n_ctx < 0) fail(Status::invalid_argument, "n_ctx %d is negative", p.n_ctx);
    return context_length(hp, p.n_ctx);
}

bool wants_lookahead(int32_t prefetch, bool resident) {
    switch (prefetch) {
    case MOESTREAM_PREFETCH_LOOKAHEAD:
    case MOESTREAM_PREFETCH_BOTH: return true;
    case MOESTREAM_PREFETCH_AUTO: return !resident;
    default: return false;
    }
}

// Layers the router lookahead predicts ahead: MOESTREAM_LOOKAHEAD_LAYERS (as
// every variable, it beats the parameter), else the parameter, else the
// default (docs/performance.md measures the choice). Both are checked whether
// or not the prefetch mode looks ahead, so a bad value is reported where it
// is given instead of on the day the prefetch mode changes.
int32_t lookahead_layers(const ContextParams &p) {
    if (p.lookahead_layers < 0 || p.lookahead_layers > kMaxLookaheadLayers)
        fail(Status::invalid_argument, "lookahead_layers %d is outside 0..%d (0 = the default)", p.lookahead_layers,
             kMaxLookaheadLayers);
    if (const char *env = std::getenv("MOESTREAM_LOOKAHEAD_LAYERS"); env && *env) {
        // Digits only (strtol alone would take " 2" or "+2"); too many of
        // them saturate at LONG_MAX, out of range as well.
        const bool digits = std::strspn(env, "0123456789") == std::strlen(env);
        const long v = digits ? std::strtol(env, nullptr, 10) : -1;
        if (v < 0 || v > kMaxLookaheadLayers)
            fail(Status::invalid_argument,
                 "MOESTREAM_LOOKAHEAD_LAYERS='%s' is not a layer count in 1..%d (or 0, the default)", env,
                 kMaxLookaheadLayers);
        return v == 0 ? kDefaultLookaheadLayers : int32_t(v);  // 0 means the default, as the parameter's 0
    }
    return p.lookahead_layers == 0 ? kDefaultLookaheadLayers : p.lookahead_layers;
}

// MOESTREAM_NUMA (local | interleave) beats the parameter, as every variable does.
int32_t numa_placement(const ContextParams &p) {
    int32_t v = p.numa_placement;
    if (const char *env = std::getenv("MOESTREAM_NUMA"); env && *env) {
        if (std::strcmp(env, "local") == 0) v = MOESTREAM_NUMA_LOCAL;
        else if (std::strcmp(env, "interleave") == 0) v = MOESTREAM_NUMA_INTERLEAVE;
        else fail(Status::invalid_argument, "MOESTREAM_NUMA='%s' is not local or interleave", env);
    }
    if (v != MOESTREAM_NUMA_LOCAL && v != MOESTREAM_NUMA_INTERLEAVE)
        fail(Status::invalid_argument, "numa_placement %d is not a moestream_numa_placement", v);
    return v;
}

// The parameters with the environment's overrides applied and checked, as
// the context keeps them: before the model opens, whose built matrices take
// the NUMA placement.
ContextParams resolved(const ContextParams &given) {
    ContextParams p = given;
    p.numa_placement = numa_placement(p);
    p.lookahead_layers = lookahead_layers(p);
    return p;
}

}  // namespace

Context::Context(const ContextParams &params)
    : params_(resolved(params)),
      pool_(params_.n_threads),
      model_(Model::open(params_.model_path, {numa_placement_of(params_.numa_placement), &pool_})) {
    if (params_.max_batch < 0) fail(Status::invalid_argument, "max_batch %d is negative", params_.max_batch);
    if (params_.io_mode < MOESTREAM_IO_AUTO || params_.io_mode > MOESTREAM_IO_PREAD)
        fail(Status::invalid_argument, "io_mode %d is not a moestream_io_mode", params_.io_mode);
    if (params_.prefetch < MOESTREAM_PREFETCH_AUTO || params_.prefetch > MOESTREAM_PREFETCH_BOTH)
        fail(Status::invalid_argument, "prefetch %d is not a moestream_prefetch_mode", params_.prefetch);
    // Checked here, whatever the mode: only the streaming source looks at it.
    if (params_.cache_policy < MOESTREAM_CACHE_AUTO || params_.cache_policy > MOESTREAM_CACHE_REUSE_AWARE)
        fail(Status::invalid_argument, "cache_policy %d is not a moestream_cache_policy", params_.cache_policy);
    // The files close writes are renamed over their paths: never over the model.
    model_->file().refuse_as_output(params_.profile_path, "usage profile");
    model_->file().refuse_as_output(params_.routing_trace_path, "routing trace");
    n_ctx_ = choose_n_ctx(params_, model_->hparams());
    tokens_.assign(size_t(n_ctx_), 0);
    source_ = select_expert_source(*model_, params_, stats_);
    if (!source_.resident) {
        // Streaming experts: the dense matrices move out of the page cache
        // into memory of our own (dense_copy.hpp says why); 1-D tensors are
        // f32 copies already. All but the token embeddings: a token reads one
        // row of them, so the table stays in the mapping, where only rows in
        // use take memory (unless it is also the output head, which reads
        // all of it every token).
        const ModelWeights &w = model_->weights();
        const uint8_t *embd = w.output.data == w.token_embd.data ? nullptr : w.token_embd.data;
        std::vector<const uint8_t *> wanted = model_->matrix_data();
        std::erase(wanted, embd);
        const std::less<const uint8_t *> before;
        std::sort(wanted.begin(), wanted.end(), before);
        dense_ = std::make_unique<DenseCopy>(
            model_->file(), numa_placement_of(params_.numa_placement), source_.io_mode == MOESTREAM_IO_DIRECT,
            [&](const gguf::TensorInfo &t) { return std::binary_search(wanted.begin(), wanted.end(), t.data, before); });
        model_->relocate_matrices([this, embd](const uint8_t *mapped) {
            if (mapped == embd) return mapped;
            return dense_->relocate(mapped);  // throws if a matrix was missed
        });
        source_.reason += "; " + dense_->describe();
    }
    ForwardOptions fo;
    fo.n_ctx = n_ctx_;
    const int32_t max_batch = params_.max_batch > 0 ? params_.max_batch
                              : source_.max_batch > 0 ? source_.max_batch
                                                      : kDefaultMaxBatch;
    fo.max_batch = std::min(max_batch, n_ctx_);
    fo.exact = params_.exact;
    fo.lookahead_layers = wants_lookahead(params_.prefetch, source_.resident) ? params_.lookahead_layers : 0;
    fo.resident_experts = source_.resident;
    forward_ = std::make_unique<ForwardPass>(*model_, *source_.source, pool_, fo);
    if (!params_.routing_trace_path.empty()) {
        TraceHeader th;
        th.n_layer = uint32_t(model_->hparams().n_layer);
        th.n_expert = uint32_t(model_->hparams().n_expert);
        th.n_expert_used = uint32_t(model_->hparams().n_expert_used);
        for (const ExpertLayerLayout &l : model_->expert_layouts())
            th.bytes_per_expert = std::max(th.bytes_per_expert, l.bytes_per_expert());
        routing_trace_ = std::make_unique<RoutingTraceWriter>(params_.routing_trace_path, th);
        forward_->set_routing_trace(routing_trace_.get());
    }
}

Context::~Context() {
    if (source_.source) {
        try {
            source_.source->drain();
        } catch (...) {
            // Closing must not throw; outstanding reads are abandoned with the source.
        }
    }
    if (routing_trace_) {
        try {
            routing_trace_->close();
        } catch (const std::exception &e) {
            params_.log.write(MOESTREAM_LOG_WARN, "routing trace not written: %s", e.what());
        }
    }
}

void Context::step(const int32_t *tokens, int32_t n_tokens, float *logits_out, bool every_token) {
    if (n_tokens <= 0) fail(Status::invalid_argument, "n_tokens is %d; at least one token is needed", n_tokens);
    if (!tokens) fail(Status::invalid_argument, "tokens is NULL");
    const int32_t n_vocab = model_->hparams().n_vocab;
    for (int32_t i = 0; i < n_tokens; ++i)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            fail(Status::invalid_argument, "token %d at index %d is outside the vocabulary [0, %d)", tokens[i], i,
                 n_vocab);
    if (int64_t(n_past_) + n_tokens > n_ctx_)
        fail(Status::context_full, "%d tokens do not fit: %d of n_ctx %d positions are used", n_tokens, n_past_,
             n_ctx_);

    const uint64_t t0 = monotonic_ns();
    const uint64_t wait0 = forward_->expert_wait_ns();
    const ForwardTimes times0 = forward_->times();
    const int32_t batch = forward_->options().max_batch;
    const uint64_t traced = forward_->traced_tokens();
    const uint64_t trace_rows = routing_trace_ ? routing_trace_->rows() : 0;
    // Chunks after the first wrap the sliding-window rings onto the rows the
    // step's first tokens read (KvCache::keep_window): kept aside, they are
    // put back if the step fails.
    KvCache &kv = forward_->kv();
    const bool several_chunks = n_tokens > batch;
    if (several_chunks) kv.keep_window(n_past_);
    try {
        int32_t done = 0;
        while (done < n_tokens) {
            const int32_t n = std::min(batch, n_tokens - done);
            const bool last = done + n == n_tokens;
            if (every_token && logits_out)
                forward_->run(tokens + done, n, n_past_ + done, logits_out + size_t(done) * size_t(n_vocab),
                              ForwardPass::Logits::every);
            else
                forward_->run(tokens + done, n, n_past_ + done, last ? logits_out : nullptr);
            done += n;
        }
    } catch (...) {
        // The rows the failed step recorded go too, also when it is not run again.
        if (several_chunks) kv.restore_window(n_past_);
        forward_->rewind_trace(traced);
        if (routing_trace_) routing_trace_->rewind(trace_rows);
        throw;
    }
    // Only now does the context take the tokens: a throw above leaves n_past as it was.
    std::copy(tokens, tokens + n_tokens, tokens_.begin() + n_past_);
    n_past_ += n_tokens;
    const uint64_t elapsed = monotonic_ns() - t0;
    const uint64_t waited = forward_->expert_wait_ns() - wait0;
    stats_.tokens += uint64_t(n_tokens);
    stats_.steps += 1;
    stats_.step_ns += elapsed;
    stats_.compute_ns += elapsed > waited ? elapsed - waited : 0;
    const ForwardTimes times = forward_->times();
    stats_.attention_ns += times.attention_ns - times0.attention_ns;
    stats_.moe_ns += times.moe_ns - times0.moe_ns;
}

void Context::reset() { n_past_ = 0; }

void Context::truncate(int32_t n_keep) {
    if (n_keep < 0 || n_keep > n_past_)
        fail(Status::invalid_argument, "cannot keep %d tokens: the context holds %d", n_keep, n_past_);
    // The rows of the forgotten positions stay where they are: the next step
    // overwrites them, and no query reads past its own position.
    const int32_t floor = forward_->kv().min_keep(n_past_);
    if (n_keep < floor)
        fail(Status::unsupported,
             "cannot go back to %d tokens: the sliding-window layers' rings hold the window of %d tokens and more "
             "(reset and step the tokens to keep again, or open with a larger max_batch)",
             n_keep, floor);
    n_past_ = n_keep;
}

void Context::reset_stats() {
    stats_.reset();
    if (io::ObservedBackend *reads = source_.source->observed_reads()) reads->reset_activity();
}

void Context::fill_stats(moestream_stats &out) const {
    const Stats &s = stats_;
    out.tokens = s.tokens;
    out.steps = s.steps;
    out.compute_ns = s.compute_ns;
    out.io_wait_ns = s.io_wait_ns;
    out.step_ns = s.step_ns;
    out.bytes_read_demand = s.bytes_read_demand;
    out.bytes_read_prefetch = s.bytes_read_prefetch;
    out.bytes_read_wasted = s.bytes_read_wasted;
    out.cache_hits = s.cache_hits;
    out.cache_misses = s.cache_misses;
    out.prefetch_issued = s.prefetch_issued;
    out.prefetch_useful = s.prefetch_useful;
    out.evictions = s.evictions;
    out.attention_ns = s.attention_ns;
    out.moe_ns = s.moe_ns;
    out.dense_bytes = model_->dense_bytes();
    out.kv_bytes = forward_->kv().bytes();
    out.expert_cache_bytes = source_.cache_bytes;
    out.resident_bytes = out.dense_bytes + out.kv_bytes + out.expert_cache_bytes + forward_->scratch_bytes();
    out.io_mode = source_.io_mode;
    out.n_layer = std::min<int32_t>(model_->hparams().n_layer, MOESTREAM_MAX_LAYERS);
    std::snprintf(out.io_mode_reason, sizeof out.io_mode_reason, "%s", source_.reason.c_str());
    for (int32_t l = 0; l < out.n_layer; ++l) {
        out.layer_hits[l] = s.layer_hits[size_t(l)];
        out.layer_misses[l] = s.layer_misses[size_t(l)];
    }
    if (const io::ObservedBackend *reads = source_.source->observed_reads()) {
        const io::IoActivity a = reads->activity();
        out.io_busy_ns = a.busy_ns;
        out.io_bytes_completed = a.bytes;
        out.io_reads_completed = a.reads;
        out.io_read_ns = a.read_ns;
        out.io_queue_depth = int32_t(reads->queue_depth());
    }
}

}  // namespace moe
