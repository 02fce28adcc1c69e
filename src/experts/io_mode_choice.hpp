// How expert bytes reach the engine: map the whole file (the page cache holds
// experts) when the model fits the memory budget, otherwise read experts with
// direct I/O into the engine's own budgeted cache (buffered pread when the file
// system refuses O_DIRECT). `inspect` reports the choice; `open` applies it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "moestream.h"

namespace moe {

struct HParams;

// Memory the engine needs beyond the weights (KV cache, scratch, bookkeeping)
// unless the caller knows better.
constexpr uint64_t kDefaultRuntimeOverheadBytes = 256ull << 20;
// Estimate for a model at context length n_ctx (0 = what a context opened
// with it has: min(trained, 4096), or 4096 when the file does not say;
// context_length in model/hparams.hpp) run in steps of max_batch tokens: KV cache, F16 or with f32_kv F32 as
// exact contexts keep it (rings for the sliding-window layers,
// model/kv_cache.hpp) + logits/activation scratch + a fixed allowance.
uint64_t estimate_runtime_overhead(const HParams &hp, int32_t n_ctx, int32_t max_batch, bool f32_kv = false);

struct IoModeRequest {
    int32_t requested = MOESTREAM_IO_AUTO;  // moestream_io_mode from the params
    std::string_view env_mode;              // MOESTREAM_IO_MODE ("" = unset); overrides `requested`
    uint64_t memory_budget = 0;             // bytes; 0 = automatic_memory_budget()
    uint64_t model_bytes = 0;               // file bytes of all shards
    uint64_t dense_bytes = 0;
    uint64_t expert_bytes = 0;
    uint64_t overhead_bytes = kDefaultRuntimeOverheadBytes;
    bool direct_io_available = true;        // O_DIRECT accepted for the model file
};

struct IoModeChoice {
    moestream_io_mode mode = MOESTREAM_IO_MMAP;
    uint64_t budget = 0;              // the budget the choice was made against
    uint64_t expert_cache_bytes = 0;  // room left for experts (direct/pread)
    bool budget_too_small = false;    // dense weights + overhead alone exceed the budget
    std::string reason;               // one line, fits moestream_model_info.io_mode_reason
};

// Throws moe::Error(invalid_argument) for an unknown requested mode or env value.
IoModeChoice choose_io_mode(const IoModeRequest &request);
// Same, with env_mode taken from the MOESTREAM_IO_MODE environment variable.
IoModeChoice choose_io_mode_from_env(IoModeRequest request);

// 80% of process_available_memory() (common/cgroup_memory.hpp): MemAvailable
// or what the process's memory cgroup still allows, if less.
uint64_t automatic_memory_budget();

// Mode name as in the public API ("auto", "mmap", "direct", "pread"); nullptr if unknown.
const char *io_mode_name(int32_t mode);
// Inverse of io_mode_name; nullopt for anything else.
std::optional<moestream_io_mode> parse_io_mode(std::string_view name);

// "18.2 GiB", "512.0 MiB", "3.0 KiB", "17 B".
std::string human_bytes(uint64_t bytes);

}  // namespace moe
