// Measurement runs shared by 'moestream bench' and 'moestream demo': each run
// opens the model in a child process (its own peak RSS, optionally inside a
// memory cgroup), processes a prompt, decodes greedily and reports what
// moestream_stats saw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "moestream.h"

namespace cli {

struct BenchConfig {
    std::string model;
    std::string packed_path;     // "" = the library's MODEL.moepack when it matches
    uint64_t budget = 0;         // bytes; 0 = automatic
    int32_t io_mode = MOESTREAM_IO_AUTO;
    int32_t prefetch = MOESTREAM_PREFETCH_AUTO;
    int32_t lookahead_layers = 0; // 0 = the library's default
    int32_t max_batch = 0;        // tokens per chunk of a step; 0 = the library's default
    int32_t numa_placement = MOESTREAM_NUMA_LOCAL;
    int32_t cache_policy = MOESTREAM_CACHE_AUTO;
    // Usage profile read at open and written at close; "" = none, so that no
    // measurement depends on an earlier run's profile.
    std::string profile_path;
    int32_t n_threads = 0;
    int32_t n_tokens = 64;       // decode steps
    int32_t prompt = 16;         // prompt tokens, processed in one step
    uint64_t seed = 1;
    double max_seconds = 0;      // stop decoding after this long (0 = no limit)
    bool cold = true;            // drop the model's pages from the page cache first
    bool cgroup = false;         // hold the child to `budget` with a memory cgroup
    bool live = false;           // print a progress line per decoded token (stderr)
    // Decode input: false = the greedy choice of the previous step; true = tokens
    // drawn at random, so routing varies token to token as in real text (a
    // random-weight model's greedy output tends to repeat one token, which routes
    // the same experts every step and flatters any cache).
    bool random_feed = true;
    // Resident run: the model file is read into the page cache first and the
    // prompt is run once untimed (mapping faulted in), so the measured run
    // sees every weight in memory: compute and memory bandwidth only.
    bool resident = false;
    // Weight bytes a token touches: dense part and one routed expert per layer
    // (from the GGUF tensor table; empty = not counted).
    uint64_t touched_dense = 0;
    std::vector<uint64_t> touched_expert_bytes;
    // > 0: log the expert reads of the timed decode, room for this many per
    // decode step, and replay them against the device afterwards (--disk).
    uint64_t read_log_per_step = 0;
};

struct BenchResult {
    bool ok = false;
    char error[512] = {};
    int32_t io_mode = 0;
    char io_mode_reason[1024] = {};
    int32_t prompt_tokens = 0;
    int32_t decode_tokens = 0;
    double open_s = 0, prefill_s = 0, ttft_s = 0, decode_s = 0;
    uint64_t decode_bytes_read = 0;   // max of the two below, during decode
    uint64_t engine_bytes_read = 0;   // expert bytes the engine read (demand + prefetch)
    uint64_t device_bytes_read = 0;   // /proc/self/io read_bytes: includes mmap page faults
    uint64_t decode_hits = 0, decode_misses = 0;
    uint64_t decode_touched_bytes = 0;  // weight bytes the decode steps touched (0 = not counted)
    double warmup_s = 0;                // untimed resident warm-up
    uint64_t decode_io_wait_ns = 0, decode_step_ns = 0;
    // Expert reads during decode, split by why they were made.
    uint64_t decode_bytes_demand = 0, decode_bytes_prefetch = 0, decode_bytes_wasted = 0;
    uint64_t decode_prefetch_issued = 0, decode_prefetch_useful = 0;
    uint64_t decode_compute_ns = 0, decode_evictions = 0;
    uint64_t decode_attention_ns = 0, decode_moe_ns = 0;  // parts of decode_compute_ns
    uint64_t resident_bytes = 0;      // dense + KV + cache + scratch held at the end
    // Per layer, during decode (n_layer entries valid).
    int32_t n_layer = 0;
    uint64_t layer_hits[MOESTREAM_MAX_LAYERS] = {}, layer_misses[MOESTREAM_MAX_LAYERS] = {};
    double decode_cpu_s = 0;          // user + system CPU time of the process during decode
    uint64_t total_bytes_read = 0;
    uint64_t expert_cache_bytes = 0;
    uint64_t peak_rss = 0;            // VmHWM of the child
    bool cgroup_used = false;
    char cgroup_note[200] = {};
    uint64_t cgroup_peak = 0;
    // Expert reads during decode as the device saw them (0 in mmap mode).
    uint64_t decode_io_busy_ns = 0, decode_io_bytes = 0, decode_io_read_ns = 0;
    int32_t io_queue_depth = 0;
    // The kernel's counters for the model's block device over the decode
    // (every process's requests on that device; 0 when not available).
    bool device_counted = false;
    uint64_t kernel_busy_ms = 0, kernel_bytes_read = 0;
    // The decode's own reads replayed with O_DIRECT after the run, at the
    // engine's queue depth and at a deep queue (read_log_per_step > 0).
    bool replay_ok = false;
    char replay_note[256] = {};      // why there is no replay, or what to know about it
    char replay_backend[16] = {};
    uint64_t replay_reads = 0, replay_dropped = 0, replay_bytes = 0, replay_buffered = 0;
    int32_t replay_depth = 0, replay_deep_depth = 0, replay_mean_depth = 0;
    uint64_t replay_ns = 0, replay_deep_ns = 0, replay_mean_ns = 0;

