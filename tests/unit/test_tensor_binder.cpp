// Opening a model binds every tensor of the file: optional tensors where the
// architecture has a place for them, and a leftover is a format error.
// Model::check (what moestream_inspect runs) refuses the same files.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

Status check_status(const GgufBuilder &b, std::string *message = nullptr) {
    const auto img = b.build();
    return moe::test::status_of(
        [&] { moe::Model::check(*moe::gguf::GgufFile::parse_memory(img.data(), img.size(), "m.gguf")); }, message);
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

// The per-architecture facts of the forward pass come from the architecture
// files alone (ArchTraits): RoPE pairing, top-k renormalisation, whether the
// output head may be the embedding table.
TEST(TensorBinder, EachArchitectureHasItsTraits) {
    struct Want {
        const char *arch;
        moe::RopeType rope;
        bool norm_weights;
        bool tied_output_allowed;
    };
    for (const Want &w : {Want{"qwen3moe", moe::RopeType::neox, true, true},
                          Want{"llama", moe::RopeType::normal, true, true},
                          Want{"olmoe", moe::RopeType::neox, false, false},
                          Want{"qwen2moe", moe::RopeType::neox, false, false}}) {
        SCOPED_TRACE(w.arch);
        const auto img = moe::test::tiny_moe(tiny(w.arch)).build();
        const auto model = moe::Model::bind(moe::gguf::GgufFile::parse_memory(img.data(), img.size(), "m.gguf"));
        EXPECT_EQ(model->traits().rope_type, w.rope);
        EXPECT_EQ(model->traits().gating.norm_weights, w.norm_weights);
        EXPECT_EQ(model->traits().tied_output_allowed, w.tied_output_allowed);
        // Without output.weight, the embedding table is the head where allowed; elsewhere the file is refused.
        TinyMoe tied = tiny(w.arch);
        tied.tied_output = true;
        std::string message;
        EXPECT_EQ(bind_status(moe::test::tiny_moe(tied), &message),
                  w.tied_output_allowed ? Status::ok : Status::bad_format);
        if (!w.tied_output_allowed) EXPECT_NE(message.find("output.weight"), std::string::npos) << message;
    }
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

TEST(TensorBinder, CheckRefusesWhatBindRefusesWithTheSameMessage) {
    const TinyMoe qwen3 = tiny("qwen3moe");
    const TinyMoe llama = tiny("llama");
    const int64_t q_dim = int64_t(qwen3.n_head) * (qwen3.n_embd / qwen3.n_head);
    auto qwen3_file = [&] { return moe::test::tiny_moe(qwen3); };
    auto replaced = [](GgufBuilder b, const std::string &name, GgmlType type, const std::vector<int64_t> &ne) {
        return b.remove_tensor(name).tensor_random(name, type, ne, 9);
    };
    struct Case {
        const char *what;
        GgufBuilder file;
    };
    std::vector<Case> cases;
    cases.push_back({"a bias the architecture has no place for",
                     qwen3_file().tensor_random("blk.0.attn_q.bias", GgmlType::F32, {q_dim}, 1)});
    cases.push_back({"block_count below the layers present", qwen3_file().kv_u32("qwen3moe.block_count", 1)});
    cases.push_back({"a tensor of no architecture", qwen3_file().tensor_random("extra.weight", GgmlType::F32, {4}, 1)});
    cases.push_back({"a missing matrix", qwen3_file().remove_tensor("blk.1.attn_k.weight")});
    cases.push_back({"a missing norm", qwen3_file().remove_tensor("blk.1.ffn_norm.weight")});
    cases.push_back({"a missing expert tensor", qwen3_file().remove_tensor("blk.0.ffn_down_exps.weight")});
    cases.push_back({"a mis-shaped matrix",
                     replaced(qwen3_file(), "blk.0.attn_q.weight", GgmlType::F32, {qwen3.n_embd, q_dim + 4})});
    cases.push_back({"a mis-shaped norm",
                     replaced(qwen3_file(), "blk.1.attn_norm.weight", GgmlType::F32, {qwen3.n_embd + 1})});
    cases.push_back({"an expert tensor with one expert too many",
                     replaced(qwen3_file(), "blk.0.ffn_up_exps.weight", GgmlType::F32,
                              {qwen3.n_embd, qwen3.n_ff_expert, qwen3.n_expert + 1})});
    cases.push_back({"an expert tensor with too few rows",
                     replaced(qwen3_file(), "blk.1.ffn_down_exps.weight", GgmlType::F32,
                              {qwen3.n_ff_expert, qwen3.n_embd / 2, qwen3.n_expert})});
    cases.push_back({"an expert tensor with a fourth dimension",
                     replaced(qwen3_file(), "blk.1.ffn_gate_exps.weight", GgmlType::F32,
                              {qwen3.n_embd, qwen3.n_ff_expert, qwen3.n_expert, 2})});
    // A type this build cannot compute with is unsupported, for check as for bind.
    GgufBuilder q8_1 = qwen3_file().remove_tensor("blk.0.attn_q.weight");
    q8_1.tensor_raw("blk.0.attn_q.weight", static_cast<uint32_t>(GgmlType::Q8_1), {qwen3.n_embd, q_dim},
                    GgufBuilder::Bytes(size_t(q_dim) * (qwen3.n_embd / 32) * 36, 0));
    cases.push_back({"a type this build cannot compute with", q8_1});
    // The one check that reads tensor values: a zero frequency factor.
    const int64_t n_pairs = llama.n_embd / llama.n_head / 2;
    cases.push_back({"a zero rope frequency factor",
                     moe::test::tiny_moe(llama).tensor("rope_freqs.weight", GgmlType::F32, {n_pairs},
                                                       GgufBuilder::Bytes(size_t(n_pairs) * 4, 0))});

    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        std::string bind_message, check_message;
        const Status bound = bind_status(c.file, &bind_message);
        EXPECT_NE(bound, Status::ok);
        EXPECT_EQ(check_status(c.file, &check_message), bound) << check_message;
        EXPECT_EQ(check_message, bind_message);
    }
}

TEST(TensorBinder, CheckAcceptsWhatBindAccepts) {
    for (const char *arch : {"qwen3moe", "llama", "olmoe", "qwen2moe"}) {
        SCOPED_TRACE(arch);
        const GgufBuilder b = moe::test::tiny_moe(tiny(arch));
        const auto img = b.build();
        const auto file = moe::gguf::GgufFile::parse_memory(img.data(), img.size(), "m.gguf");
        const moe::HParams hp = moe::Model::check(*file).hp;
        EXPECT_EQ(hp.arch, arch);
        EXPECT_EQ(hp.n_layer, 2);
        EXPECT_EQ(bind_status(b), Status::ok);
    }
}
