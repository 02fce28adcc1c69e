// Context lifetime, stepping, statistics and the model facts of an open context.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "context_handle.hpp"
#include "firewall.hpp"
#include "model_info.hpp"

namespace {

using moe::capi::ContextUse;
using moe::capi::guarded;

// The sizes of the earlier layouts of the structs that have grown. Each
// layout ended where the next appended field now begins, so its sizeof is
// that field's offset; the fields past it keep their defaults (params) or are
// not written (stats).
constexpr std::initializer_list<size_t> kEarlierParamsSizes = {
    offsetof(moestream_params, routing_trace_path),  // up to log_level
    offsetof(moestream_params, lookahead_layers),    // up to routing_trace_path
    offsetof(moestream_params, numa_placement),      // up to lookahead_layers (0.1), 4 bytes of tail padding
    offsetof(moestream_params, max_batch),           // up to numa_placement (0.2, 0.3), 4 bytes of tail padding
};
constexpr std::initializer_list<size_t> kEarlierStatsSizes = {
    offsetof(moestream_stats, io_busy_ns),    // up to layer_misses
    offsetof(moestream_stats, attention_ns),  // up to io_queue_depth, 4 bytes of tail padding
};
static_assert(sizeof(void *) != 8 || offsetof(moestream_params, numa_placement) == 104,
              "0.1's moestream_params was 104 bytes on 64-bit targets");
static_assert(sizeof(void *) != 8 || offsetof(moestream_params, max_batch) == 112,
              "0.2/0.3's moestream_params was 112 bytes on 64-bit targets");

moe::ContextParams to_context_params(const moestream_params &p) {
    moe::ContextParams c;
    if (!p.model_path) moe::fail(moe::Status::invalid_argument, "params.model_path is NULL");
    c.model_path = p.model_path;
    c.memory_budget = p.memory_budget;
    if (p.n_threads < 0) moe::fail(moe::Status::invalid_argument, "params.n_threads %d is negative", p.n_threads);
    c.n_threads = p.n_threads;
    c.n_ctx = p.n_ctx;
    c.io_mode = p.io_mode;
    c.prefetch = p.prefetch;
    c.cache_policy = p.cache_policy;
    c.exact = p.exact != 0;
    if (p.packed_path) c.packed_path = p.packed_path;
    if (p.struct_size >= offsetof(moestream_params, routing_trace_path) + sizeof(p.routing_trace_path) &&
        p.routing_trace_path)
        c.routing_trace_path = p.routing_trace_path;
    if (p.struct_size >= offsetof(moestream_params, lookahead_layers) + sizeof(p.lookahead_layers))
        c.lookahead_layers = p.lookahead_layers;
    if (p.struct_size >= offsetof(moestream_params, numa_placement) + sizeof(p.numa_placement))
        c.numa_placement = p.numa_placement;
    c.max_batch = 0;  // automatic, also for callers whose params end before the field
    if (p.struct_size >= offsetof(moestream_params, max_batch) + sizeof(p.max_batch)) {
        if (p.max_batch < 0) moe::fail(moe::Status::invalid_argument, "params.max_batch %d is negative", p.max_batch);
        c.max_batch = p.max_batch;
    }
    if (p.profile_path) {
        c.profile_path = p.profile_path;
        c.profile_disabled = p.profile_path[0] == '\0';
    }
    c.log = moe::Log(p.log_fn, p.log_user_data, p.log_level);
    return c;
}


void log_opened(const moe::Context &ctx, const moe::Log &log, const char *path) {
    if (!log.enabled(MOESTREAM_LOG_INFO)) return;
    const moe::HParams &hp = ctx.model().hparams();
    moestream_stats s;
    std::memset(&s, 0, sizeof s);
    ctx.fill_stats(s);
    log.write(MOESTREAM_LOG_INFO, "opened %s: %s, %d layers, %d experts (%d used), n_ctx %d, io %s (%s)", path,
              hp.arch.c_str(), hp.n_layer, hp.n_expert, hp.n_expert_used, ctx.n_ctx(),
              moestream_io_mode_name(s.io_mode), ctx.io_mode_reason().c_str());
}

void log_closing(const moe::Context &ctx, const moe::Log &log) {
    if (!log.enabled(MOESTREAM_LOG_INFO)) return;
    moestream_stats s;
    std::memset(&s, 0, sizeof s);
    ctx.fill_stats(s);
    log.write(MOESTREAM_LOG_INFO,
              "closing: %llu tokens in %llu steps, expert cache %llu hits / %llu misses, %llu bytes read on demand, "
              "%llu prefetched",
              (unsigned long long)s.tokens, (unsigned long long)s.steps, (unsigned long long)s.cache_hits,
              (unsigned long long)s.cache_misses, (unsigned long long)s.bytes_read_demand,
              (unsigned long long)s.bytes_read_prefetch);
}

}  // namespace