    double decode_tok_s() const { return decode_s > 0 ? decode_tokens / decode_s : 0; }
    double prefill_tok_s() const { return prefill_s > 0 ? prompt_tokens / prefill_s : 0; }
    double bytes_per_token() const { return decode_tokens ? double(decode_bytes_read) / decode_tokens : 0; }
    double touched_per_token() const { return decode_tokens ? double(decode_touched_bytes) / decode_tokens : 0; }
    // Weight bytes per second the decode achieved.
    double touched_bw() const { return decode_s > 0 ? double(decode_touched_bytes) / decode_s : 0; }
    double read_bw() const { return decode_s > 0 ? double(decode_bytes_read) / decode_s : 0; }
    double hit_rate() const {
        const uint64_t n = decode_hits + decode_misses;
        return n ? double(decode_hits) / double(n) : 0;
    }
    double io_wait_share() const { return decode_step_ns ? double(decode_io_wait_ns) / double(decode_step_ns) : 0; }
    double per_token(uint64_t bytes) const { return decode_tokens ? double(bytes) / decode_tokens : 0; }
    double io_busy_share() const { return decode_s > 0 ? double(decode_io_busy_ns) * 1e-9 / decode_s : 0; }
    // Mean expert reads in flight while the device was busy.
    double mean_in_flight() const { return decode_io_busy_ns ? double(decode_io_read_ns) / double(decode_io_busy_ns) : 0; }
    double busy_bw() const { return decode_io_busy_ns ? double(decode_io_bytes) * 1e9 / double(decode_io_busy_ns) : 0; }
    double replay_bw() const { return replay_ns ? double(replay_bytes) * 1e9 / double(replay_ns) : 0; }
    double replay_mean_bw() const { return replay_mean_ns ? double(replay_bytes) * 1e9 / double(replay_mean_ns) : 0; }
    double device_busy_share() const { return decode_s > 0 ? double(kernel_busy_ms) * 1e-3 / decode_s : 0; }
    double device_busy_bw() const { return kernel_busy_ms ? double(kernel_bytes_read) * 1e3 / double(kernel_busy_ms) : 0; }
    double replay_deep_bw() const { return replay_deep_ns ? double(replay_bytes) * 1e9 / double(replay_deep_ns) : 0; }
    // What the device delivers for the engine's own reads: the better of the two depths.
    double replay_best_bw() const { return replay_ok ? std::max(replay_bw(), replay_deep_bw()) : 0; }
    // I/O-bound ceiling in tok/s for a device bandwidth (0 when unknown).
    double ceiling_for(double device_bw) const {
        return device_bw > 0 && bytes_per_token() > 0 ? device_bw / bytes_per_token() : 0;
    }
};

// The memory a cgroup allows a run with this budget: the budget plus the
// overhead the engine's promise allows (5% or 64 MiB, whichever is larger),
// so both I/O modes get the same memory.
uint64_t cgroup_limit_for(uint64_t budget);

// Runs one measurement in a child process and waits for it.
BenchResult run_bench(const BenchConfig &config);

// Reads of `request_bytes` at random aligned offsets of the file with
// O_DIRECT, `depth` at a time, for about `seconds`: the device bandwidth the
// engine's expert reads can get. Returns bytes/s (0 with `why` on failure).
// Reader threads the system refuses to start are left out: `depth` becomes
// the number that read, and `why` says why.
double measure_disk_bandwidth(const std::string &path, uint64_t request_bytes, int &depth, double seconds,
                              std::string &why);

// Writes back and drops the file's pages from the page cache (cold start).
bool drop_page_cache(const std::string &path);

// Reads the whole file into the page cache (a resident run's setup), in huge
// pages where the kernel allows (the file's cached pages are dropped first).
// Returns false if the file cannot be read.
bool load_into_page_cache(const std::string &path);

// One JSON object for a run (no trailing newline). membw > 0 adds the
// roofline fields (decode tok/s the bandwidth allows for the bytes touched
// per token, and the achieved share of it).
std::string bench_result_json(const BenchConfig &config, const BenchResult &r, double membw = 0);

}  // namespace cli
