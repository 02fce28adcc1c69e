#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "model/hparams.hpp"
#include "model/model.hpp"
#include "support/gguf_builder.hpp"
#include "support/paths.hpp"

using moe::Error;
using moe::HParams;
using moe::Status;
using moe::gguf::GgufFile;
using moe::test::GgufBuilder;
using moe::test::TinyMoe;

namespace {

HParams load(const GgufBuilder &b) {
    const auto img = b.build();
    const auto f = GgufFile::parse_memory(img.data(), img.size(), "m.gguf");
    return HParams::from_gguf(*f);
}

void expect_error(const GgufBuilder &b, Status status, std::initializer_list<const char *> fragments) {
    try {
        load(b);
        ADD_FAILURE() << "loaded";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), status) << e.what();
        EXPECT_EQ(std::string(e.what()).rfind("m.gguf: ", 0), 0u) << e.what();
        for (const char *f : fragments) EXPECT_NE(std::strstr(e.what(), f), nullptr) << "'" << f << "' not in " << e.what();
    }
}

TinyMoe arch(const char *name) {
    TinyMoe m;
    m.arch = name;
    if (std::strcmp(name, "olmoe") == 0) m.n_head_kv = m.n_head;
    return m;
}

}  // namespace

TEST(HParams, Qwen3Moe) {
    TinyMoe m = arch("qwen3moe");
    m.n_vocab = 77;
    m.head_dim = 16;  // key_length differs from n_embd / n_head
    m.rms_eps = 1e-5f;
    m.rope_freq_base = 1e6f;
    const HParams hp = load(moe::test::tiny_moe(m));
    EXPECT_EQ(hp.arch, "qwen3moe");
    EXPECT_EQ(hp.name, "tiny");
    EXPECT_EQ(hp.n_vocab, 77);
    EXPECT_EQ(hp.n_ctx_train, 128);
    EXPECT_EQ(hp.n_embd, 32);
    EXPECT_EQ(hp.n_layer, 2);
    EXPECT_EQ(hp.n_head, 4);
    EXPECT_EQ(hp.n_head_kv, 2);
    EXPECT_EQ(hp.head_dim_k, 16);
    EXPECT_EQ(hp.head_dim_v, 16);
    EXPECT_EQ(hp.n_rot, 16);
    EXPECT_EQ(hp.n_expert, 4);
    EXPECT_EQ(hp.n_expert_used, 2);
    EXPECT_EQ(hp.n_ff_expert, 32);
    EXPECT_EQ(hp.n_ff_shared, 0);
    EXPECT_FLOAT_EQ(hp.rope_freq_base, 1e6f);
    EXPECT_FLOAT_EQ(hp.rope_freq_scale, 1.0f);
    EXPECT_FLOAT_EQ(hp.rms_eps, 1e-5f);
}

// gpt-oss: a required sliding window with pattern 2 by default, YaRN with
// its original context, one RoPE base for every layer.
TEST(HParams, GptOssSlidingWindowAndYarn) {
    TinyMoe m = arch("gpt-oss");
    m.n_layer = 4;
    GgufBuilder b = moe::test::tiny_moe(m);
    expect_error(b, Status::bad_format, {"gpt-oss.attention.sliding_window"});
    b.kv_u32("gpt-oss.attention.sliding_window", 128)
        .kv_string("gpt-oss.rope.scaling.type", "yarn")
        .kv_f32("gpt-oss.rope.scaling.factor", 32.0f)
        .kv_u32("gpt-oss.rope.scaling.original_context_length", 4096);
    HParams hp = load(b);
    EXPECT_EQ(hp.n_swa, 128);
    EXPECT_EQ(hp.swa_layers, (std::vector<uint8_t>{1, 0, 1, 0}));  // the default period 2
    EXPECT_TRUE(hp.is_swa(0));
    EXPECT_FALSE(hp.is_swa(1));
    EXPECT_FALSE(hp.is_swa(4));  // past the last layer
    EXPECT_TRUE(hp.rope_yarn);
    EXPECT_EQ(hp.rope_n_ctx_orig, 4096);
    EXPECT_FLOAT_EQ(hp.rope_freq_scale, 1.0f / 32.0f);
    b.kv_u32("gpt-oss.attention.sliding_window_pattern", 3);
    EXPECT_EQ(load(b).swa_layers, (std::vector<uint8_t>{1, 1, 0, 1}));
    b.kv_f32("gpt-oss.rope.freq_base_swa", 12345.0f);
    expect_error(b, Status::unsupported, {"gpt-oss.rope.freq_base_swa"});
    // Other architectures have no sliding window, whatever their keys say.
    GgufBuilder q = moe::test::tiny_moe(arch("qwen3moe"));
    q.kv_u32("qwen3moe.attention.sliding_window", 16);
    EXPECT_EQ(load(q).n_swa, 0);
    EXPECT_FALSE(load(q).is_swa(0));
}

