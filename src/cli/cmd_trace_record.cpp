// moestream trace record: runs a model greedily and writes the routing of
// every token in every layer (moestream_params.routing_trace_path).
// Decode steps take the argmax (--feed greedy, the default) or random
// token ids (--feed random: routing as varied as the model makes it).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "moestream.h"

namespace cli {

int trace_record(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {"-m", "--tokens", "--prompt", "--memory-budget", "--seed", "--threads", "--feed", "-o"}, {}, a, error,
                    {{"--model", "-m"}, {"-n", "--tokens"}, {"--output", "-o"}, {"--budget", "--memory-budget"}})) {
        std::fprintf(stderr, "moestream trace record: %s\n", error.c_str());
        return 2;
    }
    auto model = a.get("-m");
    auto out = a.get("-o");
    if (!model || !out) {
        std::fprintf(stderr, "moestream trace record: -m MODEL and -o TRACE are required\n");
        return 2;
    }
    int64_t n_tokens = 64, n_prompt = 16, seed = 1, threads = 0;
    uint64_t budget = 0;
    if ((a.get("--tokens") && (!parse_int(*a.get("--tokens"), n_tokens) || n_tokens < 0)) ||
        (a.get("--prompt") && (!parse_int(*a.get("--prompt"), n_prompt) || n_prompt < 1)) ||
        (a.get("--seed") && !parse_int(*a.get("--seed"), seed)) ||
        (a.get("--threads") && (!parse_int(*a.get("--threads"), threads) || threads < 0)) ||
        (a.get("--memory-budget") && !parse_size(*a.get("--memory-budget"), budget))) {
        std::fprintf(stderr, "moestream trace record: bad option value\n");
        return 2;
    }
    const std::string feed = a.get_or("--feed", "greedy");
    if (feed != "greedy" && feed != "random") {
        std::fprintf(stderr, "moestream trace record: --feed takes greedy or random\n");
        return 2;
    }
    moestream_params p;
    moestream_params_init(&p);
    p.model_path = model->c_str();
    p.memory_budget = budget;
    p.n_threads = static_cast<int32_t>(threads);
    p.routing_trace_path = out->c_str();
    p.profile_path = "";
    moestream_context *ctx = nullptr;
    if (int st = moestream_open(&p, &ctx); st != MOESTREAM_OK) {
        std::fprintf(stderr, "moestream trace record: %s\n", moestream_last_error());
        return 1;
    }
    const int32_t n_vocab = moestream_n_vocab(ctx);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
    for (int32_t &t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab));
    int st = moestream_step(ctx, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data());
    const int64_t room = moestream_n_ctx(ctx) - n_prompt;
    for (int64_t i = 0; st == MOESTREAM_OK && i < std::min(n_tokens, room); ++i) {
        int32_t next = feed == "random"
                           ? static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab))
                           : static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        st = moestream_step(ctx, &next, 1, logits.data());
    }
    if (st != MOESTREAM_OK) std::fprintf(stderr, "moestream trace record: %s\n", moestream_last_error());
    moestream_close(ctx);  // finishes the trace file
    if (st != MOESTREAM_OK) return 1;
    moestream_trace_info info;
    moestream_trace_info_init(&info);
    if (moestream_trace_info_get(out->c_str(), &info) != MOESTREAM_OK) {
        std::fprintf(stderr, "moestream trace record: %s\n", moestream_last_error());
        return 1;
    }
    std::printf("wrote %s: %lld tokens x %d layers (top-%d of %d); reuse %.3f, top-20%% share %.3f\n", out->c_str(),
                static_cast<long long>(info.n_tokens), info.n_layer, info.n_expert_used, info.n_expert, info.reuse,
                info.top20_share_median);
    return 0;
}

}  // namespace cli
