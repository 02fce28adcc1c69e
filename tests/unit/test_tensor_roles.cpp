#include <gtest/gtest.h>

#include "gguf/gguf_file.hpp"
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
    // A 2-D tensor with an expert name is dense; so is the shared expert.
    b.tensor_random("blk.9.ffn_up_exps.weight", GgmlType::F32, {32, 4}, 5);
    // A larger last layer: per-layer figures are maxima.
    b.tensor_random("blk.7.ffn_gate_exps.weight", GgmlType::F32, {32, 32, 4}, 6);
    const auto img = b.build();
    const auto f = moe::gguf::GgufFile::parse_memory(img.data(), img.size());

    uint64_t total = 0, dense = 0, expert = 0;
    for (const auto &t : f->tensors()) {
        total += t.nbytes;
        const bool is_expert = t.name.find("_exps.weight") != std::string::npos && t.n_dims == 3;
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