// attention.sliding_window_pattern as llama.cpp reads it: 0 makes every
// layer slide, an array gives each layer's own flag (not one period).
TEST(HParams, SlidingWindowPatternZeroAndPerLayerFlags) {
    TinyMoe m = arch("gpt-oss");
    m.n_layer = 4;
    GgufBuilder b = moe::test::tiny_moe(m);
    b.kv_u32("gpt-oss.attention.sliding_window", 16).kv_u32("gpt-oss.attention.sliding_window_pattern", 0);
    HParams hp = load(b);
    for (int32_t il = 0; il < 4; ++il) EXPECT_TRUE(hp.is_swa(il)) << il;
    // Equal entries are flags too: all 2 means every layer slides, not a period of 2.
    b.kv_array_u32("gpt-oss.attention.sliding_window_pattern", {2, 2, 2, 2});
    hp = load(b);
    for (int32_t il = 0; il < 4; ++il) EXPECT_TRUE(hp.is_swa(il)) << il;
    b.kv_array_u32("gpt-oss.attention.sliding_window_pattern", {0, 1, 1, 0});
    hp = load(b);
    EXPECT_FALSE(hp.is_swa(0));
    EXPECT_TRUE(hp.is_swa(1));
    EXPECT_TRUE(hp.is_swa(2));
    EXPECT_FALSE(hp.is_swa(3));
    b.kv_array_bool("gpt-oss.attention.sliding_window_pattern", {true, false, false, true});
    hp = load(b);
    EXPECT_TRUE(hp.is_swa(0));
    EXPECT_FALSE(hp.is_swa(1));
    EXPECT_TRUE(hp.is_swa(3));
    b.kv_array_u32("gpt-oss.attention.sliding_window_pattern", {1, 0, 1});
    expect_error(b, Status::bad_format, {"gpt-oss.attention.sliding_window_pattern", "3 entries", "4 layers"});
    // A period of 1 leaves every layer full.
    b.kv_u32("gpt-oss.attention.sliding_window_pattern", 1);
    hp = load(b);
    for (int32_t il = 0; il < 4; ++il) EXPECT_FALSE(hp.is_swa(il)) << il;
}

