// Writes the seed corpora of fuzz_trace, fuzz_profile and fuzz_packed from the
// library's own writers: OUT_ROOT/trace, OUT_ROOT/profile, OUT_ROOT/packed
// (the directories must exist). Usage: make_side_file_seeds OUT_ROOT
#include <cstdio>
#include <string>
#include <vector>

#include "experts/gguf_layouts.hpp"
#include "experts/packed_file.hpp"
#include "experts/routing_trace.hpp"
#include "experts/usage_profile.hpp"
#include "gguf/gguf_file.hpp"
#include "support/gguf_builder.hpp"

namespace {

void write_traces(const std::string &dir) {
    // Rows out of order and a token with fewer rows than layers, as a batched
    // step and a partial recording leave them.
    moe::RoutingTraceWriter a(dir + "/two_layers.trace", moe::TraceHeader{2, 8, 2, 4096});
    const int32_t rows[][2] = {{0, 1}, {2, 3}, {1, 4}, {5, 6}, {7, 0}, {3, 2}};
    for (uint32_t i = 0; i < 6; ++i) a.record(i / 2, i % 2 == 0 ? 1 : 0, rows[i]);
    a.record(3, 1, std::vector<int32_t>{6});
    a.close();
    moe::RoutingTraceWriter b(dir + "/one_layer_top1.trace", moe::TraceHeader{1, 4, 1, 1 << 20});
    for (uint32_t t = 0; t < 8; ++t) b.record(t, 0, std::vector<int32_t>{int32_t(t % 3)});
    b.close();
}

void write_profiles(const std::string &dir) {
    moe::save_usage_profile(dir + "/3x4.moeusage", 0x1234, moe::UsageProfile{3, 4, {9, 0, 1, 5, 0, 0, 7, 7, 2, 1, 0, 3}});
    moe::save_usage_profile(dir + "/1x8_extremes.moeusage", 42,
                            moe::UsageProfile{1, 8, {UINT64_MAX, 0, 1, UINT64_MAX - 1, 0, 0, 0, 1}});
}

void write_packed(const std::string &dir) {
    moe::test::TinyMoe m;
    m.name = "seed-packed";
    m.n_vocab = 8;
    m.n_ctx_train = 16;
    m.n_embd = 32;
    m.n_layer = 2;
    m.n_head = 2;
    m.n_head_kv = 1;
    m.n_expert = 2;
    m.n_expert_used = 1;
    m.n_ff_expert = 32;
    m.expert_type = moe::GgmlType::Q8_0;  // one 4 KiB extent per expert
    const std::string model = dir + "/.model.gguf";
    moe::test::tiny_moe(m).write(model);
    const auto file = moe::gguf::GgufFile::open(model);
    moe::write_packed_file(dir + "/two_layers.moepack", moe::model_fingerprint_of(*file),
                           moe::expert_layouts_from_gguf(*file), moe::shard_paths_of(*file));
    std::remove(model.c_str());
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_side_file_seeds OUT_ROOT\n");
        return 2;
    }
    const std::string root = argv[1];
    write_traces(root + "/trace");
    write_profiles(root + "/profile");
    write_packed(root + "/packed");
    return 0;
}
