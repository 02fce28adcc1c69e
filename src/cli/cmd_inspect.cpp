// moestream inspect: a model's architecture, sizes and the I/O mode a memory
// budget would choose, as text or as one JSON object.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli_util.hpp"
#include "commands.hpp"
#include "moestream.h"

namespace cli {
namespace {

const char *kUsage =
    "usage: moestream inspect MODEL [--json] [--memory-budget SIZE]\n"
    "Prints a model's architecture, hyper-parameters, tensor types, dense and expert\n"
    "bytes, and the I/O mode opening it with the given budget (default: automatic,\n"
    "80% of available memory) would choose. SIZE: bytes or 512MiB, 8GiB, 1.5G, ...\n"
    "MODEL is a GGUF file or the first shard of a split set.\n"
    "  --json                 print exactly one JSON object\n"
    "  --memory-budget SIZE   budget for the I/O mode choice (0 = automatic)\n";

void print_text(const std::string &path, const moestream_model_info &m, uint64_t budget) {
    std::printf("model            %s\n", path.c_str());
    std::printf("architecture     %s\n", m.architecture);
    if (m.name[0]) std::printf("name             %s\n", m.name);
    std::printf("vocabulary       %d\n", m.n_vocab);
    std::printf("context (train)  %d\n", m.n_ctx_train);
    std::printf("embedding        %d\n", m.n_embd);
    std::printf("layers           %d\n", m.n_layer);
    std::printf("heads            %d (kv %d, head dim %d)\n", m.n_head, m.n_head_kv, m.head_dim);
    std::printf("experts          %d, %d used per token, ff %d\n", m.n_expert, m.n_expert_used, m.n_ff_expert);
    if (m.n_ff_shared) std::printf("shared expert    ff %d\n", m.n_ff_shared);
    std::printf("tensors          %d:", m.n_tensors);
    bool first = true;
    for (int t = 0; t < MOESTREAM_MAX_TENSOR_TYPES; ++t) {
        if (!m.tensor_count_by_type[t]) continue;
        std::printf("%s %u %s", first ? "" : ",", m.tensor_count_by_type[t], moestream_type_name(t));
        first = false;
    }
    std::printf("\n");
    auto bytes = [](const char *label, uint64_t v) {
        std::printf("%-16s %s (%" PRIu64 " bytes)\n", label, format_bytes(v).c_str(), v);
    };
    bytes("file", m.file_bytes);
    bytes("tensors", m.total_bytes);
    bytes("dense", m.dense_bytes);
    bytes("experts", m.expert_bytes);
    bytes("  per layer", m.expert_bytes_per_layer);
    bytes("  per expert", m.expert_bytes_per_expert);
    std::printf("I/O mode         %s (budget %s): %s\n", moestream_io_mode_name(m.io_mode),
                format_budget(budget).c_str(), m.io_mode_reason);
}

void print_json(const std::string &path, const moestream_model_info &m, uint64_t budget) {
    std::string types = "{";
    for (int t = 0; t < MOESTREAM_MAX_TENSOR_TYPES; ++t) {
        if (!m.tensor_count_by_type[t]) continue;
        if (types.size() > 1) types += ", ";
        types += json_string(moestream_type_name(t)) + ": " + std::to_string(m.tensor_count_by_type[t]);
    }
    types += "}";
    std::printf("{\"path\": %s, \"architecture\": %s, \"name\": %s, ", json_string(path).c_str(),
                json_string(m.architecture).c_str(), json_string(m.name).c_str());
    std::printf("\"n_vocab\": %d, \"n_ctx_train\": %d, \"n_embd\": %d, \"n_layer\": %d, \"n_head\": %d, "
                "\"n_head_kv\": %d, \"head_dim\": %d, \"n_expert\": %d, \"n_expert_used\": %d, "
                "\"n_ff_expert\": %d, \"n_ff_shared\": %d, \"n_tensors\": %d, ",
                m.n_vocab, m.n_ctx_train, m.n_embd, m.n_layer, m.n_head, m.n_head_kv, m.head_dim, m.n_expert,
                m.n_expert_used, m.n_ff_expert, m.n_ff_shared, m.n_tensors);
    std::printf("\"tensor_count_by_type\": %s, ", types.c_str());
    std::printf("\"file_bytes\": %" PRIu64 ", \"total_bytes\": %" PRIu64 ", \"dense_bytes\": %" PRIu64
                ", \"expert_bytes\": %" PRIu64 ", \"expert_bytes_per_layer\": %" PRIu64
                ", \"expert_bytes_per_expert\": %" PRIu64 ", ",
                m.file_bytes, m.total_bytes, m.dense_bytes, m.expert_bytes, m.expert_bytes_per_layer,
                m.expert_bytes_per_expert);
    std::printf("\"memory_budget\": %" PRIu64 ", \"io_mode\": %s, \"io_mode_reason\": %s}\n", budget,
                json_string(moestream_io_mode_name(m.io_mode)).c_str(), json_string(m.io_mode_reason).c_str());
}

}  // namespace

int cmd_inspect(const Args &args) {
    ParsedArgs a;
    std::string error;
    if (!parse_args(args, {"--memory-budget"}, {"--json", "--help"}, a, error, {{"-h", "--help"}}))
        return usage_error("inspect", error);
    if (a.flags.count("--help")) {
        std::printf("%s", kUsage);
        return 0;
    }
    if (a.positional.size() != 1) return usage_error("inspect", "expected one MODEL argument");
    uint64_t budget = 0;
    if (auto v = a.get("--memory-budget")) {
        // 0 is the automatic budget, as for moestream_inspect and the commands that open a model.
        if (!parse_size(*v, budget)) return usage_error("inspect", size_error("--memory-budget", *v, SizeKind{}));
    }
    const std::string &path = a.positional[0];
    moestream_model_info info;
    moestream_model_info_init(&info);
    const int rc = moestream_inspect(path.c_str(), budget, &info);
    if (rc != MOESTREAM_OK) {
        report_error("inspect", "moestream_inspect", rc);
        return 1;
    }
    if (a.flags.count("--json")) print_json(path, info, budget);
    else print_text(path, info, budget);
    return 0;
}

}  // namespace cli