// deepseek2's YaRN: the stored yarn_log_multiplier is 0.1 mscale_all_dim,
// the softmax scale gains mscale^2 with mscale = 1 + 0.1 mscale_all_dim
// ln(factor), over sqrt(qk_nope + qk_rope).
TEST(HParams, Deepseek2LatentAttentionAndYarnScale) {
    TinyMoe m = arch("deepseek2");
    m.n_head_kv = 1;
    GgufBuilder b = moe::test::tiny_moe(m);
    b.kv_u32("deepseek2.attention.kv_lora_rank", 16)
        .kv_u32("deepseek2.rope.dimension_count", 8)
        .kv_u32("deepseek2.attention.key_length", 24)
        .kv_u32("deepseek2.attention.value_length", 16)
        .kv_u32("deepseek2.attention.key_length_mla", 20)
        .kv_u32("deepseek2.attention.value_length_mla", 12)
        .kv_u32("deepseek2.expert_feed_forward_length", 32);
    HParams hp = load(b);
    EXPECT_TRUE(hp.latent_attention());
    EXPECT_FLOAT_EQ(hp.attention_scale(), 1.0f / std::sqrt(20.0f));
    b.kv_string("deepseek2.rope.scaling.type", "yarn")
        .kv_f32("deepseek2.rope.scaling.factor", 40.0f)
        .kv_u32("deepseek2.rope.scaling.original_context_length", 64)
        .kv_f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.0707f);
    hp = load(b);
    EXPECT_TRUE(hp.rope_yarn && hp.yarn_log_multiplier_given);
    const double mscale = 1.0 + 0.1 * 0.707 * std::log(40.0);
    EXPECT_NEAR(hp.attention_scale(), mscale * mscale / std::sqrt(20.0), 1e-6);
    // rope.scaling.attn_factor a: llama.cpp's mscale is a times YaRN's, squared in the scale.
    b.kv_f32("deepseek2.rope.scaling.attn_factor", 1.5f);
    hp = load(b);
    EXPECT_FLOAT_EQ(hp.rope_attn_factor, 1.5f);
    EXPECT_NEAR(hp.attention_scale(), 1.5 * 1.5 * mscale * mscale / std::sqrt(20.0), 1e-6);
    b.remove_kv("deepseek2.rope.scaling.type").remove_kv("deepseek2.rope.scaling.factor");
    EXPECT_NEAR(load(b).attention_scale(), 1.5 * 1.5 / std::sqrt(20.0), 1e-6);  // without YaRN: a^2 alone
    b.kv_f32("deepseek2.rope.scaling.yarn_log_multiplier", -1.0f);
    expect_error(b, Status::bad_format, {"deepseek2.rope.scaling.yarn_log_multiplier"});
}

// Without key_length_mla (files with one attn_kv_b a layer, converted before
// the absorbed form) the keys describe multi-head attention; the sizes read
// are the absorbed form's all the same, as the split layout's keys give them.
TEST(HParams, Deepseek2WithoutKeyLengthMlaHasOneAttnKvBALayer) {
    TinyMoe m = arch("deepseek2");
    m.n_head_kv = m.n_head;
    GgufBuilder b = moe::test::tiny_moe(m);
    b.kv_u32("deepseek2.attention.kv_lora_rank", 16)
        .kv_u32("deepseek2.rope.dimension_count", 8)
        .kv_u32("deepseek2.attention.key_length", 20)    // qk_nope 12 + qk_rope 8
        .kv_u32("deepseek2.attention.value_length", 12)  // v_head
        .kv_u32("deepseek2.expert_feed_forward_length", 32);
    HParams hp = load(b);
    EXPECT_TRUE(hp.latent_attention() && hp.joint_kv_b);
    EXPECT_EQ(hp.n_head_kv, 1);
    EXPECT_EQ(hp.head_dim_k, 24);  // kv_lora_rank + rope: the cached row
    EXPECT_EQ(hp.head_dim_v, 16);
    EXPECT_EQ(hp.head_dim_k_mla, 20);
    EXPECT_EQ(hp.head_dim_v_mla, 12);
    EXPECT_FLOAT_EQ(hp.attention_scale(), 1.0f / std::sqrt(20.0f));
    // The split layout's keys of the same model read the same.
    GgufBuilder split = b;
    split.kv_u32("deepseek2.attention.head_count_kv", 1)
        .kv_u32("deepseek2.attention.key_length", 24)
        .kv_u32("deepseek2.attention.value_length", 16)
        .kv_u32("deepseek2.attention.key_length_mla", 20)
        .kv_u32("deepseek2.attention.value_length_mla", 12);
    const HParams absorbed = load(split);
    EXPECT_FALSE(absorbed.joint_kv_b);
    EXPECT_EQ(absorbed.n_head_kv, hp.n_head_kv);
    EXPECT_EQ(absorbed.head_dim_k, hp.head_dim_k);
    EXPECT_EQ(absorbed.head_dim_v, hp.head_dim_v);
    // One key/value head per query head, and a key longer than its rotary part.
    b.kv_u32("deepseek2.attention.head_count_kv", 2);
    expect_error(b, Status::bad_format, {"deepseek2.attention.key_length_mla", "head_count_kv = head_count (2 vs 4)"});
    b.kv_u32("deepseek2.attention.head_count_kv", 4).kv_u32("deepseek2.attention.key_length", 8);
    expect_error(b, Status::bad_format, {"key_length > rope.dimension_count (8 vs 8)"});
}

