#include "model/hparams.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "common/error.hpp"
#include "model/rope.hpp"
#include "moestream.h"

namespace moe {
namespace {

class KeyReader;
using ReadOwnKeys = void (*)(const gguf::GgufFile &file, const KeyReader &keys, HParams &hp);
void read_deepseek2(const gguf::GgufFile &file, const KeyReader &keys, HParams &hp);

// How each supported architecture's metadata is read (facts sheet, section
// 3.5). What the forward pass does differently (RoPE pairing, routing, a tied
// output) is the architecture's ArchTraits (src/model/archs/), not here.
struct ArchRules {
    const char *name;
    enum class ExpertFf { expert_key, expert_key_or_ff_per_used, ff_key } expert_ff;
    bool shared_expert;
    int32_t swa_pattern = 0;  // default sliding-window pattern; 0: no sliding window
    // Reads the keys only this architecture has, after the common ones and
    // RoPE (null: none).
    ReadOwnKeys read_own_keys = nullptr;
};

constexpr ArchRules kArchs[] = {
    {"qwen3moe", ArchRules::ExpertFf::expert_key_or_ff_per_used, false},
    {"llama", ArchRules::ExpertFf::ff_key, false},
    {"olmoe", ArchRules::ExpertFf::ff_key, false},
    {"qwen2moe", ArchRules::ExpertFf::expert_key, true},
    {"gpt-oss", ArchRules::ExpertFf::expert_key, false, 2},
    {.name = "deepseek2", .expert_ff = ArchRules::ExpertFf::expert_key, .shared_expert = false,
     .read_own_keys = read_deepseek2},
};

const ArchRules *find_arch(const std::string &arch) {
    for (const ArchRules &a : kArchs)
        if (arch == a.name) return &a;
    return nullptr;
}

// Reads "<arch>.<suffix>" keys with the file's path in every message.
class KeyReader {
public:
    KeyReader(const gguf::GgufFile &f, const std::string &arch) : f_(f), prefix_(arch + ".") {}

    std::string key(const char *suffix) const { return prefix_ + suffix; }
    const std::string &path() const { return f_.path(); }

