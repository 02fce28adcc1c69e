// Opening a model binds every tensor of the file: optional tensors where the
// architecture has a place for them, and a leftover is a format error.
#include <gtest/gtest.h>

#include <string>

#include "gguf/gguf_file.hpp"
#include "model/model.hpp"
#include "support/gguf_builder.hpp"
#include "support/status_of.hpp"

namespace {

using moe::GgmlType;
using moe::Status;
using moe::test::GgufBuilder;
using moe::test::TinyMoe;

Status bind_status(const GgufBuilder &b, std::string *message = nullptr) {
    const auto img = b.build();
    return moe::test::status_of(
        [&] { moe::Model::bind(moe::gguf::GgufFile::parse_memory(img.data(), img.size(), "m.gguf")); }, message);
}

TinyMoe tiny(const char *arch) {
    TinyMoe m;
    m.arch = arch;
    if (m.arch == "olmoe") m.n_head_kv = m.n_head;
    return m;
}

}  // namespace

TEST(TensorBinder, EveryTensorOfEveryArchitectureIsBound) {
    for (const char *arch : {"qwen3moe", "llama", "olmoe", "qwen2moe"}) {
        SCOPED_TRACE(arch);
        std::string message;
        EXPECT_EQ(bind_status(moe::test::tiny_moe(tiny(arch)), &message), Status::ok) << message;
    }
    // Optional tensors bind where the architecture has them.
    for (const char *arch : {"qwen3moe", "llama"}) {
        TinyMoe m = tiny(arch);
        m.tied_output = true;
        EXPECT_EQ(bind_status(moe::test::tiny_moe(m)), Status::ok) << arch << " with a tied output";
    }
    const TinyMoe llama = tiny("llama");
    const int64_t q_dim = int64_t(llama.n_head) * (llama.n_embd / llama.n_head);
    const int64_t kv_dim = int64_t(llama.n_head_kv) * (llama.n_embd / llama.n_head);
    GgufBuilder b = moe::test::tiny_moe(llama);
    b.tensor_random("rope_freqs.weight", GgmlType::F32, {llama.n_embd / llama.n_head / 2}, 1);
    b.tensor_random("blk.0.attn_q.bias", GgmlType::F32, {q_dim}, 2);
    b.tensor_random("blk.0.attn_k.bias", GgmlType::F32, {kv_dim}, 3);
    b.tensor_random("blk.0.attn_v.bias", GgmlType::F32, {kv_dim}, 4);
    b.tensor_random("blk.1.attn_output.bias", GgmlType::F32, {llama.n_embd}, 5);
    b.tensor_random("blk.1.ffn_gate_inp.bias", GgmlType::F32, {llama.n_expert}, 6);
    std::string message;
    EXPECT_EQ(bind_status(b, &message), Status::ok) << message;
}

TEST(TensorBinder, TensorTheArchitectureDoesNotUseIsBadFormat) {
    const TinyMoe qwen3 = tiny("qwen3moe");
    std::string message;
    // qwen3moe has no attention biases: silently skipping one would change nothing
    // in the logits and hide that the file is not what its metadata says.
    GgufBuilder bias = moe::test::tiny_moe(qwen3);
    bias.tensor_random("blk.0.attn_q.bias", GgmlType::F32, {qwen3.n_embd}, 1);
    EXPECT_EQ(bind_status(bias, &message), Status::bad_format);
    EXPECT_NE(message.find("m.gguf: tensor 'blk.0.attn_q.bias' is not used by a 2-layer qwen3moe model"),
              std::string::npos)
        << message;
    // block_count below the layers present would run only some of them.
    GgufBuilder fewer = moe::test::tiny_moe(qwen3);
    fewer.kv_u32("qwen3moe.block_count", 1);
    EXPECT_EQ(bind_status(fewer, &message), Status::bad_format);
    EXPECT_NE(message.find("tensor 'blk.1.attn_norm.weight' is not used by a 1-layer"), std::string::npos) << message;
    GgufBuilder stray = moe::test::tiny_moe(tiny("olmoe"));
    stray.tensor_random("extra.weight", GgmlType::F32, {4}, 1);
    EXPECT_EQ(bind_status(stray, &message), Status::bad_format);
    EXPECT_NE(message.find("'extra.weight'"), std::string::npos) << message;
}