// A hostile kv_lora_rank near INT32_MAX: kv_lora_rank + rope.dimension_count
// is past 32 bits, so no key_length (a positive 32-bit value) can equal it.
// Open refuses the file naming the sizes, with both sums taken in 64 bits (a
// 32-bit one would overflow, which the UBSan build aborts on).
TEST(HParams, Deepseek2KvLoraRankNearInt32MaxIsRefusedAtOpen) {
    constexpr uint32_t kRank = INT32_MAX - 31, kRot = 64;
    static_assert(uint64_t(kRank) + kRot > uint64_t(INT32_MAX));
    TinyMoe m = arch("deepseek2");
    m.n_head = m.n_head_kv = 1;  // rows of one head: the attention rows check passes
    const std::string dir = moe::test::scratch_dir();
    auto open_error = [&](const GgufBuilder &b, const std::string &name) {
        const std::string path = dir + "/" + name;
        b.write(path);
        try {
            moe::Model::open(path);
        } catch (const Error &e) {
            EXPECT_EQ(e.status(), Status::bad_format) << e.what();
            return std::string(e.what());
        }
        ADD_FAILURE() << name << " opened";
        return std::string();
    };
    // The absorbed layout: key_length as large as a key can be, still short of the sum.
    GgufBuilder b = moe::test::tiny_moe(m);
    b.kv_u32("deepseek2.attention.kv_lora_rank", kRank)
        .kv_u32("deepseek2.rope.dimension_count", kRot)
        .kv_u32("deepseek2.attention.key_length", uint32_t(INT32_MAX))
        .kv_u32("deepseek2.attention.value_length", kRank)
        .kv_u32("deepseek2.attention.key_length_mla", 192)
        .kv_u32("deepseek2.attention.value_length_mla", 128)
        .kv_u32("deepseek2.expert_feed_forward_length", 32);
    const std::string absorbed = open_error(b, "absorbed.gguf");
    const std::string sizes = "key_length = kv_lora_rank + rope.dimension_count (" + std::to_string(INT32_MAX) +
                              " vs " + std::to_string(kRank) + " + " + std::to_string(kRot) + ")";
    EXPECT_NE(absorbed.find(sizes), std::string::npos) << absorbed;
    // One attn_kv_b a layer (no key_length_mla): the cached row kv_lora_rank + rope is refused too.
    b.remove_kv("deepseek2.attention.key_length_mla")
        .remove_kv("deepseek2.attention.value_length_mla")
        .kv_u32("deepseek2.attention.key_length", 192)
        .kv_u32("deepseek2.attention.value_length", 128);
    const std::string joint = open_error(b, "joint.gguf");
    const std::string rows = "latent attention rows of 1 heads x (" + std::to_string(kRank) + " + " +
                             std::to_string(kRot) + ") exceed 32 bits";
    EXPECT_NE(joint.find(rows), std::string::npos) << joint;
}

TEST(HParams, AVocabSizeThatMatchesTheEmbeddingIsAccepted) {
    GgufBuilder b = moe::test::tiny_moe(arch("qwen3moe"));
    b.kv_u32("qwen3moe.vocab_size", 64);
    EXPECT_EQ(load(b).n_vocab, 64);
}

TEST(HParams, Qwen3MoeDefaultsAndFallbacks) {
    TinyMoe m = arch("qwen3moe");
    m.tied_output = true;
    GgufBuilder b = moe::test::tiny_moe(m);
    b.remove_kv("qwen3moe.attention.head_count_kv").remove_kv("qwen3moe.rope.freq_base");
    b.remove_kv("qwen3moe.expert_feed_forward_length").kv_u32("qwen3moe.feed_forward_length", 96);
    const HParams hp = load(b);
    EXPECT_EQ(hp.n_head_kv, 4);                 // defaults to n_head
    EXPECT_EQ(hp.head_dim_k, 8);                // n_embd / n_head
    EXPECT_EQ(hp.head_dim_v, 8);
    EXPECT_FLOAT_EQ(hp.rope_freq_base, 10000.0f);
    EXPECT_EQ(hp.n_ff, 96);
    EXPECT_EQ(hp.n_ff_expert, 48);              // feed_forward_length / expert_used_count
    b.remove_kv("qwen3moe.feed_forward_length");
    expect_error(b, Status::bad_format, {"qwen3moe.expert_feed_forward_length", "qwen3moe.feed_forward_length"});
}

