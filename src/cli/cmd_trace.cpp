// moestream trace: synthesise, inspect, replay (and record) expert routing traces.
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "moestream.h"

namespace cli {

int trace_record(const Args &args);  // cmd_trace_record.cpp

namespace {

const char *kUsage =
    "usage: moestream trace synth [--heat FILE.json] [-n TOKENS] [--reuse 0.4] [--skew 0.47] [--window 0 --recall 0]\n"
    "                             [--layers N --experts N] [--top-k K] [--expert-bytes SIZE] [--seed N] -o TRACE\n"
    "                             (-n or --tokens, -o or --output)\n"
    "       moestream trace info TRACE [--json]\n"
    "       moestream trace replay TRACE [--budget 25%|50%|75%|SIZE[,...]]\n"
    "                             [--policy lru|lfu[-decay]|pinned[-hot]|reuse[-aware]|auto|all] [--warmup 0.5] [--json]\n"
    "       moestream trace record -m MODEL [--packed PATH] [--io-mode auto|mmap|direct|pread] [--threads N]\n"
    "                              [--tokens N] [--prompt N] [--memory-budget SIZE] [--seed N] [--feed greedy|random]\n"
    "                              -o TRACE\n"
    "       moestream trace record -m MODEL [--packed PATH] [--io-mode auto|mmap|direct|pread] [--threads N]\n"
    "                              -f TEXT_FILE [--memory-budget SIZE] -o TRACE   (the text's routing)\n"
    "                              (-m or --model, --tokens or -n, -f or --file, --memory-budget or --budget,\n"
    "                              --threads or -t, -o or --output)\n"
    "Trace format: docs/trace-format.md. Budgets in % are shares of all expert bytes.\n";

// Reports the failed library call of `subcommand`; returns the status of a failure at run time.
int fail_api(const char *subcommand, const char *call, int status) {
    report_error((std::string("trace ") + subcommand).c_str(), call, status);
    return 1;
}

int synth(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {"--heat", "-n", "--reuse", "--skew", "--window", "--recall", "--layers", "--experts", "--top-k", "--expert-bytes", "--seed", "-o"},
                    {}, a, error, {{"--tokens", "-n"}, {"--output", "-o"}}))
        return usage_error("trace synth", error);
    if (const std::string extra = unexpected_argument(a); !extra.empty()) return usage_error("trace synth", extra);
    // "--heat ''" would synthesise without the heat map as if none were named.
    if (const std::string empty = empty_file_name(a, {"--heat", "-o"}); !empty.empty()) return usage_error("trace synth", empty);
    moestream_trace_synth_params p;
    moestream_trace_synth_params_init(&p);
    std::string heat = a.get_or("--heat", "");
    if (!heat.empty()) p.heat_path = heat.c_str();
    int64_t v = 0;
    struct {
        const char *name;
        int32_t *field;
    } ints[] = {{"--layers", &p.n_layer}, {"--experts", &p.n_expert}, {"--top-k", &p.n_expert_used}};
    for (auto &o : ints)
        if (auto s = a.get(o.name)) {
            if (!parse_int_in(*s, 1, 65534, v))
                return usage_error("trace synth", int_range_error(o.name, *s, 1, 65534));
            *o.field = static_cast<int32_t>(v);
        }
    if (auto s = a.get("-n")) {
        constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
        if (!parse_int_in(*s, 1, kMax, v)) return usage_error("trace synth", int_range_error("-n", *s, 1, kMax));
        p.n_tokens = v;
    }
    if (auto s = a.get("--window")) {
        if (!parse_int_in(*s, 0, 65536, v))
            return usage_error("trace synth", int_range_error("--window", *s, 0, 65536));
        p.window = static_cast<uint32_t>(v);
    }
    // The library's ranges (a negative reuse or skew would take its default there).
    const struct {
        const char *name;
        double *field;
        RealRange range;
    } reals[] = {{"--reuse", &p.reuse, RealRange::from_to(0, 1)},
                 {"--skew", &p.skew, RealRange::from_to(0, 8)},
                 {"--recall", &p.recall, RealRange::from_to(0, 1)}};
    for (const auto &o : reals)
        if (auto s = a.get(o.name); s && !parse_double_in(*s, o.range, *o.field))
            return usage_error("trace synth", real_range_error(o.name, *s, o.range));
    if (p.window == 0 && p.recall > 0) return usage_error("trace synth", "--recall needs --window");
    if (auto s = a.get("--expert-bytes")) {
        uint64_t b = 0;
        if (!parse_size(*s, b) || b == 0)
            return usage_error("trace synth", size_error("--expert-bytes", *s, SizeKind{.positive = true}));
        p.bytes_per_expert = b;
    }
    if (auto s = a.get("--seed"); s && !parse_seed(*s, p.seed)) return usage_error("trace synth", seed_error("--seed", *s));
    auto out = a.get("-o");
    if (!out) return usage_error("trace synth", "-o TRACE is required");
    if (const std::string why = output_conflict(*out, {heat}); !why.empty()) {
        std::fprintf(stderr, "moestream trace synth: %s\n", why.c_str());
        return 1;
    }
    if (const int st = moestream_trace_synth(&p, out->c_str()); st != MOESTREAM_OK)
        return fail_api("synth", "moestream_trace_synth", st);
    moestream_trace_info info;
    moestream_trace_info_init(&info);
    if (const int st = moestream_trace_info_get(out->c_str(), &info); st != MOESTREAM_OK)
        return fail_api("synth", "moestream_trace_info_get", st);
    std::printf("wrote %s: %lld tokens x %d layers, top-%d of %d experts; reuse %.3f, top-20%% share %.3f (median over layers)\n",
                out->c_str(), static_cast<long long>(info.n_tokens), info.n_layer, info.n_expert_used, info.n_expert,
                info.reuse, info.top20_share_median);
    return 0;
}

