// moestream trace record: runs a model greedily and writes the routing of
// every token in every layer (moestream_params.routing_trace_path).
// Decode steps take the argmax (--feed greedy, the default) or random
// token ids (--feed random: routing as varied as the model makes it).
// With -f TEXT_FILE the model reads that text instead (tokenized with its
// tokenizer, a context's worth at a time): the routing real text gets, which
// is what cache policies should be judged on.
// The library writes the trace whole or not at all, but publishes it at
// moestream_close also after a failed step; so it is given a temporary file
// of the CLI's, renamed over -o only when the run succeeds (copied into it
// when -o is a pipe or a link): a failed run keeps an earlier trace.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_tokens.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "moestream.h"

namespace cli {
namespace {

struct RecordOptions {
    std::string model, packed, out, text_file;
    bool random_feed = false;  // --feed random: random token ids, else the greedy choice
    int64_t n_tokens = 64, n_prompt = 16, threads = 0;
    int32_t io_mode = MOESTREAM_IO_AUTO;
    uint64_t seed = 1, budget = 0;
};

// Fills `o` from the parsed options; false after a usage error naming the option.
bool read_options(const ParsedArgs &a, RecordOptions &o) {
    constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
    const struct {
        const char *name;
        int64_t *field;
        int64_t lo, hi;
    } ints[] = {{"--tokens", &o.n_tokens, 0, kInt32Max},
                {"--prompt", &o.n_prompt, 1, kInt32Max},
                {"--threads", &o.threads, 0, kInt32Max}};
    for (const auto &opt : ints)
        if (auto s = a.get(opt.name); s && !parse_int_in(*s, opt.lo, opt.hi, *opt.field))
            return usage_error("trace record", int_range_error(opt.name, *s, opt.lo, opt.hi)), false;
    if (auto s = a.get("--seed"); s && !parse_seed(*s, o.seed))
        return usage_error("trace record", seed_error("--seed", *s)), false;
    if (auto s = a.get("--packed")) o.packed = *s;  // "" refused with the other file names
    try {
        if (auto s = a.get("--io-mode")) o.io_mode = parse_io_mode(*s);
        if (auto s = a.get("--feed")) o.random_feed = parse_feed_random(*s);
    } catch (const std::runtime_error &e) {
        return usage_error("trace record", e.what()), false;
    }
    if (auto s = a.get("--memory-budget"); s && !parse_size(*s, o.budget))
        return usage_error("trace record", size_error("--memory-budget", *s, SizeKind{})), false;
    if (auto f = a.get("-f")) {
        for (const char *generated : {"--tokens", "--prompt", "--feed", "--seed"})
            if (a.get(generated))
                return usage_error("trace record", std::string("-f records the text's tokens: ") + generated +
                                                       " is for generated tokens"),
                       false;
        o.text_file = *f;
    }
    return true;
}

// Steps the text's tokens, a context's worth per step (the context is reset
// between them: the trace lists tokens, whatever context they ran in).
bool record_text(moestream_context *ctx, const std::vector<int32_t> &tokens) {
    const size_t n_ctx = size_t(moestream_n_ctx(ctx));
    for (size_t start = 0; start < tokens.size(); start += n_ctx) {
        const size_t n = std::min(n_ctx, tokens.size() - start);
        moestream_reset(ctx);
        if (const int st = moestream_step(ctx, &tokens[start], int32_t(n), nullptr); st != MOESTREAM_OK) {
            report_error("trace record", "moestream_step", st);
            return false;
        }
    }
    return true;
}

// Runs the prompt and the decode steps; prints what failed and returns false.
bool record(moestream_context *ctx, const RecordOptions &o) {
    const int32_t n_vocab = moestream_n_vocab(ctx);
    const int64_t n_ctx = moestream_n_ctx(ctx);
    if (o.n_prompt > n_ctx) {
        std::fprintf(stderr, "moestream trace record: --prompt %lld is longer than the context (%lld tokens)\n",
                     static_cast<long long>(o.n_prompt), static_cast<long long>(n_ctx));
        return false;
    }
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    std::mt19937_64 rng(o.seed);
    std::vector<int32_t> prompt(static_cast<size_t>(o.n_prompt));
    for (int32_t &t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab));
    int st = moestream_step(ctx, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data());
    const int64_t room = n_ctx - o.n_prompt;
    for (int64_t i = 0; st == MOESTREAM_OK && i < std::min(o.n_tokens, room); ++i) {
        int32_t next = o.random_feed ? static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab)) : greedy_token(logits);
        if (next < 0) {
            std::fprintf(stderr, "moestream trace record: %s\n", kNoGreedyToken);
            return false;
        }
        st = moestream_step(ctx, &next, 1, logits.data());
    }
    if (st != MOESTREAM_OK) report_error("trace record", "moestream_step", st);
    return st == MOESTREAM_OK;
}

}  // namespace