extern "C" {

MOESTREAM_API void moestream_params_init(moestream_params *params) {
    if (!params) return;
    std::memset(params, 0, sizeof *params);
    params->struct_size = sizeof *params;
    params->io_mode = MOESTREAM_IO_AUTO;
    params->prefetch = MOESTREAM_PREFETCH_AUTO;
    params->cache_policy = MOESTREAM_CACHE_AUTO;
    params->log_level = MOESTREAM_LOG_WARN;
}

MOESTREAM_API int moestream_open(const moestream_params *params, moestream_context **out) {
    if (out) *out = nullptr;
    moe::Log log;
    const int status = guarded("moestream_open", [&] {
        moe::capi::require(out, "out");
        moe::capi::require(params, "params");
        moe::capi::require_struct_size(params->struct_size, sizeof(moestream_params), kEarlierParamsSizes,
                                       "moestream_params");
        log = moe::Log(params->log_fn, params->log_user_data, params->log_level);
        auto handle = std::make_unique<moestream_context>();
        handle->log = log;
        handle->ctx = std::make_unique<moe::Context>(to_context_params(*params));
        moe::capi::attach_tokenizer(*handle);
        log_opened(*handle->ctx, log, params->model_path);
        *out = handle.release();
    });
    if (status != MOESTREAM_OK) log.write(MOESTREAM_LOG_ERROR, "%s", moe::capi::last_error_text());
    return status;
}

MOESTREAM_API void moestream_close(moestream_context *ctx) {
    // Destruction cannot fail visibly; the firewall keeps any exception inside.
    guarded("moestream_close", [&] {
        if (!ctx) return;
        // A call that claimed the context (on another thread, or below us on
        // this one when closing from its log callback) still uses it: freeing
        // it now would pull the memory out from under that call. Taking the
        // claim ourselves shuts such calls out for good; failing to take it,
        // the context stays open and the caller learns why.
        bool expected = false;
        if (!ctx->busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
            ctx->log.write(MOESTREAM_LOG_ERROR,
                           "moestream_close: the context is in use by a call in progress; it stays open");
            moe::fail(moe::Status::busy, "the context is in use by a call in progress; it stays open");
        }
        if (ctx->ctx) log_closing(*ctx->ctx, ctx->log);
        delete ctx;
    });
}

MOESTREAM_API int moestream_step(moestream_context *ctx, const int32_t *tokens, int32_t n_tokens,
                                 float *logits_out) {
    return guarded("moestream_step", [&] {
        ContextUse use(ctx);
        if (ctx->log.enabled(MOESTREAM_LOG_DEBUG))
            ctx->log.write(MOESTREAM_LOG_DEBUG, "step: %d tokens at position %d", n_tokens, use->n_past());
        use->step(tokens, n_tokens, logits_out);
    });
}

MOESTREAM_API int moestream_step_all_logits(moestream_context *ctx, const int32_t *tokens, int32_t n_tokens,
                                            float *logits_out) {
    return guarded("moestream_step_all_logits", [&] {
        ContextUse use(ctx);
        if (!logits_out) moe::fail(moe::Status::invalid_argument, "logits_out is NULL");
        if (ctx->log.enabled(MOESTREAM_LOG_DEBUG))
            ctx->log.write(MOESTREAM_LOG_DEBUG, "step: %d tokens at position %d, every token's logits", n_tokens,
                           use->n_past());
        use->step(tokens, n_tokens, logits_out, true);
    });
}

MOESTREAM_API int moestream_reset(moestream_context *ctx) {
    return guarded("moestream_reset", [&] {
        ContextUse use(ctx);
        use->reset();
    });
}

MOESTREAM_API int moestream_truncate(moestream_context *ctx, int32_t n_keep) {
    return guarded("moestream_truncate", [&] {
        ContextUse use(ctx);
        use->truncate(n_keep);
    });
}

MOESTREAM_API int32_t moestream_n_vocab(const moestream_context *ctx) {
    return ctx && ctx->ctx ? ctx->ctx->n_vocab() : -1;
}

MOESTREAM_API int32_t moestream_n_ctx(const moestream_context *ctx) {
    return ctx && ctx->ctx ? ctx->ctx->n_ctx() : -1;
}

MOESTREAM_API int32_t moestream_n_past(const moestream_context *ctx) {
    return ctx && ctx->ctx ? ctx->ctx->n_past() : -1;
}

MOESTREAM_API const char *moestream_io_mode_reason(const moestream_context *ctx) {
    // Written once at open and never changed: no claim on the context needed.
    return ctx && ctx->ctx ? ctx->ctx->io_mode_reason().c_str() : "";
}

MOESTREAM_API void moestream_stats_init(moestream_stats *stats) {
    if (!stats) return;
    std::memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
}

MOESTREAM_API int moestream_stats_get(const moestream_context *ctx, moestream_stats *out) {
    return guarded("moestream_stats_get", [&] {
        moe::capi::require(out, "out");
        // Callers built before the io_* fields, or before attention_ns/moe_ns,
        // were appended pass a shorter size and get only the fields they know.
        const size_t given = out->struct_size;
        moe::capi::require_struct_size(given, sizeof(moestream_stats), kEarlierStatsSizes, "moestream_stats");
        ContextUse use(ctx);
        moestream_stats s;
        std::memset(&s, 0, sizeof s);
        use->fill_stats(s);
        s.struct_size = given;
        std::memcpy(out, &s, given);
    });
}

MOESTREAM_API int moestream_stats_reset(moestream_context *ctx) {
    return guarded("moestream_stats_reset", [&] {
        ContextUse use(ctx);
        use->reset_stats();
    });
}

MOESTREAM_API int moestream_model_info_get(const moestream_context *ctx, moestream_model_info *out) {
    return guarded("moestream_model_info_get", [&] {
        moe::capi::require(out, "out");
        moe::capi::require_struct_size(out->struct_size, sizeof(moestream_model_info), "moestream_model_info");
        ContextUse use(ctx);
        const moe::Model &m = use->model();
        moestream_stats s;
        std::memset(&s, 0, sizeof s);
        use->fill_stats(s);
        *out = moe::capi::make_model_info(m.hparams(), m.bytes(), m.file().total_file_bytes(), s.io_mode,
                                          s.io_mode_reason);
    });
}

}  // extern "C"
