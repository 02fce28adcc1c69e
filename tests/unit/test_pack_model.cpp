// The packed expert file and the streaming source on a generated GGUF model,
// through the library and the `moestream pack` command.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "experts/gguf_layouts.hpp"
#include "experts/packed_file.hpp"
#include "experts/streaming_source.hpp"
#include "gguf/gguf_file.hpp"
#include "support/gguf_builder.hpp"
#include "support/paths.hpp"
#include "support/status_of.hpp"

namespace {

using namespace moe;

std::string cli() { return test::binary_dir() + "/moestream"; }

std::string generate_tiny(const std::string &dir) {
    const std::string model = dir + "/tiny.gguf";
    const int rc = test::run(cli() + " generate --preset tiny --quant q8_0 --seed 3 -o " + model + " > /dev/null 2>&1");
    if (rc != 0) return std::string();
    return model;
}

TEST(PackModel, CliPackVerifyAndCorruption) {
    if (!std::filesystem::exists(cli())) GTEST_SKIP() << "CLI not built";
    const std::string dir = test::scratch_dir();
    const std::string model = generate_tiny(dir);
    ASSERT_FALSE(model.empty());
    ASSERT_EQ(test::run(cli() + " pack " + model + " > /dev/null"), 0);
    const std::string packed = model + ".moepack";
    ASSERT_TRUE(std::filesystem::exists(packed));
    EXPECT_EQ(test::run(cli() + " pack " + model + " --verify > /dev/null"), 0);

    auto file = gguf::GgufFile::open(model);
    const auto layouts = expert_layouts_from_gguf(*file);
    PackedFile pf = PackedFile::open(packed, model_fingerprint_of(*file), layouts);
    const PackedLayer &l0 = pf.layers()[0];
    ASSERT_GT(l0.n_expert, 1);
    {
        std::fstream io(packed, std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(std::streamoff(l0.extent_of(1) + l0.down_offset + 5));
        io.put(char(0x13));
        io.seekp(std::streamoff(l0.extent_of(1) + l0.down_offset + 6));
        io.put(char(0x37));
    }
    EXPECT_NE(test::run(cli() + " pack " + model + " --verify 2> /dev/null > /dev/null"), 0);
    std::filesystem::remove_all(dir);
}

// A model generated again with another seed has the same header, so the
// fingerprint of its old packed file still matches: the packed file must
// neither pass verification nor be used by open.
TEST(PackModel, PackedFileOfARegeneratedModelIsNotUsed) {
    if (!std::filesystem::exists(cli())) GTEST_SKIP() << "CLI not built";
    const std::string dir = test::scratch_dir();
    const std::string model = dir + "/m.gguf";
    const auto generate = [&](int seed) {
        return test::run(cli() + " generate --preset tiny --seed " + std::to_string(seed) + " -o " + model +
                         " > /dev/null 2>&1");
    };
    ASSERT_EQ(generate(1), 0);
    ASSERT_EQ(test::run(cli() + " pack " + model + " > /dev/null"), 0);
    ASSERT_EQ(generate(2), 0);
    EXPECT_NE(test::run(cli() + " pack " + model + " --verify > /dev/null 2>&1"), 0);
    const auto logits = [&](const std::string &io_mode) {
        const std::string out = dir + "/" + io_mode + ".bin";
        EXPECT_EQ(test::run(cli() + " logits -m " + model + " --tokens 1,2,3 --threads 1 --io-mode " + io_mode +
                            " --out " + out + " > /dev/null 2>&1"),
                  0);
        std::ifstream in(out, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const std::string mapped = logits("mmap"), streamed = logits("pread");
    EXPECT_FALSE(mapped.empty());
    EXPECT_TRUE(mapped == streamed) << "the stale packed file was used";
    std::filesystem::remove_all(dir);
}

// A model whose name leaves no room for ".moepack" (the default packed name
// cannot be looked up: ENAMETOOLONG) streams from its GGUF slices, with the
// logits of the mapped model, instead of failing open.
TEST(PackModel, AModelNameWithNoRoomForThePackedSuffixStreams) {
    if (!std::filesystem::exists(cli())) GTEST_SKIP() << "CLI not built";
    const std::string dir = test::scratch_dir();
    const std::string model = dir + "/" + std::string(250, 'm') + ".gguf";
    ASSERT_EQ(test::run(cli() + " generate --preset tiny --seed 1 -o " + model + " > /dev/null 2>&1"), 0);
    const auto logits = [&](const std::string &io_mode) {
        const std::string out = dir + "/" + io_mode + ".bin";
        EXPECT_EQ(test::run(cli() + " logits -m " + model + " --tokens 1,2,3 --threads 1 --io-mode " +
                            io_mode + " --out " + out + " > /dev/null 2>&1"),
                  0)
            << io_mode;
        std::ifstream in(out, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const std::string mapped = logits("mmap");
    EXPECT_FALSE(mapped.empty());
    EXPECT_TRUE(mapped == logits("pread"));
    EXPECT_TRUE(mapped == logits("direct"));
    std::filesystem::remove_all(dir);
}

// Every expert of a real GGUF read through the source (GGUF slices and the
// packed file, direct and buffered) equals the bytes of the mapped tensor.
TEST(PackModel, StreamedExpertsEqualMappedTensors) {
    if (!std::filesystem::exists(cli())) GTEST_SKIP() << "CLI not built";
    const std::string dir = test::scratch_dir();
    const std::string model = generate_tiny(dir);
    ASSERT_FALSE(model.empty());
    auto file = gguf::GgufFile::open(model);
    const auto layouts = expert_layouts_from_gguf(*file);
    const uint64_t fp = model_fingerprint_of(*file);
    const std::string packed = dir + "/tiny.moepack";
    write_packed_file(packed, fp, layouts, shard_paths_of(*file));
    for (bool use_packed : {false, true})
        for (bool direct : {false, true}) {
            StreamingSourceConfig cfg;
            cfg.layers = layouts;
            cfg.shard_paths = shard_paths_of(*file);
            cfg.packed_path = use_packed ? packed : std::string();
            cfg.model_fingerprint = fp;
            cfg.direct = direct;
            cfg.verify_checksums = use_packed;
            int32_t max_e = 0;
            for (const auto &l : layouts) max_e = std::max(max_e, l.n_expert);
            cfg.slots = uint32_t(max_e);
            StreamingExpertSource src(std::move(cfg));
            for (size_t layer = 0; layer < layouts.size(); ++layer) {
                const ExpertLayerLayout &L = layouts[layer];
                if (L.n_expert == 0) continue;
                std::vector<int32_t> experts;
                for (int32_t e = L.n_expert - 1; e >= 0; --e) experts.push_back(e);
                src.begin_layer(int32_t(layer), experts);
                for (size_t i = 0; i < experts.size(); ++i) {
                    const ReadyExpert r = src.next_ready();
                    const uint64_t e = uint64_t(r.expert);
                    ASSERT_EQ(0, std::memcmp(r.view.up, L.up.mapped + e * L.up.expert_stride, L.up.expert_stride));
                    ASSERT_EQ(0, std::memcmp(r.view.down, L.down.mapped + e * L.down.expert_stride, L.down.expert_stride));
                    if (L.gate.expert_stride)
                        ASSERT_EQ(0, std::memcmp(r.view.gate, L.gate.mapped + e * L.gate.expert_stride, L.gate.expert_stride));
                }
                src.end_layer(int32_t(layer));
            }
        }
    std::filesystem::remove_all(dir);
}

// Packing reads the expert layouts of a model; a file open and inspect refuse
// (its tensors do not match its metadata) is refused the same way, naming
// the tensor, and no packed file is written for it.
TEST(PackModel, ModelThatOpenRefusesIsNotPacked) {
    if (!std::filesystem::exists(cli())) GTEST_SKIP() << "CLI not built";
    const std::string dir = test::scratch_dir();
    test::TinyMoe m;
    const int64_t q_dim = int64_t(m.n_head) * (m.n_embd / m.n_head);
    struct Case {
        const char *what, *tensor;
        test::GgufBuilder file;
    };
    std::vector<Case> cases;
    cases.push_back({"a mis-shaped attention matrix", "blk.0.attn_q.weight",
                     test::tiny_moe(m).remove_tensor("blk.0.attn_q.weight")
                         .tensor_random("blk.0.attn_q.weight", GgmlType::F32, {m.n_embd, q_dim + 4}, 9)});
    cases.push_back({"expert_count below the experts present", "blk.0.ffn_gate_inp.weight",
                     test::tiny_moe(m).kv_u32("qwen3moe.expert_count", uint32_t(m.n_expert - 1))});
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        const std::string model = dir + "/bad.gguf";
        c.file.write(model);
        auto file = gguf::GgufFile::open(model);
        std::string message;
        EXPECT_EQ(test::status_of([&] { expert_layouts_from_gguf(*file); }, &message), Status::bad_format);
        EXPECT_NE(message.find(c.tensor), std::string::npos) << message;
        EXPECT_NE(test::run(cli() + " pack " + model + " > /dev/null 2>&1"), 0);
        EXPECT_FALSE(std::filesystem::exists(model + ".moepack"));
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