int info(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {}, {"--json"}, a, error)) return usage_error("trace info", error);
    if (a.positional.size() != 1) return usage_error("trace info", "expected one TRACE argument");
    moestream_trace_info i;
    moestream_trace_info_init(&i);
    if (const int st = moestream_trace_info_get(a.positional[0].c_str(), &i); st != MOESTREAM_OK)
        return fail_api("info", "moestream_trace_info_get", st);
    if (a.flags.count("--json")) {
        std::printf("{\"trace\": %s, \"n_tokens\": %lld, \"n_layer\": %d, \"n_expert\": %d, \"n_expert_used\": %d, "
                    "\"bytes_per_expert\": %llu, \"expert_bytes\": %llu, \"reuse\": %.6f, \"top20_share_median\": %.6f, "
                    "\"top20_share_min\": %.6f, \"top20_share_max\": %.6f}\n",
                    json_string(a.positional[0]).c_str(), static_cast<long long>(i.n_tokens), i.n_layer, i.n_expert,
                    i.n_expert_used, static_cast<unsigned long long>(i.bytes_per_expert),
                    static_cast<unsigned long long>(i.expert_bytes), i.reuse, i.top20_share_median, i.top20_share_min,
                    i.top20_share_max);
        return 0;
    }
    std::printf("tokens           %lld\nlayers           %d\nexperts          %d (top-%d)\nbytes per expert %s\n"
                "expert bytes     %s\nreuse            %.3f\ntop-20%% share    %.3f median (%.3f .. %.3f over layers)\n",
                static_cast<long long>(i.n_tokens), i.n_layer, i.n_expert, i.n_expert_used,
                format_bytes(i.bytes_per_expert).c_str(), format_bytes(i.expert_bytes).c_str(), i.reuse,
                i.top20_share_median, i.top20_share_min, i.top20_share_max);
    return 0;
}

