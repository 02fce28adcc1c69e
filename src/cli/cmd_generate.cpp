// moestream generate: writes a random-weight model of a real architecture's shape.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "cli_util.hpp"
#include "commands.hpp"
#include "moestream.h"

namespace cli {
namespace {

// The library's MOESTREAM_GENERATE_MAX_<name> as text.
#define LIMIT_TEXT(value) #value
#define LIMIT_VALUE(value) LIMIT_TEXT(value)
#define LIMIT(name) LIMIT_VALUE(MOESTREAM_GENERATE_MAX_##name)

const char *kUsage =
    "usage: moestream generate [--arch qwen3moe|gpt-oss|deepseek2]\n"
    "                          [--preset qwen3-30b-a3b|gpt-oss-20b|gpt-oss-tiny|deepseek-v2-lite|\n"
    "                                    deepseek2-tiny|demo|small|tiny]\n"
    "                          [--quant q4_k_m|q3_k_m|q2_k|iq4_xs|q8_0|f32] [--layers N] [--embd N] [--heads N]\n"
    "                          [--kv-heads N] [--head-dim N] [--experts N] [--top-k N]\n"
    "                          [--ff-expert N] [--vocab N] [--seed N] [--attn-kv-b] [--size-only] -o PATH\n"
    "Writes a GGUF with random weights (valid quant blocks, finite activations). -o and --output are one option.\n"
    "--attn-kv-b (deepseek2): one F32 attn_kv_b a layer, as files converted before absorbed latent\n"
    "attention have it, instead of attn_k_b / attn_v_b; the same weights as without it.\n"
    "Shape limits: --layers " LIMIT(LAYERS) ", --embd " LIMIT(EMBD) ", --heads and --kv-heads " LIMIT(HEADS)
    ", --head-dim " LIMIT(HEAD_DIM) ",\n--experts and --top-k " LIMIT(EXPERTS) ", --ff-expert " LIMIT(FF_EXPERT)
    ", --vocab " LIMIT(VOCAB) ".\n";

// The header line waits for the first progress report, which comes once the
// target has been created: a target the library refuses before it generates
// anything (a directory, a pipe, a missing directory) leaves only its error
// on the screen, which names the target and why it cannot be written.
struct Progress {
    std::string header;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    int last_percent = -1;
    bool tty = false;
    // A progress line without its newline, which an error must end first.
    bool line_open() const { return tty && last_percent >= 0 && last_percent < 100; }
};

void on_progress(uint64_t done, uint64_t total, void *user) {
    auto *p = static_cast<Progress *>(user);
    const int percent = total ? static_cast<int>(done * 100 / total) : 100;
    if (percent == p->last_percent) return;
    if (p->last_percent < 0) std::fprintf(stderr, "%s\n", p->header.c_str());
    p->last_percent = percent;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
    if (p->tty || percent == 100)
        std::fprintf(stderr, "\r  %3d%%  %s of %s  %.1f s", percent, format_bytes(done).c_str(),
                     format_bytes(total).c_str(), s);
    if (percent == 100) std::fprintf(stderr, "\n");
}

}  // namespace

int cmd_generate(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args,
                    {"--arch", "--preset", "--quant", "--layers", "--embd", "--heads", "--kv-heads", "--head-dim",
                     "--experts", "--top-k", "--ff-expert", "--vocab", "--seed", "-o"},
                    {"--size-only", "--attn-kv-b", "--help"}, a, error, {{"--output", "-o"}, {"-h", "--help"}}))
        return usage_error("generate", error);
    if (a.flags.count("--help")) {
        std::printf("%s", kUsage);
        return 0;
    }
    if (const std::string extra = unexpected_argument(a); !extra.empty()) return usage_error("generate", extra);
    if (const std::string empty = empty_file_name(a, {"-o"}); !empty.empty()) return usage_error("generate", empty);
    moestream_generate_params p;
    moestream_generate_params_init(&p);
    // No --arch: the preset's architecture (gpt-oss and deepseek2 for their presets, else qwen3moe).
    const std::string arch = a.get_or("--arch", ""), preset = a.get_or("--preset", "small"),
                      quant = a.get_or("--quant", "q4_k_m");
    p.architecture = arch.empty() ? nullptr : arch.c_str();
    p.preset = preset.c_str();
    p.quant = quant.c_str();
    struct IntOpt {
        const char *name;
        int32_t *field;
        int32_t max;
    } ints[] = {{"--layers", &p.n_layer, MOESTREAM_GENERATE_MAX_LAYERS},
                {"--embd", &p.n_embd, MOESTREAM_GENERATE_MAX_EMBD},
                {"--heads", &p.n_head, MOESTREAM_GENERATE_MAX_HEADS},
                {"--kv-heads", &p.n_head_kv, MOESTREAM_GENERATE_MAX_HEADS},
                {"--head-dim", &p.head_dim, MOESTREAM_GENERATE_MAX_HEAD_DIM},
                {"--experts", &p.n_expert, MOESTREAM_GENERATE_MAX_EXPERTS},
                {"--top-k", &p.n_expert_used, MOESTREAM_GENERATE_MAX_EXPERTS},
                {"--ff-expert", &p.n_ff_expert, MOESTREAM_GENERATE_MAX_FF_EXPERT},
                {"--vocab", &p.n_vocab, MOESTREAM_GENERATE_MAX_VOCAB}};
    for (const IntOpt &o : ints) {
        if (auto v = a.get(o.name)) {
            int64_t x = 0;
            if (!parse_int_in(*v, 1, o.max, x)) return usage_error("generate", int_range_error(o.name, *v, 1, o.max));
            *o.field = static_cast<int32_t>(x);
        }
    }
    p.deepseek2_attn_kv_b = a.flags.count("--attn-kv-b") ? 1 : 0;
    if (auto v = a.get("--seed"); v && !parse_seed(*v, p.seed)) return usage_error("generate", seed_error("--seed", *v));
    uint64_t size = 0;
    if (const int st = moestream_generate_model_size(&p, &size); st != MOESTREAM_OK) {
        // Invalid argument or unsupported (an --arch the generator has no
        // shape for): the options do not make a model.
        if (st == MOESTREAM_ERR_INVALID_ARGUMENT || st == MOESTREAM_ERR_UNSUPPORTED)
            return usage_error("generate", moestream_last_error());
        report_error("generate", "moestream_generate_model_size", st);
        return 1;
    }
    if (a.flags.count("--size-only")) {
        std::printf("%llu\n", static_cast<unsigned long long>(size));
        return 0;
    }
    auto out = a.get("-o");
    if (!out) return usage_error("generate", "-o PATH is required");
    Progress progress;
    progress.header = "generating " + format_bytes(size) + " (" + (arch.empty() ? "preset's architecture" : arch) +
                      ", preset " + preset + ", " + quant + ") -> " + *out;
    progress.tty = isatty(2);
    p.progress = on_progress;
    p.progress_user_data = &progress;
    if (const int st = moestream_generate_model(&p, out->c_str()); st != MOESTREAM_OK) {
        if (progress.line_open()) std::fprintf(stderr, "\n");
        report_error("generate", "moestream_generate_model", st);
        return 1;
    }
    return 0;
}

}  // namespace cli
