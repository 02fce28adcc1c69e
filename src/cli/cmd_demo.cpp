// moestream demo: generates a random-weight qwen3moe-shaped model of a few GiB
// (once, in the user's cache directory), streams it under a memory budget well
// below its size, and compares direct streaming with the mmap mode (the file
// mapped, experts advised in and released by the engine) under the same memory.
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <string>

#include "bench_core.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "demo_model.hpp"
#include "moestream.h"

namespace cli {
namespace {

const char *kUsage =
    "usage: moestream demo [--model PATH] [--budget SIZE|N%] [-n TOKENS] [--prompt N] [--max-seconds S] [--no-mmap]\n"
    "Without --model, generates a random-weight qwen3moe model (preset 'demo') in\n"
    "$XDG_CACHE_HOME/moestream (or ~/.cache/moestream) on first run, and again when the cached one cannot be\n"
    "opened. The budget defaults to 40% of the model.\n"
    "Spellings of one option: --model and -m, --budget and --memory-budget, -n and --tokens.\n";

struct DemoRun {
    int32_t n_tokens = 24, prompt = 8;
    double max_seconds = 45;
};

// -n, --prompt and --max-seconds; false with `error` naming a bad one.
bool read_run_options(const ParsedArgs &a, DemoRun &run, std::string &error) {
    constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
    int64_t v = 0;
    for (const auto &[name, field] : {std::pair{"-n", &run.n_tokens}, std::pair{"--prompt", &run.prompt}})
        if (auto s = a.get(name)) {
            if (!parse_int_in(*s, 1, kInt32Max, v)) {
                error = int_range_error(name, *s, 1, kInt32Max);
                return false;
            }
            *field = int32_t(v);
        }
    if (auto s = a.get("--max-seconds"); s && !parse_double_in(*s, RealRange::positive(), run.max_seconds)) {
        error = real_range_error("--max-seconds", *s, RealRange::positive());
        return false;
    }
    return true;
}

// Why the mmap run had no cgroup: the reason the run recorded (no cgroup
// support, no permission, a failed move), not one guessed here.
const char *unheld_why(const BenchResult &r) {
    const char *note = r.cgroup_note;
    constexpr char kPrefix[] = "unconstrained: ";
    if (std::strncmp(note, kPrefix, sizeof kPrefix - 1) == 0) note += sizeof kPrefix - 1;
    return note[0] ? note : "no cgroup was set up";
}

}  // namespace

int cmd_demo(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {"--model", "--budget", "-n", "--prompt", "--max-seconds"}, {"--no-mmap", "--help"}, a, error,
                    {{"-m", "--model"}, {"--memory-budget", "--budget"}, {"--tokens", "-n"}, {"-h", "--help"}}))
        return usage_error("demo", error);
    if (a.flags.count("--help")) {
        std::printf("%s", kUsage);
        return 0;
    }
    if (const std::string extra = unexpected_argument(a); !extra.empty()) return usage_error("demo", extra);
    // "--model ''" would generate the demo model as if no model were named.
    if (const std::string empty = empty_file_name(a, {"--model"}); !empty.empty()) return usage_error("demo", empty);
    DemoRun run;
    if (!read_run_options(a, run, error)) return usage_error("demo", error);
    // The budget is checked before a model is generated (minutes, several
    // GiB); a share becomes bytes once the model's size is known.
    const std::string budget_text = a.get_or("--budget", "40%");
    const std::string bad_budget = size_error("--budget", budget_text, SizeKind{.positive = true, .share = true});
    uint64_t budget = 0;
    if (!parse_share_or_size(budget_text, uint64_t{1} << 40, budget) || budget == 0)
        return usage_error("demo", bad_budget);
    std::string model = a.get_or("--model", "");
    if (model.empty() && (model = ensure_demo_model(error)).empty()) {
        std::fprintf(stderr, "\nmoestream demo: %s (or pass --model)\n", error.c_str());
        return 1;
    }
    moestream_model_info info;
    moestream_model_info_init(&info);
    if (const int st = moestream_inspect(model.c_str(), 0, &info); st != MOESTREAM_OK) {
        report_error("demo", "moestream_inspect", st);
        return 1;
    }
    if (!parse_share_or_size(budget_text, info.file_bytes, budget) || budget == 0) return usage_error("demo", bad_budget);
    BenchConfig base;
    base.model = model;
    base.budget = budget;
    base.live = true;
    base.n_tokens = run.n_tokens;
    base.prompt = run.prompt;
    base.max_seconds = run.max_seconds;

    std::printf("\nModel  %s\n       %s, %d layers, %d experts (top-%d), %s of which experts %s\n", model.c_str(),
                info.architecture, info.n_layer, info.n_expert, info.n_expert_used, format_bytes(info.file_bytes).c_str(),
                format_bytes(info.expert_bytes).c_str());
    // Only a budget below the file forces streaming; at or above it the
    // experts may all stay (the KV cache and buffers take part of it too).
    std::printf("Budget %s (%.0f%% of the model): %s.\n\n", format_bytes(budget).c_str(),
                100.0 * double(budget) / double(info.file_bytes),
                budget < info.file_bytes ? "the experts cannot all stay in memory"
                                         : "at least the model's size, so the experts may all stay in memory");
    flush_stdout();

    BenchConfig direct = base;
    direct.io_mode = MOESTREAM_IO_DIRECT;
    std::printf("[1/2] direct streaming: O_DIRECT reads into the engine's expert cache, %d prompt + %d tokens\n",
                base.prompt, base.n_tokens);
    flush_stdout();
    const BenchResult rd = run_bench(direct);
    if (!rd.ok) std::printf("      failed: %s\n", rd.error);

    BenchConfig mmap = base;
    mmap.io_mode = MOESTREAM_IO_MMAP;
    mmap.cgroup = true;
    BenchResult rm;
    if (!a.flags.count("--no-mmap")) {
        std::printf("[2/2] mmap mode under the same memory (page cache dropped first; stops after %.0f s)\n",
                    base.max_seconds);
        flush_stdout();
        rm = run_bench(mmap);
        if (!rm.ok) std::printf("      failed: %s\n", rm.error);
        else std::printf("      memory: %s\n", rm.cgroup_note);
    }

    std::printf("\n%-18s %10s %9s %12s %10s %10s %12s\n", "mode", "decode", "hit rate", "read/token", "ttft", "peak RSS",
                "memory");
    auto row = [&](const char *name, const BenchResult &r, const char *memory) {
        if (!r.ok) {
            std::printf("%-18s %s\n", name, r.error[0] ? "failed (see above)" : "not run");
            return;
        }
        char hit[16] = "-";
        if (r.io_mode != MOESTREAM_IO_MMAP) std::snprintf(hit, sizeof hit, "%.1f%%", 100.0 * r.hit_rate());
        std::printf("%-18s %6.2f t/s %9s %12s %9.2fs %10s %12s\n", name, r.decode_tok_s(), hit,
                    format_bytes(uint64_t(r.bytes_per_token())).c_str(), r.ttft_s, format_bytes(r.peak_rss).c_str(),
                    memory);
    };
    row("direct streaming", rd, "budget");
    if (!a.flags.count("--no-mmap")) row("mmap", rm, rm.cgroup_used ? "cgroup" : "unconstrained");
    if (rd.ok && rm.ok && rm.decode_tok_s() > 0)
        std::printf("\ndirect streaming / mmap: %.2fx%s%s%s\n", rd.decode_tok_s() / rm.decode_tok_s(),
                    rm.cgroup_used ? "" : " (mmap was not held to the budget: ", rm.cgroup_used ? "" : unheld_why(rm),
                    rm.cgroup_used ? "" : ")");
    std::printf("\nMore: moestream bench -m %s --sweep 25%%,50%%,75%%,100%% --disk\n", model.c_str());
    // A build without direct streaming still shows the mmap side; fail only when nothing ran.
    return rd.ok || rm.ok ? 0 : 1;
}

}  // namespace cli