int trace_record(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {"-m", "--packed", "--io-mode", "--tokens", "--prompt", "--memory-budget", "--seed", "--threads", "--feed", "-o",
                     "-f"},
                    {}, a, error,
                    {{"--model", "-m"}, {"-n", "--tokens"}, {"--output", "-o"}, {"--budget", "--memory-budget"},
                     {"--file", "-f"}, {"-t", "--threads"}}))
        return usage_error("trace record", error);
    if (const std::string extra = unexpected_argument(a); !extra.empty()) return usage_error("trace record", extra);
    RecordOptions o;
    if (!a.get("-m") || !a.get("-o")) return usage_error("trace record", "-m MODEL and -o TRACE are required");
    // "-f ''" would record generated tokens as if no text were named.
    if (const std::string empty = empty_file_name(a, {"-m", "--packed", "-o", "-f"}); !empty.empty())
        return usage_error("trace record", empty);
    o.model = *a.get("-m");
    o.out = *a.get("-o");
    if (!read_options(a, o)) return 2;
    std::string text;
    if (!o.text_file.empty()) {
        try {
            text = read_input_file(o.text_file);
        } catch (const std::runtime_error &e) {
            std::fprintf(stderr, "moestream trace record: %s\n", e.what());
            return 1;
        }
    }
    const std::vector<std::string> inputs = model_and_text_files(o.model, o.packed, o.text_file);
    if (const std::string why = output_conflict(o.out, inputs); !why.empty()) {
        std::fprintf(stderr, "moestream trace record: %s\n", why.c_str());
        return 1;
    }
    PendingOutput trace(o.out, NonPlainTarget::copy_on_commit);
    if (!trace.create(error)) {
        std::fprintf(stderr, "moestream trace record: %s\n", error.c_str());
        return 1;
    }
    ModelOptions opt;
    moestream_params_init(&opt.params);
    opt.model_path = o.model;
    opt.packed_path = o.packed;
    opt.params.memory_budget = o.budget;
    opt.params.io_mode = o.io_mode;
    opt.params.n_threads = static_cast<int32_t>(o.threads);
    opt.params.routing_trace_path = trace.path().c_str();
    opt.params.profile_path = "";
    moestream_context *raw = open_model(opt, "trace record");
    if (!raw) return 1;
    // Closed before the temporary trace is removed, also when record() throws.
    std::unique_ptr<moestream_context, void (*)(moestream_context *)> ctx(raw, moestream_close);
    bool recorded = false;
    if (o.text_file.empty()) {
        recorded = record(ctx.get(), o);
    } else {
        std::vector<int32_t> tokens;
        recorded = tokenize_text(ctx.get(), text, true, false, tokens, "trace record");
        if (recorded && tokens.empty()) {
            std::fprintf(stderr, "moestream trace record: %s holds no token\n", o.text_file.c_str());
            recorded = false;
        }
        recorded = recorded && record_text(ctx.get(), tokens);
    }
    ctx.reset();  // finishes the trace file
    if (!recorded) return 1;
    moestream_trace_info info;
    moestream_trace_info_init(&info);
    if (const int st = moestream_trace_info_get(trace.path().c_str(), &info); st != MOESTREAM_OK) {
        report_error("trace record", "moestream_trace_info_get", st);
        return 1;
    }
    if (!trace.commit(error)) {
        std::fprintf(stderr, "moestream trace record: %s\n", error.c_str());
        return 1;
    }
    std::printf("wrote %s: %lld tokens x %d layers (top-%d of %d); reuse %.3f, top-20%% share %.3f\n", o.out.c_str(),
                static_cast<long long>(info.n_tokens), info.n_layer, info.n_expert_used, info.n_expert, info.reuse,
                info.top20_share_median);
    return 0;
}

}  // namespace cli
