// moestream bench: decode/prefill speed, bytes read, hit rate, I/O wait and
// peak RSS from moestream_stats; --disk replays the decode's own expert reads
// against the device (and keeps a random-offset probe for comparison); --sweep repeats across budgets and I/O modes; --io-mode
// resident measures compute with every weight in memory against the
// memory-bandwidth roofline (--membw probes the bandwidth in the same run).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "bench_core.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "gguf_tensor_sizes.hpp"
#include "membw_probe.hpp"
#include "model_options.hpp"
#include "moestream.h"

namespace cli {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

const char *kUsage =
    "usage: moestream bench -m MODEL [--packed PATH] [--memory-budget SIZE|N%] [-n 64] [--prompt 16]\n"
    "                       [--io-mode auto|mmap|direct|pread|resident[,...]] [--lookahead N] [--numa local|interleave]\n"
    "                       [--prefetch off|previous[-token]|lookahead|both|auto] [--max-batch N] [--threads N]\n"
    "                       [--policy auto|lru|lfu[-decay]|pinned[-hot]|reuse[-aware]] [--profile FILE]\n"
    "                       [--sweep 25%,50%,75%,100%] [--disk] [--membw] [--membw-size 4GiB] [--warm] [--no-cgroup]\n"
    "                       [--max-seconds S] [--feed random|greedy] [--seed N] [--json]\n"
    "       moestream bench --membw [--threads N] [--json]\n"
    "Spellings of one option: -m and --model, --memory-budget and --budget, -n and --tokens, -t and --threads,\n"
    "--policy and --cache-policy.\n"
    "Budgets in % are shares of the model file. The page cache is dropped for the model before each\n"
    "run (cold start) unless --warm. mmap runs are held to the budget with a memory cgroup when permitted.\n"
    "Decode steps are fed random tokens (--feed random, the default: routing varies as with real text) or the\n"
    "greedy choice (a random-weight model's greedy output repeats a few tokens and routes the same experts);\n"
    "--seed N (default 1) seeds the random prompt and the random tokens fed.\n"
    "predicted read/token = n_layer x top-k x expert bytes x (1 - cache bytes / expert bytes): what an expert\n"
    "cache of that size reads per token under uniform routing.\n"
    "--disk: the decode's expert reads are logged and replayed afterwards with O_DIRECT through the engine's read\n"
    "backend, at its queue depth and 4x deeper; ceil% = decode tok/s / (replay bandwidth / bytes read per token).\n"
    "A probe of random-offset reads is reported beside it, and used where the engine issues no reads (mmap).\n"
    "resident: the model file is read into the page cache and mapped, the prompt is run once untimed,\n"
    "then prompt and decode are timed; reports the weight bytes a decode token touches (dense + routed\n"
    "experts used) and, with the memory bandwidth probed in the same run (--membw, implied), the\n"
    "roofline ratio = achieved bytes/s / probed bytes/s. Without --memory-budget a resident run's budget\n"
    "holds the whole file (+1/8, at least 1 GiB, for KV cache and scratch): no expert is ever released.\n"
    "--packed PATH: the packed expert file (moestream pack) to stream experts from (default: MODEL.moepack\n"
    "when it is there and matches the model).\n"
    "--profile FILE: the expert usage profile read at open and written at close (what pinned-hot learns\n"
    "from); without it runs use none, so no measurement depends on an earlier run.\n";

// A resident run measures compute with every weight in memory, so without a
// budget it gets one that holds the whole file plus KV cache and scratch: the
// automatic budget (a share of MemAvailable) could be a little smaller than
// the model and let the engine release experts and fault them back in.
uint64_t resident_budget(uint64_t file_bytes) { return file_bytes + std::max(file_bytes / 8, uint64_t{1} << 30); }

// bench's --io-mode: every command's names (parse_io_mode) and "resident",
// which is mmap with the file loaded into the page cache first.
bool parse_bench_io_mode(const std::string &s, int32_t &out, bool &resident) {
    resident = s == "resident";
    if (!resident) return parse_io_mode(s, out);
    out = MOESTREAM_IO_MMAP;
    return true;
}

// What an expert cache holding `cache_bytes` of the experts reads per decoded
// token when every expert is equally likely: the missing share of the active
// experts' bytes. 0 when it does not apply (mmap: no cache of its own).
double predicted_bytes_per_token(const moestream_model_info &info, const BenchResult &r) {
    if (r.io_mode == MOESTREAM_IO_MMAP || info.expert_bytes == 0) return 0;
    const double share = std::min(1.0, double(r.expert_cache_bytes) / double(info.expert_bytes));
    return double(info.n_layer) * info.n_expert_used * double(info.expert_bytes_per_expert) * (1.0 - share);
}

void print_details(const moestream_model_info &info, const BenchResult &r) {
    if (!r.ok || r.io_mode == MOESTREAM_IO_MMAP) return;
    const double predicted = predicted_bytes_per_token(info, r);
    std::printf("        read/token: demand %s + prefetch %s (wasted %s); predicted %s (x%.2f); prefetch useful "
                "%llu of %llu; compute %.1f%%; CPU %.2f s/token\n",
                format_bytes(uint64_t(r.per_token(r.decode_bytes_demand))).c_str(),
                format_bytes(uint64_t(r.per_token(r.decode_bytes_prefetch))).c_str(),
                format_bytes(uint64_t(r.per_token(r.decode_bytes_wasted))).c_str(),
                format_bytes(uint64_t(predicted)).c_str(), predicted > 0 ? r.bytes_per_token() / predicted : 0.0,
                static_cast<unsigned long long>(r.decode_prefetch_useful),
                static_cast<unsigned long long>(r.decode_prefetch_issued), 100.0 * (1.0 - r.io_wait_share()),
                r.decode_tokens ? r.decode_cpu_s / r.decode_tokens : 0.0);
}

// Where a decoded token's time went, in milliseconds.
void print_compute(const BenchResult &r) {
    if (!r.ok || r.decode_tokens <= 0) return;
    const double ms = 1e-6 / double(r.decode_tokens);
    const uint64_t other = r.decode_compute_ns - std::min(r.decode_compute_ns, r.decode_attention_ns + r.decode_moe_ns);
    std::printf("  time/token: attention %.2f ms, MoE %.2f ms, embedding, output head and the rest %.2f ms, waiting for "
                "expert bytes %.2f ms\n",
                double(r.decode_attention_ns) * ms, double(r.decode_moe_ns) * ms, double(other) * ms,
                double(r.decode_io_wait_ns) * ms);
}

// How the run was set up: open time and the library's full reason (I/O
// mode, cache slots, reads, memory placement, dense weights).
void print_setup(const BenchResult &r) {
    if (!r.ok) return;
    std::printf("  open %.2f s: %s\n", r.open_s, r.io_mode_reason);
}

// The spread of the decode's hit rate over layers: lowest and highest layer.
void print_layer_hits(const BenchResult &r) {
    if (!r.ok || r.io_mode == MOESTREAM_IO_MMAP) return;
    int32_t lo = -1, hi = -1;
    double lo_rate = 2, hi_rate = -1;
    for (int32_t l = 0; l < r.n_layer; ++l) {
        const uint64_t n = r.layer_hits[l] + r.layer_misses[l];
        if (n == 0) continue;
        const double rate = double(r.layer_hits[l]) / double(n);
        if (rate < lo_rate) lo_rate = rate, lo = l;
        if (rate > hi_rate) hi_rate = rate, hi = l;
    }
    if (lo < 0) return;
    std::printf("  hit rate by layer: lowest %.1f%% (layer %d), highest %.1f%% (layer %d)\n", 100.0 * lo_rate, lo,
                100.0 * hi_rate, hi);
}

void print_header() {
    std::printf("%-7s %-10s %9s %9s %9s %8s %11s %10s %7s %7s %10s  %s\n", "mode", "budget", "decode", "prefill",
                "ttft", "hit", "read/token", "read bw", "io wait", "ceil%", "peak RSS", "memory");
}

void print_resident(const BenchResult &r, const MembwResult &bw) {
    if (!r.ok || r.touched_per_token() <= 0) return;
    std::printf("  resident: %s touched/token, %.2f GB/s achieved", format_bytes(uint64_t(r.touched_per_token())).c_str(),
                r.touched_bw() / 1e9);
    if (bw.bytes_per_s > 0) {
        const double roofline = bw.bytes_per_s / r.touched_per_token();
        std::printf(", probe %.2f GB/s -> roofline %.2f tok/s, decode at %.1f%% of it", bw.bytes_per_s / 1e9, roofline,
                    100.0 * r.decode_tok_s() / roofline);
    }
    std::printf(" (warm-up %.2fs)\n", r.warmup_s);
}

// The device bandwidth a run's ceiling uses: the replay of its own reads
// when there is one, else the random probe (0 = none).
double ceiling_bw(const BenchResult &r, double probe_bw) { return r.replay_ok ? r.replay_best_bw() : probe_bw; }

void print_row(const BenchConfig &c, const BenchResult &r, double disk_bw) {
    const std::string budget = format_budget(c.budget);
    if (!r.ok) {
        std::printf("%-7s %-10s  failed: %s\n", moestream_io_mode_name(c.io_mode), budget.c_str(), r.error);
        return;
    }
    const double ceiling = r.ceiling_for(ceiling_bw(r, disk_bw));
    char ceil_text[16] = "-";
    if (ceiling > 0) std::snprintf(ceil_text, sizeof ceil_text, "%.0f%%", 100.0 * r.decode_tok_s() / ceiling);
    std::printf("%-7s %-10s %6.2f t/s %6.1f t/s %8.2fs %7.1f%% %11s %8.0f MB/s %6.1f%% %7s %10s  %s\n",
                moestream_io_mode_name(r.io_mode), budget.c_str(), r.decode_tok_s(), r.prefill_tok_s(),
                r.ttft_s, 100.0 * r.hit_rate(), format_bytes(uint64_t(r.bytes_per_token())).c_str(), r.read_bw() / 1e6,
                100.0 * r.io_wait_share(), ceil_text, format_bytes(r.peak_rss).c_str(),
                r.io_mode == MOESTREAM_IO_MMAP ? r.cgroup_note : "engine budget");
}

// Device busy time and the replay of the decode's own reads (--disk).
void print_device(const BenchResult &r, double probe_bw, bool disk) {
    if (!r.ok || (!disk && r.decode_io_busy_ns == 0)) return;
    if (r.decode_io_busy_ns > 0)
        std::printf("  device: busy %.1f%% of decode (%.2fs), %.0f MB/s while busy, %.1f reads in flight on average"
                    " (queue depth %d)\n",
                    100.0 * r.io_busy_share(), double(r.decode_io_busy_ns) * 1e-9, r.busy_bw() / 1e6,
                    r.mean_in_flight(), r.io_queue_depth);
    if (r.device_counted && r.decode_io_busy_ns > 0)
        std::printf("  kernel counters of the device (all its users): busy %.1f%% of decode, %s read, %.0f MB/s while busy\n",
                    100.0 * r.device_busy_share(), format_bytes(r.kernel_bytes_read).c_str(), r.device_busy_bw() / 1e6);
    if (!disk) return;
    if (r.replay_ok) {
        const double ceiling = r.ceiling_for(r.replay_best_bw());
        std::printf("  replay of the decode's %llu reads (%s, O_DIRECT, %s): %.0f MB/s at depth %d, %.0f MB/s at depth %d"
                    ", %.0f MB/s at the engine's mean depth %d -> ceiling %.2f tok/s, decode at %.1f%% of it%s%s\n",
                    static_cast<unsigned long long>(r.replay_reads), format_bytes(r.replay_bytes).c_str(),
                    r.replay_backend, r.replay_bw() / 1e6, r.replay_depth, r.replay_deep_bw() / 1e6, r.replay_deep_depth,
                    r.replay_mean_bw() / 1e6, r.replay_mean_depth, ceiling, ceiling > 0 ? 100.0 * r.decode_tok_s() / ceiling : 0.0, r.replay_note[0] ? "; " : "",
                    r.replay_note);
    } else {
        std::printf("  replay: none (%s); ceil%% uses the random probe\n", r.replay_note[0] ? r.replay_note : "not run");
    }
    if (probe_bw > 0) {
        const double probe_ceiling = r.ceiling_for(probe_bw);
        std::printf("  random probe: %.0f MB/s -> ceiling %.2f tok/s, decode at %.1f%% of it\n", probe_bw / 1e6,
                    probe_ceiling, probe_ceiling > 0 ? 100.0 * r.decode_tok_s() / probe_ceiling : 0.0);
    }
}

}  // namespace