    // A positive int32 (scalar, or a per-layer array whose entries are all equal).
    std::optional<int32_t> positive(const char *suffix) const {
        const std::string k = key(suffix);
        const std::vector<uint32_t> values = f_.get_u32_or_array(k);
        if (values.empty()) {
            if (f_.has(k))
                fail(Status::bad_format, "%s: %s is an empty array", path().c_str(), k.c_str());
            return std::nullopt;
        }
        for (uint32_t v : values)
            if (v != values[0])
                fail(Status::unsupported, "%s: %s differs between layers (%u vs %u); per-layer sizes are not supported",
                     path().c_str(), k.c_str(), values[0], v);
        if (values.size() > 1 && n_layer_ > 0 && values.size() != size_t(n_layer_))
            fail(Status::bad_format, "%s: %s has %zu entries for %d layers", path().c_str(), k.c_str(),
                 values.size(), n_layer_);
        if (values[0] == 0 || values[0] > uint32_t(std::numeric_limits<int32_t>::max()))
            fail(Status::bad_format, "%s: %s is %u (must be a positive 32-bit value)", path().c_str(), k.c_str(),
                 values[0]);
        return static_cast<int32_t>(values[0]);
    }
    int32_t required(const char *suffix) const {
        const auto v = positive(suffix);
        if (!v) fail(Status::bad_format, "%s: required key %s is missing", path().c_str(), key(suffix).c_str());
        return *v;
    }
    // A finite float > 0.
    std::optional<float> positive_float(const char *suffix) const {
        const std::string k = key(suffix);
        if (!f_.has(k)) return std::nullopt;
        const float v = f_.get_f32(k, 0.0f);
        if (!std::isfinite(v) || v <= 0.0f)
            fail(Status::bad_format, "%s: %s is %g (must be a positive finite number)", path().c_str(), k.c_str(),
                 static_cast<double>(v));
        return v;
    }
    void set_n_layer(int32_t n) { n_layer_ = n; }

private:
    const gguf::GgufFile &f_;
    std::string prefix_;
    int32_t n_layer_ = 0;
};

struct RopeScaling {
    float factor = 1.0f;
    bool yarn = false;
};

// The RoPE scaling factor and kind; a factor of 1 without scaling (type
// "none", no factor, or a factor of 0, which some converters write to mean none).
RopeScaling rope_scaling(const gguf::GgufFile &file, const KeyReader &keys) {
    const std::string type = file.get_string(keys.key("rope.scaling.type"), "");
    if (!type.empty() && type != "none" && type != "linear" && type != "yarn")
        fail(Status::unsupported, "%s: rope scaling type '%.32s' is not supported", keys.path().c_str(),
             type.c_str());
    const std::string k = keys.key("rope.scaling.factor");
    const float factor = type == "none" ? 0.0f : file.get_f32(k, 0.0f);
    if (factor == 0.0f) return {};
    if (!std::isfinite(factor) || factor < 0.0f)
        fail(Status::bad_format, "%s: %s is %g", keys.path().c_str(), k.c_str(), static_cast<double>(factor));
    return {factor, type == "yarn"};
}

// rope.scaling.yarn_ext_factor (llama.cpp: -1 = derived from the scaling
// type) sets the YaRN mix; this engine applies the mix the scaling type
// implies, so another value is refused, never silently ignored.
// rope.scaling.yarn_beta_fast / _slow are left to their defaults 32 / 1:
// llama.cpp reads them only for other architectures.
void refuse_other_yarn_mix(const gguf::GgufFile &file, const KeyReader &keys, bool yarn) {
    const std::string k = keys.key("rope.scaling.yarn_ext_factor");
    const float used = yarn ? 1.0f : 0.0f;
    if (!file.has(k)) return;
    const float v = file.get_f32(k, used);
    if (v != used && v != -1.0f)
        fail(Status::unsupported, "%s: %s is %g; only %g is supported (%s)", keys.path().c_str(), k.c_str(),
             static_cast<double>(v), static_cast<double>(used),
             yarn ? "YaRN is applied fully, as for rope.scaling.type yarn" : "YaRN needs rope.scaling.type yarn");
}

// A non-negative u32 key (absent: fallback) that must also fit an int32.
int32_t count_or(const gguf::GgufFile &file, const KeyReader &keys, const char *suffix, int32_t fallback) {
    const std::string k = keys.key(suffix);
    if (!file.has(k)) return fallback;
    const uint32_t v = file.get_u32(k, 0);
    if (v > uint32_t(std::numeric_limits<int32_t>::max()))
        fail(Status::bad_format, "%s: %s is %u", keys.path().c_str(), k.c_str(), v);
    return int32_t(v);
}

// attention.sliding_window_pattern as llama.cpp reads it, into the per-layer
// table: a scalar period (swa_layers_of_period; absent: the architecture's
// default `fallback`), or an array of n_layer per-layer flags (integer or
// BOOL, nonzero = the layer slides).
void read_swa_pattern(const gguf::GgufFile &file, const KeyReader &keys, HParams &hp, int32_t fallback) {
    const std::string k = keys.key("attention.sliding_window_pattern");
    const std::optional<gguf::Value> v = file.find(k);
    if (!v || v->type != gguf::ValueType::ARRAY) {
        const uint32_t n = v ? file.get_u32(k, 0) : uint32_t(fallback);
        if (n > uint32_t(std::numeric_limits<int32_t>::max()))
            fail(Status::bad_format, "%s: %s is %u", keys.path().c_str(), k.c_str(), n);
        hp.swa_layers = swa_layers_of_period(hp.n_layer, int32_t(n));
        return;
    }
    if (v->count != uint64_t(hp.n_layer))
        fail(Status::bad_format, "%s: %s has %llu entries for %d layers", keys.path().c_str(), k.c_str(),
             static_cast<unsigned long long>(v->count), hp.n_layer);
    hp.swa_layers.assign(size_t(hp.n_layer), 0);
    if (v->elem_type == gguf::ValueType::BOOL) {
        for (int32_t il = 0; il < hp.n_layer; ++il) hp.swa_layers[size_t(il)] = v->array_data[il] != 0;
    } else {
        const std::vector<uint32_t> flags = file.get_u32_or_array(k);  // bad_format unless integers
        for (int32_t il = 0; il < hp.n_layer; ++il) hp.swa_layers[size_t(il)] = flags[size_t(il)] != 0;
    }
}

// deepseek2's own keys: leading dense layers, routing variants, ungated
// shared experts and latent attention in the absorbed form, whose cached row
// is kv_lora_rank latent values then the rotary part (key_length =
// kv_lora_rank + rope.dimension_count, value_length = kv_lora_rank, one KV head).
void read_deepseek2(const gguf::GgufFile &file, const KeyReader &keys, HParams &hp) {
    const char *path = keys.path().c_str();
    hp.n_layer_dense_lead = count_or(file, keys, "leading_dense_block_count", 0);
    if (hp.n_layer_dense_lead > hp.n_layer)
        fail(Status::bad_format, "%s: %s %d exceeds block_count %d", path, keys.key("leading_dense_block_count").c_str(),
             hp.n_layer_dense_lead, hp.n_layer);
    if (hp.n_layer_dense_lead > 0 && hp.n_ff == 0)
        fail(Status::bad_format, "%s: required key %s (dense layers) is missing", path,
             keys.key("feed_forward_length").c_str());
    const int32_t n_expert_shared = count_or(file, keys, "expert_shared_count", 0);
    if (int64_t(hp.n_ff_expert) * n_expert_shared > INT32_MAX)
        fail(Status::bad_format, "%s: %d shared experts of %d rows exceed 32 bits", path, n_expert_shared,
             hp.n_ff_expert);
    hp.n_ff_shared = hp.n_ff_expert * n_expert_shared;

    switch (count_or(file, keys, "expert_gating_func", 0)) {
    case 0:  // absent or "none": softmax, as llama.cpp
    case 1: hp.gating_func = GatingFunc::softmax; break;
    case 2: hp.gating_func = GatingFunc::sigmoid; break;
    default:
        fail(Status::unsupported, "%s: %s %u is not supported (1 softmax, 2 sigmoid)", path,
             keys.key("expert_gating_func").c_str(), file.get_u32(keys.key("expert_gating_func"), 0));
    }
    hp.expert_weights_norm = file.get_bool(keys.key("expert_weights_norm"), false);
    hp.expert_weights_scale = file.get_f32(keys.key("expert_weights_scale"), 0.0f);
    if (!std::isfinite(hp.expert_weights_scale) || hp.expert_weights_scale < 0.0f)
        fail(Status::bad_format, "%s: %s is %g", path, keys.key("expert_weights_scale").c_str(),
             static_cast<double>(hp.expert_weights_scale));
    hp.n_expert_group = count_or(file, keys, "expert_group_count", 0);
    hp.n_expert_group_used = count_or(file, keys, "expert_group_used_count", 0);
    if (hp.n_expert_group > 1) {
        const int32_t per = hp.n_expert / hp.n_expert_group;
        if (hp.n_expert % hp.n_expert_group != 0 || hp.n_expert_group_used < 1 ||
            hp.n_expert_group_used > hp.n_expert_group || hp.n_expert_used > per * hp.n_expert_group_used)
            fail(Status::bad_format,
                 "%s: %d experts in %d groups of which %d are used cannot give %d experts per token", path,
                 hp.n_expert, hp.n_expert_group, hp.n_expert_group_used, hp.n_expert_used);
    }

    // The attention scale (llama.cpp deepseek2.cpp): mscale^2, mscale being
    // rope.scaling.attn_factor times, under YaRN, 1 + 0.1 mscale_all_dim
    // ln(factor) (1 without scaling, factor 1); the file keeps 0.1 mscale_all_dim.
    const std::string log_mul = keys.key("rope.scaling.yarn_log_multiplier");
    float mscale_all_dim = 0.0f;
    if (file.has(log_mul)) {
        const float stored = file.get_f32(log_mul, 0.0f);
        if (!std::isfinite(stored) || stored < 0.0f)
            fail(Status::bad_format, "%s: %s is %g", path, log_mul.c_str(), static_cast<double>(stored));
        hp.yarn_log_multiplier_given = true;
        mscale_all_dim = stored / 0.1f;
    }
    const float yarn_mscale = hp.rope_yarn && hp.rope_freq_scale < 1.0f
                                  ? 1.0f + 0.1f * mscale_all_dim * std::log(1.0f / hp.rope_freq_scale)
                                  : 1.0f;
    const float mscale = hp.rope_attn_factor * yarn_mscale;
    hp.kq_scale_factor = mscale * mscale;

    hp.kv_lora_rank = keys.required("attention.kv_lora_rank");
    hp.q_lora_rank = keys.positive("attention.q_lora_rank").value_or(0);
    if (const auto k_mla = keys.positive("attention.key_length_mla")) {
        hp.head_dim_k_mla = *k_mla;
        hp.head_dim_v_mla = keys.required("attention.value_length_mla");
    } else {
        // Converted before the absorbed form: the file describes attention as
        // llama.cpp then ran it, one key/value head per query head of
        // key_length = qk_nope + qk_rope and value_length = v_head, with one
        // attn_kv_b a layer. It runs absorbed all the same (kv_b_split.hpp),
        // so the sizes become the absorbed form's.
        if (hp.n_head_kv != hp.n_head || hp.n_rot >= hp.head_dim_k)
            fail(Status::bad_format,
                 "%s: without %s (one attn_kv_b a layer) attention needs head_count_kv = head_count (%d vs %d) "
                 "and key_length > rope.dimension_count (%d vs %d)",
                 path, keys.key("attention.key_length_mla").c_str(), hp.n_head_kv, hp.n_head, hp.head_dim_k,
                 hp.n_rot);
        const int64_t cached_row = int64_t(hp.kv_lora_rank) + hp.n_rot;
        if (int64_t(hp.n_head) * cached_row > INT32_MAX)
            fail(Status::bad_format, "%s: latent attention rows of %d heads x (%d + %d) exceed 32 bits", path,
                 hp.n_head, hp.kv_lora_rank, hp.n_rot);
        hp.head_dim_k_mla = hp.head_dim_k;
        hp.head_dim_v_mla = hp.head_dim_v;
        hp.n_head_kv = 1;
        hp.head_dim_k = int32_t(cached_row);
        hp.head_dim_v = hp.kv_lora_rank;
        hp.joint_kv_b = true;
    }
    if (hp.n_head_kv != 1 || int64_t(hp.head_dim_k) != int64_t(hp.kv_lora_rank) + hp.n_rot || hp.head_dim_v != hp.kv_lora_rank ||
        hp.n_rot >= hp.head_dim_k_mla)
        fail(Status::bad_format,
             "%s: latent attention needs head_count_kv 1 (is %d), key_length = kv_lora_rank + rope.dimension_count "
             "(%d vs %d + %d), value_length = kv_lora_rank (%d vs %d) and key_length_mla > rope.dimension_count "
             "(%d vs %d)",
             path, hp.n_head_kv, hp.head_dim_k, hp.kv_lora_rank, hp.n_rot, hp.head_dim_v, hp.kv_lora_rank,
             hp.head_dim_k_mla, hp.n_rot);
}

}  // namespace

std::vector<uint8_t> swa_layers_of_period(int32_t n_layer, int32_t period) {
    std::vector<uint8_t> slides(size_t(std::max(n_layer, 0)), 0);
    for (int32_t il = 0; il < n_layer; ++il) slides[size_t(il)] = period == 0 || il % period < period - 1;
    return slides;
}

float HParams::attention_scale() const {
    return kq_scale_factor / std::sqrt(float(latent_attention() ? head_dim_k_mla : head_dim_k));
}

HParams HParams::from_gguf(const gguf::GgufFile &file) {
    const std::string &path = file.path();
    HParams hp;
    if (!file.has("general.architecture"))
        fail(Status::bad_format, "%s: general.architecture is missing", path.c_str());
    hp.arch = file.get_string("general.architecture");
    hp.name = file.get_string("general.name");
    const ArchRules *rules = find_arch(hp.arch);
    if (!rules) {
        std::string safe, known;
        for (char c : hp.arch.substr(0, 64)) safe += (c >= 0x20 && c < 0x7f) ? c : '?';
        for (const ArchRules &a : kArchs) known += std::string(known.empty() ? "" : ", ") + a.name;
        fail(Status::unsupported, "%s: architecture '%s' is not supported (supported: %s)", path.c_str(),
             safe.c_str(), known.c_str());
    }

    KeyReader keys(file, hp.arch);
    hp.n_layer = keys.required("block_count");
    if (hp.n_layer > MOESTREAM_MAX_LAYERS)
        fail(Status::unsupported, "%s: %s is %d; at most %d layers are supported", path.c_str(),
             keys.key("block_count").c_str(), hp.n_layer, MOESTREAM_MAX_LAYERS);
    keys.set_n_layer(hp.n_layer);
    hp.n_ctx_train = keys.required("context_length");
    hp.n_embd = keys.required("embedding_length");
    hp.n_head = keys.required("attention.head_count");
    hp.n_head_kv = keys.positive("attention.head_count_kv").value_or(hp.n_head);
    if (hp.n_head % hp.n_head_kv != 0)
        fail(Status::bad_format, "%s: head_count %d is not a multiple of head_count_kv %d", path.c_str(), hp.n_head,
             hp.n_head_kv);

    const auto key_length = keys.positive("attention.key_length");
    const auto value_length = keys.positive("attention.value_length");
    if ((!key_length || !value_length) && hp.n_embd % hp.n_head != 0)
        fail(Status::bad_format, "%s: embedding_length %d is not a multiple of head_count %d and %s is absent",
             path.c_str(), hp.n_embd, hp.n_head, keys.key(key_length ? "attention.value_length" : "attention.key_length").c_str());
    hp.head_dim_k = key_length.value_or(hp.n_embd / hp.n_head);
    hp.head_dim_v = value_length.value_or(hp.n_embd / hp.n_head);
    // Heads x head size is a row of Q, K or V and a KV cache row: 32-bit sizes
    // everywhere downstream, which a product beyond them would wrap.
    if (const int64_t rows = int64_t(hp.n_head) * std::max(hp.head_dim_k, hp.head_dim_v); rows > INT32_MAX)
        fail(Status::bad_format, "%s: attention rows of %d heads x %d exceed 32 bits", path.c_str(), hp.n_head,
             std::max(hp.head_dim_k, hp.head_dim_v));

    // MoE sizes. A llama file without experts is a dense model, which this engine does not run.
    const std::string expert_count_key = keys.key("expert_count");
    if (file.find(expert_count_key) && file.find(expert_count_key)->type != gguf::ValueType::ARRAY &&
        file.get_u32(expert_count_key, 1) == 0)
        fail(Status::unsupported, "%s: %s is 0: dense models are not supported", path.c_str(),
             expert_count_key.c_str());
    const auto n_expert = keys.positive("expert_count");
    if (!n_expert) {
        const std::string &k = expert_count_key;
        fail(hp.arch == "llama" ? Status::unsupported : Status::bad_format,
             "%s: %s is missing%s", path.c_str(), k.c_str(),
             hp.arch == "llama" ? " (dense llama models are not supported)" : "");
    }
    hp.n_expert = *n_expert;
    hp.n_expert_used = keys.required("expert_used_count");
    if (hp.n_expert_used > hp.n_expert)
        fail(Status::bad_format, "%s: expert_used_count %d exceeds expert_count %d", path.c_str(), hp.n_expert_used,
             hp.n_expert);

    hp.n_ff = keys.positive("feed_forward_length").value_or(0);
    switch (rules->expert_ff) {
    case ArchRules::ExpertFf::expert_key:
        hp.n_ff_expert = keys.required("expert_feed_forward_length");
        break;
    case ArchRules::ExpertFf::expert_key_or_ff_per_used:
        if (const auto v = keys.positive("expert_feed_forward_length")) {
            hp.n_ff_expert = *v;
        } else {
            if (hp.n_ff == 0)
                fail(Status::bad_format, "%s: neither %s nor %s is present", path.c_str(),
                     keys.key("expert_feed_forward_length").c_str(), keys.key("feed_forward_length").c_str());
            hp.n_ff_expert = hp.n_ff / hp.n_expert_used;
            if (hp.n_ff_expert == 0)
                fail(Status::bad_format, "%s: feed_forward_length %d / expert_used_count %d is 0", path.c_str(),
                     hp.n_ff, hp.n_expert_used);
        }
        break;
    case ArchRules::ExpertFf::ff_key:
        if (hp.n_ff == 0)
            fail(Status::bad_format, "%s: required key %s is missing", path.c_str(),
                 keys.key("feed_forward_length").c_str());
        hp.n_ff_expert = hp.n_ff;
        break;
    }
    if (rules->shared_expert)
        hp.n_ff_shared = keys.positive("expert_shared_feed_forward_length").value_or(hp.n_ff);

    hp.n_rot = keys.positive("rope.dimension_count").value_or(hp.head_dim_k);
    if (hp.n_rot > hp.head_dim_k || hp.n_rot % 2 != 0)
        fail(Status::bad_format, "%s: rope.dimension_count %d must be even and at most the head size %d",
             path.c_str(), hp.n_rot, hp.head_dim_k);
    hp.rope_freq_base = keys.positive_float("rope.freq_base").value_or(10000.0f);
    const RopeScaling scaling = rope_scaling(file, keys);
    const float scaling_factor = scaling.factor;
    hp.rope_freq_scale = 1.0f / scaling_factor;
    hp.rope_yarn = scaling.yarn;
    hp.rope_n_ctx_orig = keys.positive("rope.scaling.original_context_length").value_or(hp.n_ctx_train);
    refuse_other_yarn_mix(file, keys, hp.rope_yarn);
    // llama.cpp reads this for every architecture and multiplies the cos/sin
    // of every rotation by it (its context's yarn_attn_factor).
    hp.rope_attn_factor = keys.positive_float("rope.scaling.attn_factor").value_or(1.0f);
    // One set of rotation angles serves every layer.
    if (const auto swa_base = keys.positive_float("rope.freq_base_swa"); swa_base && *swa_base != hp.rope_freq_base)
        fail(Status::unsupported, "%s: %s %g differs from %s %g; a separate sliding-window RoPE base is not supported",
             path.c_str(), keys.key("rope.freq_base_swa").c_str(), static_cast<double>(*swa_base),
             keys.key("rope.freq_base").c_str(), static_cast<double>(hp.rope_freq_base));
    if (!rope_angles_finite({hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale, nullptr}))
        fail(Status::bad_format, "%s: %s %g with %s %g makes the rotary angles overflow (not finite)", path.c_str(),
             keys.key("rope.freq_base").c_str(), static_cast<double>(hp.rope_freq_base),
             keys.key("rope.scaling.factor").c_str(), static_cast<double>(scaling_factor));
    if (rules->read_own_keys) rules->read_own_keys(file, keys, hp);

    const auto eps = keys.positive_float("attention.layer_norm_rms_epsilon");
    if (!eps)
        fail(Status::bad_format, "%s: required key %s is missing", path.c_str(),
             keys.key("attention.layer_norm_rms_epsilon").c_str());
    hp.rms_eps = *eps;
    if (rules->swa_pattern > 0) {
        hp.n_swa = keys.required("attention.sliding_window");
        read_swa_pattern(file, keys, hp, rules->swa_pattern);
    }

    // Vocabulary size comes from the embedding table.
    const gguf::TensorInfo *embd = file.tensor("token_embd.weight");
    if (!embd) fail(Status::bad_format, "%s: tensor token_embd.weight is missing", path.c_str());
    if (!embd->fits_dims(2) || embd->ne[0] != hp.n_embd || embd->ne[1] <= 0 ||
        embd->ne[1] > std::numeric_limits<int32_t>::max())
        fail(Status::bad_format, "%s: token_embd.weight has shape [%lld, %lld, %lld, %lld], expected [%d, n_vocab]",
             path.c_str(), static_cast<long long>(embd->ne[0]), static_cast<long long>(embd->ne[1]),
             static_cast<long long>(embd->ne[2]), static_cast<long long>(embd->ne[3]), hp.n_embd);
    hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
    // <arch>.vocab_size, when present, is what llama.cpp sizes its tables by:
    // a file that disagrees with its own embedding would read or write past a
    // row there, and here its logits would not be the vocabulary it names.
    // (output.weight is bound to n_vocab rows, the tokenizer checked against them.)
    if (const auto vocab_size = keys.positive("vocab_size"); vocab_size && *vocab_size != hp.n_vocab)
        fail(Status::bad_format, "%s: %s is %d but token_embd.weight has %d rows (one per token)", path.c_str(),
             keys.key("vocab_size").c_str(), *vocab_size, hp.n_vocab);
    return hp;
}

int32_t context_length(const HParams &hp, int32_t n_ctx) {
    if (n_ctx > 0) return n_ctx;
    return hp.n_ctx_train > 0 ? std::min(hp.n_ctx_train, 4096) : 4096;
}

}  // namespace moe