TEST(HParams, LlamaWithExperts) {
    TinyMoe m = arch("llama");
    m.tied_output = true;
    GgufBuilder b = moe::test::tiny_moe(m);
    b.kv_string("llama.rope.scaling.type", "linear").kv_f32("llama.rope.scaling.factor", 4.0f);
    b.kv_u32("llama.rope.dimension_count", 4);
    const HParams hp = load(b);
    EXPECT_EQ(hp.n_ff, 32);
    EXPECT_EQ(hp.n_ff_expert, 32);
    EXPECT_EQ(hp.n_rot, 4);
    EXPECT_FLOAT_EQ(hp.rope_freq_scale, 0.25f);
    b.remove_kv("llama.feed_forward_length");
    expect_error(b, Status::bad_format, {"llama.feed_forward_length"});
}

TEST(HParams, DenseLlamaIsUnsupported) {
    GgufBuilder b = moe::test::tiny_moe(arch("llama"));
    b.remove_kv("llama.expert_count");
    expect_error(b, Status::unsupported, {"llama.expert_count", "dense"});
    b.kv_u32("llama.expert_count", 0);
    expect_error(b, Status::unsupported, {"llama.expert_count"});
}

TEST(HParams, Olmoe) {
    TinyMoe m = arch("olmoe");
    const HParams hp = load(moe::test::tiny_moe(m));
    EXPECT_EQ(hp.n_ff_expert, 32);
    EXPECT_EQ(hp.n_head_kv, hp.n_head);
}

TEST(HParams, Qwen2Moe) {
    TinyMoe m = arch("qwen2moe");
    m.n_ff_shared = 48;
    GgufBuilder b = moe::test::tiny_moe(m);
    HParams hp = load(b);
    EXPECT_EQ(hp.n_ff_expert, 32);
    EXPECT_EQ(hp.n_ff_shared, 48);
    // The shared size falls back to feed_forward_length.
    b.remove_kv("qwen2moe.expert_shared_feed_forward_length").kv_u32("qwen2moe.feed_forward_length", 64);
    hp = load(b);
    EXPECT_EQ(hp.n_ff_shared, 64);
    // expert_feed_forward_length has no fallback.
    b.remove_kv("qwen2moe.expert_feed_forward_length");
    expect_error(b, Status::bad_format, {"qwen2moe.expert_feed_forward_length"});
}

TEST(HParams, PerLayerArrays) {
    GgufBuilder b = moe::test::tiny_moe(arch("qwen3moe"));
    b.kv_array_u32("qwen3moe.attention.head_count_kv", {2, 2});
    EXPECT_EQ(load(b).n_head_kv, 2);
    b.kv_array_u32("qwen3moe.attention.head_count_kv", {2, 4});
    expect_error(b, Status::unsupported, {"qwen3moe.attention.head_count_kv", "differs between layers"});
    b.kv_array_u32("qwen3moe.attention.head_count_kv", {2, 2, 2});
    expect_error(b, Status::bad_format, {"3 entries for 2 layers"});
    b.kv_array_u32("qwen3moe.attention.head_count_kv", {});
    expect_error(b, Status::bad_format, {"empty array"});
}

TEST(HParams, UnknownArchitecture) {
    GgufBuilder b = moe::test::tiny_moe(arch("qwen3moe"));
    b.kv_string("general.architecture", "grok");
    expect_error(b, Status::unsupported, {"'grok'", "not supported"});
    b.remove_kv("general.architecture");
    expect_error(b, Status::bad_format, {"general.architecture"});
    b.kv_u32("general.architecture", 3);
    expect_error(b, Status::bad_format, {"general.architecture", "STRING"});
}

