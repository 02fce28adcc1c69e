// The matrices built at open from deepseek2's attn_kv_b (files converted
// before absorbed latent attention): attn_v_b is the value rows bit for bit,
// attn_k_b the key rows transposed (dequantised to F32 from quantised
// blocks); built on a thread pool they are the same bytes as built on the
// opening thread alone; they live in one buffer of the engine's own, placed
// as the context's numa_placement says, as the dense weights' copy is.
#include <gtest/gtest.h>
#include <numaif.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/numa_memory.hpp"
#include "common/thread_pool.hpp"
#include "kernels/kernels.hpp"
#include "model/model.hpp"
#include "runtime/context.hpp"
#include "support/generated_models.hpp"

namespace {

std::string old_layout_model(const std::string &quant_mix) {
    return moe::test::generated_model("derived_matrices", "deepseek2",
                                      "--n-embd 128 --n-head 4 --n-layer 2 --n-expert 4 --n-ff-expert 64 "
                                      "--n-vocab 300 --seed 8",
                                      "--quant-mix " + quant_mix + " --joint-kv-b");
}

std::vector<uint8_t> bytes_of(const moe::MatrixView &m) {
    return std::vector<uint8_t>(m.data, m.data + size_t(m.rows) * m.row_bytes);
}

class KvBSplit : public ::testing::TestWithParam<std::string> {};

// attn_kv_b's key rows are dequantised from its blocks (Q8_0, Q5_0) or
// transposed in the file's float type (F16).
TEST_P(KvBSplit, BuiltMatricesHoldTheFilesValuesWhateverTheThreads) {
    REQUIRE_GENERATED_MODEL(path, old_layout_model(GetParam()));
    const auto serial = moe::Model::open(path);
    moe::ThreadPool pool(3);
    const auto pooled = moe::Model::open(path, {moe::NumaPlacement::local, &pool});
    const moe::HParams &hp = serial->hparams();
    ASSERT_TRUE(hp.joint_kv_b);
    const int64_t H = hp.n_head, kv_lora = hp.kv_lora_rank;
    const int64_t nope = hp.head_dim_k_mla - hp.n_rot, v_head = hp.head_dim_v_mla;
    for (int32_t l = 0; l < hp.n_layer; ++l) {
        SCOPED_TRACE("layer " + std::to_string(l));
        const moe::gguf::TensorInfo *kv_b =
            serial->file().tensor("blk." + std::to_string(l) + ".attn_kv_b.weight");
        ASSERT_NE(kv_b, nullptr);
        const size_t kv_b_row = size_t(moe::row_bytes(kv_b->type, uint64_t(kv_lora)));
        const moe::LayerWeights &s = serial->layer(l), &p = pooled->layer(l);
        ASSERT_TRUE(s.wk_b && s.wv_b && p.wk_b && p.wv_b);
        EXPECT_EQ(bytes_of(p.wk_b), bytes_of(s.wk_b));
        EXPECT_EQ(bytes_of(p.wv_b), bytes_of(s.wv_b));

        const bool float_type = moe::type_traits(kv_b->type).block_elems == 1;
        ASSERT_EQ(s.wk_b.type, float_type ? kv_b->type : moe::GgmlType::F32);
        ASSERT_EQ(s.wv_b.type, kv_b->type);
        std::vector<float> keys(static_cast<size_t>(nope * kv_lora)), row(static_cast<size_t>(nope));
        for (int64_t h = 0; h < H; ++h) {
            const uint8_t *head = kv_b->data + size_t(h * (nope + v_head)) * kv_b_row;
            for (int64_t j = 0; j < v_head; ++j)
                ASSERT_EQ(std::memcmp(s.wv_b.row(h * v_head + j), head + size_t(nope + j) * kv_b_row, kv_b_row), 0)
                    << "head " << h << " value row " << j;
            for (int64_t d = 0; d < nope; ++d)
                moe::kernels::dequantize_row(kv_b->type, head + size_t(d) * kv_b_row, &keys[size_t(d * kv_lora)],
                                             kv_lora);
            // attn_k_b's row c of head h is column c of the head's key rows.
            for (int64_t c = 0; c < kv_lora; ++c) {
                moe::kernels::dequantize_row(s.wk_b.type, s.wk_b.row(h * kv_lora + c), row.data(), nope);
                for (int64_t d = 0; d < nope; ++d)
                    ASSERT_EQ(std::memcmp(&row[size_t(d)], &keys[size_t(d * kv_lora + c)], sizeof(float)), 0)
                        << "head " << h << " attn_k_b row " << c << " column " << d;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, KvBSplit, ::testing::Values("q8_0", "q4_k_m", "f16"));

int policy_at(const void *p) {
    int mode = -1;
    unsigned long nodes[16] = {};
    EXPECT_EQ(get_mempolicy(&mode, nodes, sizeof nodes * 8, const_cast<void *>(p), MPOL_F_ADDR), 0)
        << std::strerror(errno);
    return mode;
}

// Placed by the policy the context's NUMA placement sets (applied, and
// readable, on one node too), as the dense weights' copy: not heap memory.
TEST(DerivedMatrices, LiveWhereTheContextsNumaPlacementPutsThem) {
    if (!moe::numa_supported()) GTEST_SKIP() << "no NUMA support here";
    REQUIRE_GENERATED_MODEL(path, old_layout_model("q8_0"));
    for (const auto &[placement, mode] : {std::pair{MOESTREAM_NUMA_LOCAL, MPOL_PREFERRED},
                                          std::pair{MOESTREAM_NUMA_INTERLEAVE, MPOL_INTERLEAVE}}) {
        moe::ContextParams p = moe::test::context_params(path);
        p.numa_placement = placement;
        p.io_mode = MOESTREAM_IO_PREAD;
        p.profile_disabled = true;
        moe::Context ctx(p);
        for (int32_t l = 0; l < ctx.model().hparams().n_layer; ++l) {
            EXPECT_EQ(policy_at(ctx.model().layer(l).wk_b.data), mode) << "layer " << l << ", placement " << placement;
            EXPECT_EQ(policy_at(ctx.model().layer(l).wv_b.data), mode) << "layer " << l << ", placement " << placement;
        }
    }
}

}  // namespace
