// Prints sizeof/alignof and every field's offsetof of the public structs as
// JSON, so the Python binding's ctypes mirrors can be checked against the
// compiler's layout.
#include <cstddef>
#include <cstdio>

#include "moestream.h"

namespace {

bool g_first_field = true;

void begin(const char *name, size_t size, size_t align, bool first) {
    std::printf("%s\n  \"%s\": {\"size\": %zu, \"align\": %zu, \"fields\": {", first ? "" : ",", name, size,
                align);
    g_first_field = true;
}

void field(const char *name, size_t offset, size_t size) {
    std::printf("%s\n    \"%s\": [%zu, %zu]", g_first_field ? "" : ",", name, offset, size);
    g_first_field = false;
}

void end() { std::printf("}}"); }

}  // namespace

#define STRUCT(T, first) begin(#T, sizeof(T), alignof(T), first)
#define FIELD(T, f) field(#f, offsetof(T, f), sizeof(T::f))

int main() {
    std::printf("{");
    STRUCT(moestream_params, true);
    FIELD(moestream_params, struct_size);
    FIELD(moestream_params, model_path);
    FIELD(moestream_params, memory_budget);
    FIELD(moestream_params, n_threads);
    FIELD(moestream_params, n_ctx);
    FIELD(moestream_params, io_mode);
    FIELD(moestream_params, prefetch);
    FIELD(moestream_params, cache_policy);
    FIELD(moestream_params, exact);
    FIELD(moestream_params, packed_path);
    FIELD(moestream_params, profile_path);
    FIELD(moestream_params, log_fn);
    FIELD(moestream_params, log_user_data);
    FIELD(moestream_params, log_level);
    FIELD(moestream_params, routing_trace_path);
    FIELD(moestream_params, lookahead_layers);
    FIELD(moestream_params, reserved0);
    FIELD(moestream_params, numa_placement);
    FIELD(moestream_params, reserved1);
    FIELD(moestream_params, max_batch);
    end();

    STRUCT(moestream_model_info, false);
    FIELD(moestream_model_info, struct_size);
    FIELD(moestream_model_info, architecture);
    FIELD(moestream_model_info, name);
    FIELD(moestream_model_info, n_vocab);
    FIELD(moestream_model_info, n_ctx_train);
    FIELD(moestream_model_info, n_embd);
    FIELD(moestream_model_info, n_layer);
    FIELD(moestream_model_info, n_head);
    FIELD(moestream_model_info, n_head_kv);
    FIELD(moestream_model_info, head_dim);
    FIELD(moestream_model_info, n_expert);
    FIELD(moestream_model_info, n_expert_used);
    FIELD(moestream_model_info, n_ff_expert);
    FIELD(moestream_model_info, n_ff_shared);
    FIELD(moestream_model_info, n_tensors);
    FIELD(moestream_model_info, file_bytes);
    FIELD(moestream_model_info, total_bytes);
    FIELD(moestream_model_info, dense_bytes);
    FIELD(moestream_model_info, expert_bytes);
    FIELD(moestream_model_info, expert_bytes_per_expert);
    FIELD(moestream_model_info, expert_bytes_per_layer);
    FIELD(moestream_model_info, tensor_count_by_type);
    FIELD(moestream_model_info, io_mode);
    FIELD(moestream_model_info, io_mode_reason);
    end();

    STRUCT(moestream_stats, false);
    FIELD(moestream_stats, struct_size);
    FIELD(moestream_stats, tokens);
    FIELD(moestream_stats, steps);
    FIELD(moestream_stats, compute_ns);
    FIELD(moestream_stats, io_wait_ns);
    FIELD(moestream_stats, step_ns);
    FIELD(moestream_stats, bytes_read_demand);
    FIELD(moestream_stats, bytes_read_prefetch);
    FIELD(moestream_stats, bytes_read_wasted);
    FIELD(moestream_stats, cache_hits);
    FIELD(moestream_stats, cache_misses);
    FIELD(moestream_stats, prefetch_issued);
    FIELD(moestream_stats, prefetch_useful);
    FIELD(moestream_stats, evictions);
    FIELD(moestream_stats, resident_bytes);
    FIELD(moestream_stats, expert_cache_bytes);
    FIELD(moestream_stats, dense_bytes);
    FIELD(moestream_stats, kv_bytes);
    FIELD(moestream_stats, io_mode);
    FIELD(moestream_stats, n_layer);
    FIELD(moestream_stats, io_mode_reason);
    FIELD(moestream_stats, layer_hits);
    FIELD(moestream_stats, layer_misses);
    FIELD(moestream_stats, io_busy_ns);
    FIELD(moestream_stats, io_bytes_completed);
    FIELD(moestream_stats, io_reads_completed);
    FIELD(moestream_stats, io_read_ns);
    FIELD(moestream_stats, io_queue_depth);
    FIELD(moestream_stats, attention_ns);
    FIELD(moestream_stats, moe_ns);
    end();

    STRUCT(moestream_read_replay, false);
    FIELD(moestream_read_replay, struct_size);
    FIELD(moestream_read_replay, queue_depth);
    FIELD(moestream_read_replay, engine_queue_depth);
    FIELD(moestream_read_replay, reads);
    FIELD(moestream_read_replay, dropped);
    FIELD(moestream_read_replay, bytes);
    FIELD(moestream_read_replay, elapsed_ns);
    FIELD(moestream_read_replay, buffered_reads);
    FIELD(moestream_read_replay, backend);
    end();

    STRUCT(moestream_sampler_params, false);
    FIELD(moestream_sampler_params, struct_size);
    FIELD(moestream_sampler_params, temperature);
    FIELD(moestream_sampler_params, top_k);
    FIELD(moestream_sampler_params, top_p);
    FIELD(moestream_sampler_params, min_p);
    FIELD(moestream_sampler_params, seed);
    FIELD(moestream_sampler_params, repeat_penalty);
    FIELD(moestream_sampler_params, presence_penalty);
    FIELD(moestream_sampler_params, frequency_penalty);
    FIELD(moestream_sampler_params, penalty_last_n);
    end();

    STRUCT(moestream_generate_params, false);
    FIELD(moestream_generate_params, struct_size);
    FIELD(moestream_generate_params, architecture);
    FIELD(moestream_generate_params, preset);
    FIELD(moestream_generate_params, quant);
    FIELD(moestream_generate_params, n_layer);
    FIELD(moestream_generate_params, n_embd);
    FIELD(moestream_generate_params, n_head);
    FIELD(moestream_generate_params, n_head_kv);
    FIELD(moestream_generate_params, head_dim);
    FIELD(moestream_generate_params, n_expert);
    FIELD(moestream_generate_params, n_expert_used);
    FIELD(moestream_generate_params, n_ff_expert);
    FIELD(moestream_generate_params, n_vocab);
    FIELD(moestream_generate_params, seed);
    FIELD(moestream_generate_params, progress);
    FIELD(moestream_generate_params, progress_user_data);
    FIELD(moestream_generate_params, deepseek2_attn_kv_b);
    end();
    STRUCT(moestream_trace_synth_params, false);
    FIELD(moestream_trace_synth_params, struct_size);
    FIELD(moestream_trace_synth_params, heat_path);
    FIELD(moestream_trace_synth_params, n_layer);
    FIELD(moestream_trace_synth_params, n_expert);
    FIELD(moestream_trace_synth_params, n_expert_used);
    FIELD(moestream_trace_synth_params, n_tokens);
    FIELD(moestream_trace_synth_params, reuse);
    FIELD(moestream_trace_synth_params, skew);
    FIELD(moestream_trace_synth_params, bytes_per_expert);
    FIELD(moestream_trace_synth_params, seed);
    FIELD(moestream_trace_synth_params, window);
    FIELD(moestream_trace_synth_params, recall);
    end();

    STRUCT(moestream_trace_info, false);
    FIELD(moestream_trace_info, struct_size);
    FIELD(moestream_trace_info, n_layer);
    FIELD(moestream_trace_info, n_expert);
    FIELD(moestream_trace_info, n_expert_used);
    FIELD(moestream_trace_info, n_tokens);
    FIELD(moestream_trace_info, bytes_per_expert);
    FIELD(moestream_trace_info, expert_bytes);
    FIELD(moestream_trace_info, reuse);
    FIELD(moestream_trace_info, top20_share_median);
    FIELD(moestream_trace_info, top20_share_min);
    FIELD(moestream_trace_info, top20_share_max);
    end();

    STRUCT(moestream_replay_params, false);
    FIELD(moestream_replay_params, struct_size);
    FIELD(moestream_replay_params, trace_path);
    FIELD(moestream_replay_params, cache_bytes);
    FIELD(moestream_replay_params, cache_policy);
    FIELD(moestream_replay_params, warmup_share);
    end();

    STRUCT(moestream_replay_result, false);
    FIELD(moestream_replay_result, struct_size);
    FIELD(moestream_replay_result, cache_policy);
    FIELD(moestream_replay_result, capacity_slots);
    FIELD(moestream_replay_result, accesses);
    FIELD(moestream_replay_result, hits);
    FIELD(moestream_replay_result, misses);
    FIELD(moestream_replay_result, bytes_read);
    FIELD(moestream_replay_result, hit_rate);
    end();
    std::printf("\n}\n");
    return 0;
}