int replay(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {"--budget", "--policy", "--warmup"}, {"--json"}, a, error))
        return usage_error("trace replay", error);
    if (a.positional.size() != 1) return usage_error("trace replay", "expected one TRACE argument");
    const std::string trace = a.positional[0];
    moestream_trace_info info;
    moestream_trace_info_init(&info);
    if (const int st = moestream_trace_info_get(trace.c_str(), &info); st != MOESTREAM_OK)
        return fail_api("replay", "moestream_trace_info_get", st);

    std::vector<std::pair<std::string, uint64_t>> budgets;
    for (const std::string &b : split_list(a.get_or("--budget", "25%,50%,75%"))) {
        uint64_t bytes = 0;
        if (!parse_share_or_size(b, info.expert_bytes, bytes))
            return usage_error("trace replay", size_error("--budget", b, SizeKind{.share = true}));
        budgets.emplace_back(b, bytes);
    }
    if (budgets.empty()) return usage_error("trace replay", "--budget lists no budget");
    // The names of every command's cache policy option, and "all".
    std::vector<int32_t> policies;
    for (const std::string &name : split_list(a.get_or("--policy", "all"))) {
        int32_t policy = MOESTREAM_CACHE_AUTO;
        if (name == "all")
            policies.insert(policies.end(), {MOESTREAM_CACHE_LRU, MOESTREAM_CACHE_LFU_DECAY, MOESTREAM_CACHE_PINNED_HOT,
                                             MOESTREAM_CACHE_REUSE_AWARE});
        else if (parse_cache_policy(name, policy)) policies.push_back(policy);
        else
            return usage_error("trace replay",
                               unknown_name_error("cache policy", name, std::string(kCachePolicyNames) + ", all"));
    }
    if (policies.empty()) return usage_error("trace replay", "--policy lists no policy");
    policies.push_back(MOESTREAM_REPLAY_BELADY);  // the reference every run is compared with
    double warmup = -1;  // the library's default share
    if (auto s = a.get("--warmup"); s && !parse_double_in(*s, RealRange::from_below(0, 1), warmup))
        return usage_error("trace replay", real_range_error("--warmup", *s, RealRange::from_below(0, 1)));

    const bool json = a.flags.count("--json");
    if (json) std::printf("{\"trace\": %s, \"expert_bytes\": %llu, \"runs\": [", json_string(trace).c_str(),
                          static_cast<unsigned long long>(info.expert_bytes));
    else
        std::printf("%-8s %-12s %8s %9s %10s %14s %12s\n", "budget", "policy", "slots", "hit rate", "vs belady",
                    "bytes read", "per token");
    bool first = true;
    for (const auto &[label, bytes] : budgets) {
        std::vector<moestream_replay_result> results;
        for (int32_t policy : policies) {
            moestream_replay_params p;
            moestream_replay_params_init(&p);
            p.trace_path = trace.c_str();
            p.cache_bytes = bytes;
            p.cache_policy = policy;
            p.warmup_share = warmup;
            moestream_replay_result r;
            moestream_replay_result_init(&r);
            if (const int st = moestream_trace_replay(&p, &r); st != MOESTREAM_OK)
                return fail_api("replay", "moestream_trace_replay", st);
            results.push_back(r);
        }
        const moestream_replay_result &belady = results.back();
        for (const moestream_replay_result &r : results) {
            const double ratio = belady.hit_rate > 0 ? r.hit_rate / belady.hit_rate : 0.0;
            const int64_t measured_tokens = info.n_tokens - static_cast<int64_t>((warmup < 0 ? 0.5 : warmup) * info.n_tokens);
            const double per_token = measured_tokens > 0 ? double(r.bytes_read) / double(measured_tokens) : 0.0;
            if (json) {
                std::printf("%s{\"budget\": %s, \"cache_bytes\": %llu, \"policy\": \"%s\", \"slots\": %u, "
                            "\"accesses\": %llu, \"hits\": %llu, \"misses\": %llu, \"hit_rate\": %.6f, "
                            "\"ratio_to_belady\": %.6f, \"bytes_read\": %llu, \"bytes_read_per_token\": %.1f}",
                            first ? "" : ", ", json_string(label).c_str(), static_cast<unsigned long long>(bytes),
                            moestream_cache_policy_name(r.cache_policy), r.capacity_slots,
                            static_cast<unsigned long long>(r.accesses), static_cast<unsigned long long>(r.hits),
                            static_cast<unsigned long long>(r.misses), r.hit_rate, ratio,
                            static_cast<unsigned long long>(r.bytes_read), per_token);
                first = false;
            } else {
                std::printf("%-8s %-12s %8u %8.1f%% %9.1f%% %14s %12s\n", label.c_str(),
                            moestream_cache_policy_name(r.cache_policy), r.capacity_slots, 100.0 * r.hit_rate,
                            100.0 * ratio, format_bytes(r.bytes_read).c_str(),
                            format_bytes(static_cast<uint64_t>(per_token)).c_str());
            }
        }
    }
    if (json) std::printf("]}\n");
    return 0;
}

}  // namespace

int cmd_trace(const Args &args) {
    if (args.empty()) return usage_error("trace", "expected a subcommand: synth, info, replay or record");
    // "trace --help" and "trace SUBCOMMAND --help" alike.
    for (const std::string &a : args)
        if (a == "--help" || a == "-h") {
            std::printf("%s", kUsage);
            return 0;
        }
    const Args rest(args.begin() + 1, args.end());
    if (args[0] == "synth") return synth(rest);
    if (args[0] == "info") return info(rest);
    if (args[0] == "replay") return replay(rest);
    if (args[0] == "record") return trace_record(rest);
    return usage_error("trace", "unknown subcommand '" + args[0] + "'");
}

}  // namespace cli
