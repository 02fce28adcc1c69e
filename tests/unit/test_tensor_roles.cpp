#include <gtest/gtest.h>

#include "gguf/gguf_file.hpp"
#include "model/model.hpp"
#include "model/tensor_roles.hpp"
#include "support/gguf_builder.hpp"

using moe::ExpertMatrix;
using moe::GgmlType;
using moe::parse_expert_tensor_name;
using moe::test::GgufBuilder;

TEST(TensorRoles, ParsesExpertNames) {
    auto n = parse_expert_tensor_name("blk.17.ffn_down_exps.weight");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->layer, 17u);
    EXPECT_EQ(n->matrix, ExpertMatrix::down);
    EXPECT_EQ(parse_expert_tensor_name("blk.0.ffn_gate_exps.weight")->matrix, ExpertMatrix::gate);
    EXPECT_EQ(parse_expert_tensor_name("blk.3.ffn_up_exps.weight")->matrix, ExpertMatrix::up);
    for (const char *other : {"blk.0.ffn_gate_shexp.weight", "blk.0.ffn_gate_inp.weight", "blk.0.ffn_up_exps.bias",
                              "blk..ffn_up_exps.weight", "blk.01.ffn_up_exps.weight", "blk.x.ffn_up_exps.weight",
                              "blk.99999999999.ffn_up_exps.weight", "token_embd.weight", "blk.1.ffn_up_exps.weightx",
                              "xblk.1.ffn_up_exps.weight", ""})
        EXPECT_FALSE(parse_expert_tensor_name(other)) << other;
}

TEST(TensorRoles, AccountsDenseAndExpertBytes) {
    moe::test::TinyMoe m;
    m.n_layer = 3;
    m.expert_type = GgmlType::Q8_0;
    GgufBuilder b = moe::test::tiny_moe(m);
    // A 4-D tensor with an expert name is dense; so is the shared expert.
    b.tensor_random("blk.9.ffn_up_exps.weight", GgmlType::F32, {32, 4, 2, 2}, 5);
    // A larger last layer: per-layer figures are maxima.
    b.tensor_random("blk.7.ffn_gate_exps.weight", GgmlType::F32, {32, 32, 4}, 6);
    const auto img = b.build();
    const auto f = moe::gguf::GgufFile::parse_memory(img.data(), img.size());

    uint64_t total = 0, dense = 0, expert = 0;
    for (const auto &t : f->tensors()) {
        total += t.nbytes;
        const bool is_expert =
            t.name.find("_exps.weight") != std::string::npos && t.name != "blk.9.ffn_up_exps.weight";
        EXPECT_EQ(moe::is_expert_tensor(t), is_expert) << t.name;
        (is_expert ? expert : dense) += t.nbytes;
    }
    const auto bytes = moe::account_bytes(*f);
    EXPECT_EQ(bytes.total, total);
    EXPECT_EQ(bytes.dense, dense);
    EXPECT_EQ(bytes.expert, expert);
    EXPECT_EQ(bytes.n_tensors, f->tensors().size());
    // One Q8_0 expert: gate and up 32x32, down 32x32 -> 3 * 32 rows * 34 bytes.
    const uint64_t q8_expert = 3ull * 32 * 34;
    EXPECT_EQ(bytes.expert_bytes_by_layer.at(0), 4 * q8_expert);
    EXPECT_EQ(bytes.expert_bytes_by_layer.at(7), 4ull * 32 * 32 * 4);
    EXPECT_EQ(bytes.expert_per_layer, 4ull * 32 * 32 * 4);
    EXPECT_EQ(bytes.expert_per_expert, 32ull * 32 * 4);
    EXPECT_EQ(bytes.count_by_type[uint32_t(GgmlType::Q8_0)], 9u);
    uint32_t counted = 0;
    for (uint32_t c : bytes.count_by_type) counted += c;
    EXPECT_EQ(counted, bytes.n_tensors);
}

// Writers differ on trailing dimensions of 1: a NumPy shape may keep them
// ([cols, rows, E, 1], n_dims 4), llama.cpp drops them (one expert: n_dims 2).
// Either way the experts bind and count as experts, as the 3-D ones do.
TEST(TensorRoles, TrailingUnitDimensionsKeepExpertsExperts) {
    for (const int32_t n_expert : {4, 1}) {
        SCOPED_TRACE(n_expert);
        moe::test::TinyMoe m;
        m.n_expert = n_expert;
        m.n_expert_used = 1;
        GgufBuilder plain = moe::test::tiny_moe(m), odd = plain;
        for (int32_t l = 0; l < m.n_layer; ++l)
            for (const std::string which : {"gate", "up", "down"}) {
                const std::string name = "blk." + std::to_string(l) + ".ffn_" + which + "_exps.weight";
                std::vector<int64_t> ne = {m.n_embd, m.n_ff_expert};
                if (which == "down") std::swap(ne[0], ne[1]);
                if (n_expert > 1) ne.insert(ne.end(), {n_expert, 1});
                odd.remove_tensor(name).tensor_random(name, GgmlType::F32, ne, 7);
            }
        const auto plain_img = plain.build(), odd_img = odd.build();
        auto plain_file = moe::gguf::GgufFile::parse_memory(plain_img.data(), plain_img.size());
        auto odd_file = moe::gguf::GgufFile::parse_memory(odd_img.data(), odd_img.size());
        EXPECT_EQ(odd_file->tensor("blk.0.ffn_up_exps.weight")->n_dims, n_expert > 1 ? 4u : 2u);
        const moe::ModelBytes want = moe::account_bytes(*plain_file), got = moe::account_bytes(*odd_file);
        EXPECT_GT(got.expert, 0u);
        EXPECT_EQ(got.expert, want.expert);
        EXPECT_EQ(got.dense, want.dense);
        EXPECT_EQ(got.expert_per_expert, want.expert_per_expert);
        const auto model = moe::Model::bind(std::move(odd_file));
        EXPECT_EQ(model->expert_bytes(), want.expert);
        EXPECT_EQ(model->expert_layouts()[0].n_expert, n_expert);
    }
}