int cmd_bench(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args,
                    {"-m", "--packed", "--memory-budget", "-n", "--prompt", "--io-mode", "--prefetch", "--lookahead", "--numa", "--policy", "--threads", "--max-batch",
                     "--sweep", "--max-seconds", "--seed", "--feed", "--membw-size", "--profile"},
                    {"--disk", "--json", "--warm", "--no-cgroup", "--membw", "--help"}, a, error,
                    {{"--model", "-m"}, {"--budget", "--memory-budget"}, {"--tokens", "-n"}, {"-t", "--threads"},
                     {"--cache-policy", "--policy"}, {"-h", "--help"}}))
        return usage_error("bench", error);
    if (a.flags.count("--help")) {
        std::printf("%s", kUsage);
        return 0;
    }
    if (const std::string extra = unexpected_argument(a); !extra.empty()) return usage_error("bench", extra);
    if (const std::string empty = empty_file_name(a, {"-m", "--packed", "--profile"}); !empty.empty())
        return usage_error("bench", empty);
    const bool json = a.flags.count("--json");
    int32_t probe_threads = 0;
    if (auto s = a.get("--threads")) {
        int64_t t = 0;
        if (!parse_int_in(*s, 0, kInt32Max, t))
            return usage_error("bench", int_range_error("--threads", *s, 0, kInt32Max));
        probe_threads = int32_t(t);
    }
    if (probe_threads == 0) probe_threads = int32_t(std::max(1u, std::thread::hardware_concurrency()));
    // 4 GiB: a 1 GiB buffer partly stays in the last-level cache of some hosts
    // (measured 69 GB/s with 1 GiB against 32 GB/s with 2-8 GiB on one).
    uint64_t probe_bytes = 4ull << 30;
    if (auto s = a.get("--membw-size"); s && (!parse_size(*s, probe_bytes) || probe_bytes < (1u << 20)))
        return usage_error("bench", size_error("--membw-size", *s, SizeKind{.at_least = "1MiB"}));
    MembwResult membw;
    auto probe = [&]() -> bool {
        std::string why;
        if (!measure_memory_bandwidth(probe_bytes, probe_threads, 2.0, membw, why)) {
            std::fprintf(stderr, "moestream bench: memory bandwidth probe failed: %s\n", why.c_str());
            return false;
        }
        if (membw.threads < probe_threads)
            std::fprintf(stderr, "moestream bench: warning: the memory bandwidth probe ran %d of %d threads (%s)\n",
                         membw.threads, probe_threads, why.c_str());
        if (!json)
            std::printf("memory bandwidth: %.2f GB/s best, %.2f GB/s median (%d threads summing %s, %d passes)\n",
                        membw.bytes_per_s / 1e9, membw.median_bytes_per_s / 1e9, membw.threads,
                        format_bytes(membw.buffer_bytes).c_str(), membw.passes);
        return true;
    };
    auto model = a.get("-m");
    if (!model && a.flags.count("--membw")) {
        if (!probe()) return 1;
        if (json)
            std::printf("{\"membw_bytes_s\": %.1f, \"membw_median_bytes_s\": %.1f, \"threads\": %d, "
                        "\"buffer_bytes\": %llu, \"passes\": %d}\n",
                        membw.bytes_per_s, membw.median_bytes_per_s, membw.threads,
                        static_cast<unsigned long long>(membw.buffer_bytes), membw.passes);
        return 0;
    }
    if (!model) return usage_error("bench", "-m MODEL is required");
    BenchConfig base;
    base.model = *model;
    base.cold = !a.flags.count("--warm");
    int64_t v = 0;
    const struct {
        const char *name;
        int32_t *field;
        int64_t lo, hi;
    } counts[] = {{"-n", &base.n_tokens, 1, kInt32Max},
                  {"--prompt", &base.prompt, 1, kInt32Max},
                  {"--threads", &base.n_threads, 0, kInt32Max},
                  {"--lookahead", &base.lookahead_layers, 1, 4},
                  {"--max-batch", &base.max_batch, 1, kInt32Max}};
    for (const auto &c : counts)
        if (auto s = a.get(c.name)) {
            if (!parse_int_in(*s, c.lo, c.hi, v)) return usage_error("bench", int_range_error(c.name, *s, c.lo, c.hi));
            *c.field = int32_t(v);
        }
    if (auto s = a.get("--seed"); s && !parse_seed(*s, base.seed)) return usage_error("bench", seed_error("--seed", *s));
    if (auto s = a.get("--max-seconds"); s && !parse_double_in(*s, RealRange::positive(), base.max_seconds))
        return usage_error("bench", real_range_error("--max-seconds", *s, RealRange::positive()));
    if (auto s = a.get("--packed")) base.packed_path = *s;  // "" refused with the other file names above
    if (auto s = a.get("--profile")) base.profile_path = *s;
    try {
        if (auto s = a.get("--prefetch")) base.prefetch = parse_prefetch(*s);
        if (auto s = a.get("--policy")) base.cache_policy = parse_cache_policy(*s);
        if (auto s = a.get("--numa")) base.numa_placement = parse_numa_placement(*s);
        if (auto s = a.get("--feed")) base.random_feed = parse_feed_random(*s);
    } catch (const std::exception &e) {
        return usage_error("bench", e.what());
    }

    if (a.get("--sweep") && a.get("--memory-budget"))
        return usage_error("bench", "--sweep and --memory-budget both set the budget: give one");
    std::vector<std::pair<int32_t, bool>> modes;  // (io mode, resident)
    const std::string default_modes = a.get("--sweep") ? "direct,mmap" : "auto";
    bool any_resident = false;
    for (const std::string &m : split_list(a.get_or("--io-mode", default_modes))) {
        int32_t mode = 0;
        bool resident = false;
        if (!parse_bench_io_mode(m, mode, resident)) return usage_error("bench", io_mode_error(m, "resident"));
        modes.emplace_back(mode, resident);
        any_resident = any_resident || resident;
    }
    if (modes.empty()) return usage_error("bench", "--io-mode lists no mode");
    // Budgets given as shares need the model's size: the options above are checked first,
    // so a usage error is reported as one whatever the model.
    moestream_model_info info;
    moestream_model_info_init(&info);
    if (int st = moestream_inspect(model->c_str(), 0, &info); st != MOESTREAM_OK) {
        report_error("bench", "moestream_inspect", st);
        return 1;
    }
    // A budget given is positive: 0 would mean the automatic budget, which is
    // what leaving the option out asks for (a share that rounds to 0 bytes too).
    std::vector<uint64_t> budgets;
    if (auto s = a.get("--sweep")) {
        for (const std::string &b : split_list(*s)) {
            uint64_t bytes = 0;
            if (!parse_share_or_size(b, info.file_bytes, bytes) || bytes == 0)
                return usage_error("bench", size_error("--sweep", b, SizeKind{.positive = true, .share = true}));
            budgets.push_back(bytes);
        }
        if (budgets.empty()) return usage_error("bench", "--sweep lists no budget");
    } else {
        uint64_t bytes = 0;
        if (auto mb = a.get("--memory-budget"); mb && (!parse_share_or_size(*mb, info.file_bytes, bytes) || bytes == 0))
            return usage_error("bench", size_error("--memory-budget", *mb, SizeKind{.positive = true, .share = true}));
        budgets.push_back(bytes);
    }
    // Weight bytes a decode token touches, from the tensor table and the model's facts.
    std::vector<GgufTensorSize> tensor_sizes;
    std::string gguf_why;
    if (read_gguf_tensor_sizes(*model, tensor_sizes, gguf_why)) {
        const TouchedBytes touched = touched_bytes_model(tensor_sizes, info);
        base.touched_dense = touched.dense;
        base.touched_expert_bytes = touched.bytes_per_expert;
    } else if (any_resident) {
        std::fprintf(stderr, "moestream bench: bytes touched per token not counted: %s\n", gguf_why.c_str());
    }
    // The probe runs before the model is loaded, so its buffer never evicts the model's pages.
    if ((a.flags.count("--membw") || any_resident) && !probe()) return 1;
    if (any_resident) {
        if (!json) std::printf("loading %s into the page cache\n", model->c_str());
        if (!load_into_page_cache(*model)) {
            std::fprintf(stderr, "moestream bench: cannot read %s\n", model->c_str());
            return 1;
        }
    }

    double disk_bw = 0;
    std::string disk_note;
    const bool disk = a.flags.count("--disk");
    if (disk) {
        drop_page_cache(*model);
        int disk_depth = 16;
        disk_bw = measure_disk_bandwidth(*model, info.expert_bytes_per_expert, disk_depth, 4.0, disk_note);
        if (disk_bw > 0 && !disk_note.empty())
            std::fprintf(stderr, "moestream bench: warning: the disk probe ran %d of 16 readers (%s)\n", disk_depth,
                         disk_note.c_str());
        if (!json) {
            if (disk_bw > 0)
                std::printf("disk, random probe: %.0f MB/s (O_DIRECT reads of %s at random offsets, depth %d)\n",
                            disk_bw / 1e6, format_bytes(info.expert_bytes_per_expert).c_str(), disk_depth);
            else
                std::printf("disk, random probe: not measured: %s\n", disk_note.c_str());
        }
        // Every part (gate, up, down) of every routed expert of a decode step
        // read twice over (demand and prefetch).
        base.read_log_per_step = uint64_t(std::max(info.n_layer, 1)) * uint64_t(std::max(info.n_expert_used, 1)) * 3 * 2;
    }
    if (!json) {
        std::printf("model: %s (%s, %s, %d layers, %d experts, top-%d; experts %s)\n", model->c_str(), info.architecture,
                    format_bytes(info.file_bytes).c_str(), info.n_layer, info.n_expert, info.n_expert_used,
                    format_bytes(info.expert_bytes).c_str());
        std::printf("kernels: %s\n", moestream_kernel_isa());
        std::printf("run: prompt %d tokens, decode %d tokens, %s\n", base.prompt, base.n_tokens,
                    any_resident && modes.size() == 1 ? "resident (file loaded into the page cache, untimed warm-up)"
                    : base.cold                       ? "cold page cache"
                                                      : "warm page cache");
        print_header();
    }
    std::vector<std::string> runs_json;
    // Streaming / mmap decode speed per budget, when both ran.
    struct Pair {
        double streaming = 0, mmap = 0;
    };
    std::vector<Pair> pairs(budgets.size());
    int failures = 0;
    for (const auto &[mode, resident] : modes)
        for (const uint64_t &budget : budgets) {
            BenchConfig c = base;
            c.io_mode = mode;
            c.budget = budget == 0 && resident ? resident_budget(info.file_bytes) : budget;
            c.resident = resident;
            c.cold = base.cold && !resident;
            c.cgroup = mode == MOESTREAM_IO_MMAP && !resident && budget > 0 && !a.flags.count("--no-cgroup");
            const BenchResult r = run_bench(c);
            failures += !r.ok;
            if (r.ok) {
                Pair &p = pairs[size_t(&budget - budgets.data())];
                (r.io_mode == MOESTREAM_IO_MMAP ? p.mmap : p.streaming) = r.decode_tok_s();
            }
            if (json) {
                std::string j = bench_result_json(c, r, membw.bytes_per_s);
                char extra[512];
                const double predicted = r.ok ? predicted_bytes_per_token(info, r) : 0;
                std::snprintf(extra, sizeof extra, ", \"predicted_bytes_per_token\": %.1f, \"read_vs_predicted\": %.4f",
                              predicted, predicted > 0 ? r.bytes_per_token() / predicted : 0.0);
                j.pop_back();
                j += extra;
                if (const double ceiling = r.ceiling_for(ceiling_bw(r, disk_bw)); ceiling > 0) {
                    const double probe_ceiling = r.ceiling_for(disk_bw);
                    std::snprintf(extra, sizeof extra,
                                  ", \"io_ceiling_tok_s\": %.4f, \"ceiling_share\": %.4f, \"ceiling_source\": \"%s\", "
                                  "\"ceiling_device_bw_bytes_s\": %.1f, \"random_probe_ceiling_tok_s\": %.4f, "
                                  "\"random_probe_ceiling_share\": %.4f",
                                  ceiling, r.decode_tok_s() / ceiling, r.replay_ok ? "replay" : "random probe",
                                  ceiling_bw(r, disk_bw), probe_ceiling,
                                  probe_ceiling > 0 ? r.decode_tok_s() / probe_ceiling : 0.0);
                    j += extra;
                }
                j += "}";
                runs_json.push_back(j);
            } else {
                print_row(c, r, disk_bw);
                print_details(info, r);
                print_compute(r);
                print_layer_hits(r);
                print_setup(r);
                print_device(r, disk_bw, disk);
                if (resident) print_resident(r, membw);
                flush_stdout();
            }
        }
    if (json) {
        std::printf("{\"model\": %s, \"kernel_isa\": \"%s\", \"file_bytes\": %llu, \"expert_bytes\": %llu, \"n_layer\": %d, \"n_expert\": %d, "
                    "\"n_expert_used\": %d, \"prompt\": %d, \"n_tokens\": %d, \"cold\": %s, \"disk_bw_bytes_s\": %.1f, "
                    "\"disk_bw_source\": \"random probe\", "
                    "\"membw_bytes_s\": %.1f, \"membw_median_bytes_s\": %.1f, \"membw_threads\": %d, "
                    "\"touched_dense_bytes_per_token\": %llu, \"runs\": [",
                    json_string(*model).c_str(), moestream_kernel_isa(), static_cast<unsigned long long>(info.file_bytes),
                    static_cast<unsigned long long>(info.expert_bytes), info.n_layer, info.n_expert, info.n_expert_used,
                    base.prompt, base.n_tokens, base.cold ? "true" : "false", disk_bw, membw.bytes_per_s,
                    membw.median_bytes_per_s, membw.threads, static_cast<unsigned long long>(base.touched_dense));
        for (size_t i = 0; i < runs_json.size(); ++i) std::printf("%s%s", i ? ", " : "", runs_json[i].c_str());
        std::printf("], \"streaming_over_mmap\": [");
        for (size_t i = 0; i < pairs.size(); ++i)
            std::printf("%s{\"budget_bytes\": %llu, \"ratio\": %.4f}", i ? ", " : "",
                        static_cast<unsigned long long>(budgets[i]),
                        pairs[i].mmap > 0 ? pairs[i].streaming / pairs[i].mmap : 0.0);
        std::printf("]}\n");
    } else {
        for (size_t i = 0; i < pairs.size(); ++i)
            if (pairs[i].mmap > 0 && pairs[i].streaming > 0)
                std::printf("streaming / mmap at %s: %.2fx\n", format_bytes(budgets[i]).c_str(),
                            pairs[i].streaming / pairs[i].mmap);
    }
    if (!json && disk_bw > 0) {
        std::printf("ceil%% = decode tok/s as a share of the I/O-bound ceiling: device bandwidth / bytes read per token,\n"
                    "the bandwidth from replaying the run's own reads (the better depth) where there is a replay,\n"
                    "else from the random probe\n");
    }
    return failures ? 1 : 0;
}

}  // namespace cli