TEST(HParams, ValidationErrors) {
    struct Case {
        const char *what;
        std::function<void(GgufBuilder &)> edit;
        Status status;
        const char *fragment;
    };
    const std::vector<Case> cases = {
        {"missing block_count", [](GgufBuilder &b) { b.remove_kv("qwen3moe.block_count"); }, Status::bad_format,
         "required key qwen3moe.block_count"},
        {"zero embd", [](GgufBuilder &b) { b.kv_u32("qwen3moe.embedding_length", 0); }, Status::bad_format,
         "qwen3moe.embedding_length is 0"},
        {"huge embd", [](GgufBuilder &b) { b.kv_u32("qwen3moe.embedding_length", 0x80000000u); }, Status::bad_format,
         "qwen3moe.embedding_length"},
        {"negative heads", [](GgufBuilder &b) { b.kv_i32("qwen3moe.attention.head_count", -4); }, Status::bad_format,
         "qwen3moe.attention.head_count"},
        {"float block_count", [](GgufBuilder &b) { b.kv_f32("qwen3moe.block_count", 2.0f); }, Status::bad_format,
         "qwen3moe.block_count"},
        {"gqa", [](GgufBuilder &b) { b.kv_u32("qwen3moe.attention.head_count_kv", 3); }, Status::bad_format,
         "head_count_kv 3"},
        {"used > experts", [](GgufBuilder &b) { b.kv_u32("qwen3moe.expert_used_count", 5); }, Status::bad_format,
         "expert_used_count 5 exceeds expert_count 4"},
        {"used = 0", [](GgufBuilder &b) { b.kv_u32("qwen3moe.expert_used_count", 0); }, Status::bad_format,
         "qwen3moe.expert_used_count"},
        {"missing experts", [](GgufBuilder &b) { b.remove_kv("qwen3moe.expert_count"); }, Status::bad_format,
         "qwen3moe.expert_count is missing"},
        {"too many layers", [](GgufBuilder &b) { b.kv_u32("qwen3moe.block_count", 257); }, Status::unsupported,
         "at most 256 layers"},
        {"missing eps", [](GgufBuilder &b) { b.remove_kv("qwen3moe.attention.layer_norm_rms_epsilon"); },
         Status::bad_format, "layer_norm_rms_epsilon"},
        {"bad eps", [](GgufBuilder &b) { b.kv_f32("qwen3moe.attention.layer_norm_rms_epsilon", -1.0f); },
         Status::bad_format, "layer_norm_rms_epsilon"},
        {"bad rope base", [](GgufBuilder &b) { b.kv_f32("qwen3moe.rope.freq_base", 0.0f); }, Status::bad_format,
         "rope.freq_base"},
        {"tiny rope base", [](GgufBuilder &b) { b.kv_f32("qwen3moe.rope.freq_base", 1e-45f); }, Status::bad_format,
         "qwen3moe.rope.freq_base 1.4013e-45 with qwen3moe.rope.scaling.factor 1 makes the rotary angles overflow"},
        {"tiny scaling factor", [](GgufBuilder &b) {
             b.kv_string("qwen3moe.rope.scaling.type", "linear").kv_f32("qwen3moe.rope.scaling.factor", 1e-45f);
         }, Status::bad_format, "rope.scaling.factor 1.4013e-45 makes the rotary angles overflow"},
        {"odd n_rot", [](GgufBuilder &b) { b.kv_u32("qwen3moe.rope.dimension_count", 7); }, Status::bad_format,
         "rope.dimension_count 7"},
        {"n_rot > head", [](GgufBuilder &b) { b.kv_u32("qwen3moe.rope.dimension_count", 10); }, Status::bad_format,
         "rope.dimension_count 10"},
        {"longrope", [](GgufBuilder &b) { b.kv_string("qwen3moe.rope.scaling.type", "longrope"); },
         Status::unsupported, "'longrope'"},
        {"heads not dividing", [](GgufBuilder &b) {
             b.kv_u32("qwen3moe.attention.head_count", 5).kv_u32("qwen3moe.attention.head_count_kv", 5);
         }, Status::bad_format, "not a multiple of head_count 5"},
        {"attention rows beyond 32 bits", [](GgufBuilder &b) { b.kv_u32("qwen3moe.attention.key_length", 0x40000000u); },
         Status::bad_format, "attention rows of 4 heads x 1073741824"},
        {"vocab_size above the embedding rows", [](GgufBuilder &b) { b.kv_u32("qwen3moe.vocab_size", 65); },
         Status::bad_format, "qwen3moe.vocab_size is 65 but token_embd.weight has 64 rows"},
        {"vocab_size below the embedding rows", [](GgufBuilder &b) { b.kv_u32("qwen3moe.vocab_size", 63); },
         Status::bad_format, "qwen3moe.vocab_size is 63 but token_embd.weight has 64 rows"},
        {"vocab_size 0", [](GgufBuilder &b) { b.kv_u32("qwen3moe.vocab_size", 0); }, Status::bad_format,
         "qwen3moe.vocab_size is 0"},
        {"no token_embd", [](GgufBuilder &b) { b.remove_tensor("token_embd.weight"); }, Status::bad_format,
         "token_embd.weight is missing"},
        {"token_embd width", [](GgufBuilder &b) {
             b.remove_tensor("token_embd.weight").tensor_random("token_embd.weight", moe::GgmlType::F32, {16, 8}, 1);
         }, Status::bad_format, "token_embd.weight has shape [16, 8"},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        GgufBuilder b = moe::test::tiny_moe(arch("qwen3moe"));
        c.edit(b);
        expect_error(b, c.status, {c.fragment});
    }
}

