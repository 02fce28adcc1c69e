// Writes the seed corpus for fuzz_gguf: tiny valid GGUF files of every
// supported architecture plus files exercising every metadata type, a custom
// alignment, split keys and entries at their smallest. Usage: make_fuzz_seeds OUT_DIR
#include <cstdio>
#include <string>
#include <vector>

#include "support/gguf_builder.hpp"

using moe::GgmlType;
using moe::test::GgufBuilder;
using moe::test::TinyMoe;

namespace {

TinyMoe small(const char *arch) {
    TinyMoe m;
    m.arch = arch;
    m.name = std::string("seed-") + arch;
    m.n_vocab = 8;
    m.n_ctx_train = 16;
    m.n_embd = 8;
    m.n_layer = 1;
    m.n_head = 2;
    m.n_head_kv = std::string(arch) == "olmoe" ? 2 : 1;
    m.n_expert = 2;
    m.n_expert_used = 1;
    m.n_ff_expert = 8;
    m.n_ff_shared = 8;
    return m;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_fuzz_seeds OUT_DIR\n");
        return 2;
    }
    const std::string dir = argv[1];
    for (const char *arch : {"qwen3moe", "llama", "olmoe", "qwen2moe"})
        moe::test::tiny_moe(small(arch)).write(dir + "/tiny_" + arch + ".gguf");

    TinyMoe f16 = small("qwen3moe");
    f16.dense_type = GgmlType::F16;
    f16.expert_type = GgmlType::BF16;
    f16.tied_output = true;
    f16.head_dim = 8;
    moe::test::tiny_moe(f16).write(dir + "/tiny_qwen3moe_f16_tied.gguf");

    GgufBuilder types;
    types.override_version(2)
        .alignment(64)
        .kv_string("general.architecture", "llama")
        .kv_u8("t.u8", 1).kv_i8("t.i8", -1).kv_u16("t.u16", 2).kv_i16("t.i16", -2)
        .kv_u32("t.u32", 3).kv_i32("t.i32", -3).kv_u64("t.u64", 4).kv_i64("t.i64", -4)
        .kv_f32("t.f32", 0.5f).kv_f64("t.f64", 0.25).kv_bool("t.bool", true)
        .kv_array_u32("llama.attention.head_count_kv", {1, 1})
        .kv_array_i32("t.ai32", {-1, 2}).kv_array_f32("t.af32", {1.0f})
        .kv_array_string("t.astr", {"a", "bc"})
        .kv_u16("split.no", 0).kv_u16("split.count", 1);
    types.tensor_random("q8.weight", GgmlType::Q8_0, {32, 2}, 1)
        .tensor_random("q4k.weight", GgmlType::Q4_K, {256}, 2)
        .tensor_random("blk.0.ffn_up_exps.weight", GgmlType::Q4_0, {32, 1, 2}, 3);
    types.write(dir + "/metadata_types_v2.gguf");

    // Entries at their smallest: many 1- and 2-byte keys, a long array of
    // empty strings, a zero-size tensor last; then the same claiming more
    // pairs than its bytes can hold.
    GgufBuilder tiny;
    tiny.kv_string("general.architecture", "llama");
    for (int k = 0; k < 200; ++k) tiny.kv_u8(std::string(size_t(1 + k / 94), char(33 + k % 94)), uint8_t(k));
    tiny.kv_array_string("tokenizer.ggml.tokens", std::vector<std::string>(300));
    tiny.tensor_random("a", GgmlType::F32, {8}, 4).tensor("e", GgmlType::F32, {0}, {});
    tiny.write(dir + "/tiny_entries.gguf");
    tiny.override_kv_count(1000).write(dir + "/tiny_entries_count_beyond_bytes.gguf");
    return 0;
}