// rope.scaling.attn_factor is applied (read for every architecture, as
// llama.cpp does); yarn_ext_factor is refused unless it is the mix the scaling
// type implies: a silently ignored key would change every logit.
TEST(HParams, RopeAttnFactorIsReadAndOtherYarnMixesAreRefused) {
    GgufBuilder b = moe::test::tiny_moe(arch("gpt-oss"));
    b.kv_u32("gpt-oss.attention.sliding_window", 16)
        .kv_string("gpt-oss.rope.scaling.type", "yarn")
        .kv_f32("gpt-oss.rope.scaling.factor", 32.0f);
    EXPECT_FLOAT_EQ(load(b).rope_attn_factor, 1.0f);
    b.kv_f32("gpt-oss.rope.scaling.attn_factor", 1.0f).kv_f32("gpt-oss.rope.scaling.yarn_ext_factor", 1.0f);
    EXPECT_TRUE(load(b).rope_yarn);
    b.kv_f32("gpt-oss.rope.scaling.yarn_ext_factor", -1.0f);  // llama.cpp's "from the scaling type"
    EXPECT_TRUE(load(b).rope_yarn);
    b.kv_f32("gpt-oss.rope.scaling.attn_factor", 0.5f);
    HParams hp = load(b);
    EXPECT_FLOAT_EQ(hp.rope_attn_factor, 0.5f);
    EXPECT_FLOAT_EQ(hp.attention_scale(), 1.0f / std::sqrt(float(hp.head_dim_k)));  // only deepseek2's scale takes it
    for (const float bad : {0.0f, -1.0f, std::nanf("")}) {
        b.kv_f32("gpt-oss.rope.scaling.attn_factor", bad);
        expect_error(b, Status::bad_format, {"gpt-oss.rope.scaling.attn_factor", "positive finite"});
    }
    b.kv_f32("gpt-oss.rope.scaling.attn_factor", 1.0f).kv_f32("gpt-oss.rope.scaling.yarn_ext_factor", 0.5f);
    expect_error(b, Status::unsupported, {"gpt-oss.rope.scaling.yarn_ext_factor", "0.5"});
    // Without YaRN the mix is 0.
    GgufBuilder q = moe::test::tiny_moe(arch("qwen3moe"));
    q.kv_f32("qwen3moe.rope.scaling.yarn_ext_factor", 0.0f);
    EXPECT_FALSE(load(q).rope_yarn);
    q.kv_f32("qwen3moe.rope.scaling.yarn_ext_factor", 1.0f);
    expect_error(q, Status::unsupported, {"qwen3moe.rope.scaling.yarn_ext_factor", "rope.scaling.type yarn"});
    // llama.cpp reads the beta keys only for other architectures: left at their defaults.
    q.kv_f32("qwen3moe.rope.scaling.yarn_ext_factor", 0.0f).kv_f32("qwen3moe.rope.scaling.yarn_beta_fast", 8.0f);
    EXPECT_FALSE(load(q).rope_yarn);
}
