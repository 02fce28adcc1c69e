#include "model/generator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <optional>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/ggml_types.hpp"
#include "common/splitmix64.hpp"
#include "gguf/gguf_writer.hpp"
#include "kernels/kernels.hpp"
#include "model/generator_parts.hpp"

namespace moe {
namespace {

using gen::fill_blocks;
using gen::fit;
using gen::Init;
using gen::Rng;
using gen::inv_sqrt;
using gen::quant_mix;
using gen::QuantMix;
using gen::kAttnOutputScale;
using gen::TensorSpec;

// Scales of wide matrices (e.g. Q6_K d = sigma / 879 for n_embd 2048) fall in
// the fp16 subnormal range, so the conversion must keep subnormals.
uint16_t to_half(float f) { return kernels::f32_to_fp16(f); }

float from_half(uint16_t h) { return kernels::fp16_to_f32(h); }

void put_half(uint8_t *p, float f) {
    uint16_t h = to_half(f);
    std::memcpy(p, &h, 2);
}

}  // namespace

namespace gen {

uint64_t Rng::next() { return splitmix64(s); }

void Rng::fill(uint8_t *p, size_t n) {
    while (n >= 8) {
        uint64_t v = next();
        std::memcpy(p, &v, 8);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = next();
        std::memcpy(p, &v, n);
    }
}

Rng tensor_rng(const GeneratorConfig &c, const std::string &name) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
    return Rng(c.seed * 0x2545F4914F6CDD1Dull ^ h);
}

// Blocks of `type` whose dequantised values have mean ~0 and std ~sigma.
// Scales are drawn per block (as real quantisation produces) and quants uniformly.
void fill_blocks(GgmlType type, uint8_t *out, uint64_t n_blocks, float sigma, Rng &rng) {
    switch (type) {
    case GgmlType::Q4_K: {
        // y = d*sc*q - dmin*m with m = sc and dmin = 7.5 d: y = d*sc*(q - 7.5), q uniform in 0..15.
        for (uint64_t b = 0; b < n_blocks; ++b, out += 144) {
            uint8_t sc[8];
            for (int j = 0; j < 8; ++j) sc[j] = static_cast<uint8_t>(32 + (rng.next() & 31));
            const float d = sigma / (47.5f * 4.61f);
            const uint16_t dh = to_half(d);
            put_half(out, d);
            put_half(out + 2, 7.5f * from_half(dh));
            uint8_t *q = out + 4;
            for (int j = 0; j < 4; ++j) {
                q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
                q[j + 4] = q[j];  // m == sc
                q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((sc[j + 4] & 0xF) << 4));
            }
            rng.fill(out + 16, 128);
        }
        break;
    }
    case GgmlType::Q6_K: {
        // y = d*S*(q - 32), q uniform in 0..63 (std 18.5).
        for (uint64_t b = 0; b < n_blocks; ++b, out += 210) {
            rng.fill(out, 192);
            for (int j = 0; j < 16; ++j) out[192 + j] = static_cast<uint8_t>(32 + (rng.next() & 31));
            put_half(out + 208, sigma / (47.5f * 18.5f));
        }
        break;
    }
    case GgmlType::Q2_K: {
        // y = d*sc*q - dmin*m per group of 16 with m = sc and dmin = 1.5 d:
        // y = d*sc*(q - 1.5), q uniform in 0..3 (std 1.118), sc in 8..15 (rms 11.73).
        for (uint64_t b = 0; b < n_blocks; ++b, out += 84) {
            for (int g = 0; g < 16; ++g) {
                const uint8_t sc = static_cast<uint8_t>(8 + (rng.next() & 7));
                out[g] = static_cast<uint8_t>(sc | sc << 4);
            }
            rng.fill(out + 16, 64);
            const uint16_t dh = to_half(sigma / (11.73f * 1.118f));
            std::memcpy(out + 80, &dh, 2);
            put_half(out + 82, 1.5f * from_half(dh));
        }
        break;
    }
    case GgmlType::Q3_K: {
        // y = d*S*q, q uniform in -4..3 (rms 2.345), S = +-(16..31) with a
        // random sign so the -0.5 mean of q cancels (rms 23.95).
        for (uint64_t b = 0; b < n_blocks; ++b, out += 110) {
            rng.fill(out, 96);
            int v[16];  // S + 32
            for (int i = 0; i < 16; ++i) {
                const uint64_t r = rng.next();
                const int mag = 16 + static_cast<int>(r & 15);
                v[i] = 32 + ((r >> 4) & 1 ? mag : -mag);
            }
            uint8_t *p = out + 96;
            for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>((v[i] & 0xF) | (v[i + 8] & 0xF) << 4);
            for (int i = 0; i < 4; ++i)
                p[8 + i] = static_cast<uint8_t>((v[i] >> 4) | (v[i + 4] >> 4) << 2 | (v[i + 8] >> 4) << 4 |
                                                (v[i + 12] >> 4) << 6);
            put_half(out + 108, sigma / (23.95f * 2.345f));
        }
        break;
    }
    case GgmlType::IQ4_NL: {
        // y = d*K[nibble], nibbles uniform (rms of the levels 67.4); d of random
        // sign so the levels' mean of -5.9 cancels.
        for (uint64_t b = 0; b < n_blocks; ++b, out += 18) {
            put_half(out, (rng.next() & 1 ? 1.0f : -1.0f) * sigma / 67.4f);
            rng.fill(out + 2, 16);
        }
        break;
    }
    case GgmlType::IQ4_XS: {
        // y = d*S*K[nibble] per sub-block of 32, S = +-(16..31) (rms 23.95).
        for (uint64_t b = 0; b < n_blocks; ++b, out += 136) {
            put_half(out, sigma / (23.95f * 67.4f));
            uint16_t high = 0;
            for (int ib = 0; ib < 8; ++ib) {
                const uint64_t r = rng.next();
                const int mag = 16 + static_cast<int>(r & 15);
                const int v = 32 + ((r >> 4) & 1 ? mag : -mag);
                high = static_cast<uint16_t>(high | (v >> 4) << (2 * ib));
                if (ib % 2 == 0) out[4 + ib / 2] = static_cast<uint8_t>(v & 0xF);
                else out[4 + ib / 2] = static_cast<uint8_t>(out[4 + ib / 2] | (v & 0xF) << 4);
            }
            std::memcpy(out + 2, &high, 2);
            rng.fill(out + 8, 128);
        }
        break;
    }
    case GgmlType::Q8_0: {
        for (uint64_t b = 0; b < n_blocks; ++b, out += 34) {
            put_half(out, sigma / 73.6f);
            rng.fill(out + 2, 32);
            for (int j = 0; j < 32; ++j)
                if (out[2 + j] == 0x80) out[2 + j] = 0x81;  // keep quants in -127..127
        }
        break;
    }
    case GgmlType::Q5_0: {
        // y = d*(q - 16), q uniform in 0..31 (std 9.23).
        for (uint64_t b = 0; b < n_blocks; ++b, out += 22) {
            put_half(out, sigma / 9.23f);
            rng.fill(out + 2, 20);
        }
        break;
    }
    case GgmlType::MXFP4: {
        // y = F * 2^(e - 128), F the doubled e2m1 value of a uniform nibble (std 5.85):
        // the power of two nearest sigma / 5.85.
        const int e = 128 + static_cast<int>(std::lround(std::log2(sigma / 5.85f)));
        for (uint64_t b = 0; b < n_blocks; ++b, out += 17) {
            out[0] = static_cast<uint8_t>(std::clamp(e, 0, 254));
            rng.fill(out + 1, 16);
        }
        break;
    }
    case GgmlType::F32: {
        const float a = sigma * 1.7320508f;  // uniform [-a, a] has std sigma
        for (uint64_t i = 0; i < n_blocks; ++i) {
            float v = (2.0f * rng.uniform() - 1.0f) * a;
            std::memcpy(out + 4 * i, &v, 4);
        }
        break;
    }
    default:
        fail(Status::unsupported, "generator cannot write %s blocks", type_traits(type).name);
    }
}

}  // namespace gen

namespace {

// ---- tensors ----------------------------------------------------------------

void fill_tensor_chunk(const TensorSpec &t, uint8_t *out, uint64_t first_elem, uint64_t n_elems, Rng &rng) {
    const TypeTraits &tr = type_traits(t.type);
    if (t.init == Init::ones) {
        for (uint64_t i = 0; i < n_elems; ++i) {
            float one = 1.0f;
            std::memcpy(out + 4 * i, &one, 4);
        }
        return;
    }
    (void)first_elem;
    fill_blocks(t.type, out, n_elems / tr.block_elems, t.sigma, rng);
}

// ---- presets and quant mixes -----------------------------------------------

struct Preset {
    const char *name;
    const char *arch;  // the architecture the preset's shape is of (null: any)
    int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_expert, n_expert_used, n_ff_expert, n_vocab;
};

constexpr Preset kPresets[] = {
    {"qwen3-30b-a3b", "qwen3moe", 48, 2048, 32, 4, 128, 128, 8, 768, 151936},
    {"gpt-oss-20b", "gpt-oss", 24, 2880, 64, 8, 64, 32, 4, 2880, 201088},
    {"gpt-oss-tiny", "gpt-oss", 4, 128, 4, 2, 32, 8, 2, 128, 512},
    // head_dim = qk_nope + qk_rope, one latent KV head; the rest in generator_deepseek2.cpp
    {"deepseek-v2-lite", "deepseek2", 27, 2048, 16, 1, 192, 64, 6, 1408, 102400},
    {"deepseek2-tiny", "deepseek2", 4, 256, 4, 1, 64, 16, 4, 256, 512},
    {"demo", nullptr, 10, 2048, 32, 4, 128, 128, 8, 768, 32768},
    {"small", nullptr, 4, 256, 8, 2, 32, 16, 4, 256, 1024},
    {"tiny", nullptr, 2, 64, 4, 2, 16, 8, 2, 64, 320},
};
constexpr const char *kPresetNames =
    "qwen3-30b-a3b, gpt-oss-20b, gpt-oss-tiny, deepseek-v2-lite, deepseek2-tiny, demo, small, tiny";

bool is_gpt_oss(const GeneratorConfig &c) { return c.arch == "gpt-oss"; }
bool is_deepseek2(const GeneratorConfig &c) { return c.arch == "deepseek2"; }

// gpt-oss: Q/K/V/output biases, per-head sinks, post_attention_norm in place
// of ffn_norm, a router bias, and MXFP4 experts (whatever the quant mix, as
// its released files have them) with F32 bias tables; no QK-norm.
std::vector<TensorSpec> tensor_specs(const GeneratorConfig &c) {
    const QuantMix q = quant_mix(c.quant);
    const bool oss = is_gpt_oss(c);
    const int64_t E = c.n_embd, HQ = int64_t(c.n_head) * c.head_dim, HKV = int64_t(c.n_head_kv) * c.head_dim;
    const int64_t F = c.n_ff_expert, X = c.n_expert;
    auto expert_type = [&](GgmlType mix_type, int64_t row) { return oss ? fit(GgmlType::MXFP4, row) : fit(mix_type, row); };
    auto bias = [](const std::string &name, std::vector<int64_t> ne, float sigma) {
        return TensorSpec{name, GgmlType::F32, std::move(ne), Init::normal, sigma};
    };
    std::vector<TensorSpec> t;
    t.push_back({"token_embd.weight", fit(q.embd, E), {E, c.n_vocab}, Init::normal, 1.0f});
    for (int32_t l = 0; l < c.n_layer; ++l) {
        if (is_deepseek2(c)) {
            gen::deepseek2_layer_specs(c, q, l, t);
            continue;
        }
        const std::string p = "blk." + std::to_string(l) + ".";
        t.push_back({p + "attn_norm.weight", GgmlType::F32, {E}, Init::ones, 0});
        t.push_back({p + "attn_q.weight", fit(q.attn_qko, E), {E, HQ}, Init::normal, inv_sqrt(E)});
        t.push_back({p + "attn_k.weight", fit(q.attn_qko, E), {E, HKV}, Init::normal, inv_sqrt(E)});
        t.push_back({p + "attn_v.weight", fit(q.attn_v, E), {E, HKV}, Init::normal, inv_sqrt(E)});
        t.push_back({p + "attn_output.weight", fit(q.attn_qko, HQ), {HQ, E}, Init::normal, kAttnOutputScale * inv_sqrt(HQ)});
        if (oss) {
            for (const char *b : {"attn_q.bias", "attn_k.bias", "attn_v.bias"})
                t.push_back(bias(p + b, {b[5] == 'q' ? HQ : HKV}, 0.1f));
            t.push_back(bias(p + "attn_output.bias", {E}, 0.01f));
            t.push_back(bias(p + "attn_sinks.weight", {c.n_head}, 1.0f));
            t.push_back({p + "post_attention_norm.weight", GgmlType::F32, {E}, Init::ones, 0});
            t.push_back(bias(p + "ffn_gate_inp.bias", {X}, 0.1f));
        } else {
            t.push_back({p + "attn_q_norm.weight", GgmlType::F32, {c.head_dim}, Init::ones, 0});
            t.push_back({p + "attn_k_norm.weight", GgmlType::F32, {c.head_dim}, Init::ones, 0});
            t.push_back({p + "ffn_norm.weight", GgmlType::F32, {E}, Init::ones, 0});
        }
        t.push_back({p + "ffn_gate_inp.weight", GgmlType::F32, {E, X}, Init::router, gen::kRouterGain * inv_sqrt(E)});
        t.push_back({p + "ffn_gate_exps.weight", expert_type(q.exp_gate_up, E), {E, F, X}, Init::normal, inv_sqrt(E)});
        t.push_back({p + "ffn_up_exps.weight", expert_type(q.exp_gate_up, E), {E, F, X}, Init::normal, inv_sqrt(E)});
        t.push_back({p + "ffn_down_exps.weight", expert_type(q.exp_down, F), {F, E, X}, Init::normal, inv_sqrt(F)});
        if (oss) {
            t.push_back(bias(p + "ffn_gate_exps.bias", {F, X}, 0.1f));
            t.push_back(bias(p + "ffn_up_exps.bias", {F, X}, 0.1f));
            t.push_back(bias(p + "ffn_down_exps.bias", {E, X}, 0.01f));
        }
    }
    t.push_back({"output_norm.weight", GgmlType::F32, {E}, Init::ones, 0});
    t.push_back({"output.weight", fit(q.output, E), {E, c.n_vocab}, Init::normal, inv_sqrt(E)});
    return t;
}

// GPT-2 byte-to-unicode mapping: printable bytes map to themselves, the rest to U+0100 upward.
std::vector<std::string> byte_tokens() {
    std::vector<std::string> out(256);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
        bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(extra++);
        std::string s;
        if (cp < 0x80) s += static_cast<char>(cp);
        else {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        out[b] = s;
    }
    return out;
}

// A small valid byte-level BPE vocabulary: 256 byte tokens, merges of pairs of
// printable ASCII characters, filler tokens, and Qwen-style control tokens.
void add_tokenizer(gguf::GgufWriter &w, int32_t n_vocab, const char *pre) {
    const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    const int32_t n_special = 3;
    std::vector<std::string> tokens = byte_tokens();
    std::vector<int32_t> types(256, 1);
    std::vector<std::string> merges;
    const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
    const std::vector<std::string> bytes = byte_tokens();
    const std::string space = bytes[' '];  // "Ġ"
    for (size_t i = 0; i < letters.size() && int32_t(tokens.size()) < n_vocab - n_special; ++i) {
        std::string l(1, letters[i]);
        merges.push_back(space + " " + l);
        tokens.push_back(space + l);
        types.push_back(1);
    }
    for (size_t i = 0; i < letters.size(); ++i)
        for (size_t j = 0; j < letters.size() && int32_t(tokens.size()) < n_vocab - n_special; ++j) {
            std::string a(1, letters[i]), b(1, letters[j]);
            merges.push_back(a + " " + b);
            tokens.push_back(a + b);
            types.push_back(1);
        }
    for (int32_t i = 0; int32_t(tokens.size()) < n_vocab - n_special; ++i) {
        tokens.push_back("<|unused_" + std::to_string(i) + "|>");
        types.push_back(5);
    }
    for (const char *s : specials) {
        tokens.push_back(s);
        types.push_back(3);
    }
    const uint32_t eot = static_cast<uint32_t>(n_vocab - n_special);
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_i32_array("tokenizer.ggml.token_type", types);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.eos_token_id", eot + 2);
    w.add_u32("tokenizer.ggml.padding_token_id", eot);
    w.add_u32("tokenizer.ggml.bos_token_id", eot);
    w.add_bool("tokenizer.ggml.add_bos_token", false);
}

void build_header(gguf::GgufWriter &w, const GeneratorConfig &c, const std::vector<TensorSpec> &specs) {
    const std::string a = c.arch + ".";
    w.add_string("general.architecture", c.arch);
    w.add_string("general.name", "moestream random " + c.preset + " " + c.quant);
    w.add_u32("general.file_type", quant_mix(c.quant).file_type);
    w.add_u32("general.quantization_version", 2);
    w.add_u32(a + "block_count", static_cast<uint32_t>(c.n_layer));
    w.add_u32(a + "context_length", is_gpt_oss(c) ? 131072 : is_deepseek2(c) ? 163840 : 32768);
    w.add_u32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
    if (!is_gpt_oss(c) && !is_deepseek2(c))
        w.add_u32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff_expert * 8));
    w.add_u32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
    if (!is_deepseek2(c)) {  // deepseek2_header writes these as its layout has them
        w.add_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
        w.add_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
        w.add_u32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
    }
    if (is_deepseek2(c)) {
        gen::deepseek2_header(w, c);
    } else if (is_gpt_oss(c)) {
        w.add_f32(a + "rope.freq_base", 150000.0f);
        w.add_string(a + "rope.scaling.type", "yarn");
        w.add_f32(a + "rope.scaling.factor", 32.0f);
        w.add_u32(a + "rope.scaling.original_context_length", 4096);
        w.add_u32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
        w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    } else {
        w.add_f32(a + "rope.freq_base", 1000000.0f);
        w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    }
    w.add_u32(a + "expert_count", static_cast<uint32_t>(c.n_expert));
    w.add_u32(a + "expert_used_count", static_cast<uint32_t>(c.n_expert_used));
    w.add_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_expert));
    w.add_u32(a + "vocab_size", static_cast<uint32_t>(c.n_vocab));  // = token_embd rows = tokens
    add_tokenizer(w, c.n_vocab, is_gpt_oss(c) ? "gpt-4o" : is_deepseek2(c) ? "deepseek-v3" : "qwen2");
    for (const TensorSpec &t : specs) w.add_tensor(t.name, t.type, t.ne);
}

}  // namespace

GeneratorConfig resolve_generator_config(const GeneratorConfig &r) {
    const Preset *p = nullptr;
    for (const Preset &x : kPresets)
        if (r.preset == x.name) p = &x;
    if (!p) fail(Status::invalid_argument, "generator: unknown preset '%s' (%s)", r.preset.c_str(), kPresetNames);
    GeneratorConfig c = r;
    if (c.arch.empty()) c.arch = p->arch ? p->arch : "qwen3moe";
    if (c.arch != "qwen3moe" && c.arch != "gpt-oss" && c.arch != "deepseek2")
        fail(Status::unsupported, "generator: architecture '%s' not supported (qwen3moe, gpt-oss, deepseek2)",
             c.arch.c_str());
    if (p->arch && c.arch != p->arch)
        fail(Status::invalid_argument, "generator: preset '%s' is a %s shape, not %s", p->name, p->arch, c.arch.c_str());
    // Latent attention has sizes no generic preset gives.
    if (is_deepseek2(c) && !p->arch)
        fail(Status::invalid_argument, "generator: deepseek2 needs a deepseek2 preset (deepseek-v2-lite, deepseek2-tiny)");
    if (is_deepseek2(c)) c.deepseek2 = *gen::deepseek2_preset(p->name);
    auto take = [](int32_t v, int32_t d) { return v ? v : d; };
    c.n_layer = take(r.n_layer, p->n_layer);
    c.n_embd = take(r.n_embd, p->n_embd);
    c.n_head = take(r.n_head, p->n_head);
    c.n_head_kv = take(r.n_head_kv, p->n_head_kv);
    c.head_dim = take(r.head_dim, p->head_dim);
    c.n_expert = take(r.n_expert, p->n_expert);
    c.n_expert_used = take(r.n_expert_used, p->n_expert_used);
    c.n_ff_expert = take(r.n_ff_expert, p->n_ff_expert);
    c.n_vocab = take(r.n_vocab, p->n_vocab);
    if (r.sliding_window < 0 || (r.sliding_window > 0 && !is_gpt_oss(c)))
        fail(Status::invalid_argument, "generator: a sliding window (%d) is for gpt-oss, positive", r.sliding_window);
    c.sliding_window = is_gpt_oss(c) ? take(r.sliding_window, 128) : 0;
    quant_mix(c.quant);  // validates
    // Beyond these no real model goes, and the size arithmetic stays far from
    // 64-bit overflow (the largest tensor is n_embd x n_ff_expert x n_expert).
    auto in_range = [](int32_t v, int32_t max, const char *what) {
        if (v <= 0 || v > max) fail(Status::invalid_argument, "generator: %s is %d (from 1 to %d)", what, v, max);
    };
    in_range(c.n_layer, kGeneratorMax.n_layer, "n_layer");
    in_range(c.n_embd, kGeneratorMax.n_embd, "n_embd");
    in_range(c.n_head, kGeneratorMax.n_head, "n_head");
    in_range(c.n_head_kv, kGeneratorMax.n_head, "n_head_kv");
    in_range(c.head_dim, kGeneratorMax.head_dim, "head_dim");
    in_range(c.n_expert, kGeneratorMax.n_expert, "n_expert");
    in_range(c.n_expert_used, kGeneratorMax.n_expert, "n_expert_used");
    in_range(c.n_ff_expert, kGeneratorMax.n_ff_expert, "n_ff_expert");
    in_range(c.n_vocab, kGeneratorMax.n_vocab, "n_vocab");
    if (c.n_head % c.n_head_kv) fail(Status::invalid_argument, "generator: n_head %d not a multiple of n_head_kv %d", c.n_head, c.n_head_kv);
    if (c.n_expert_used > c.n_expert) fail(Status::invalid_argument, "generator: n_expert_used %d > n_expert %d", c.n_expert_used, c.n_expert);
    if (c.head_dim % 2) fail(Status::invalid_argument, "generator: head_dim %d must be even (RoPE)", c.head_dim);
    for (int32_t v : {c.n_embd, c.n_ff_expert, c.n_head * c.head_dim})
        if (v % 32) fail(Status::invalid_argument, "generator: dimension %d is not a multiple of 32", v);
    if (c.n_vocab < 320) fail(Status::invalid_argument, "generator: n_vocab %d < 320 (byte tokens + specials)", c.n_vocab);
    if (c.attn_kv_b && !is_deepseek2(c))
        fail(Status::invalid_argument, "generator: attn_kv_b is a layout of deepseek2's latent attention, not of %s",
             c.arch.c_str());
    if (is_deepseek2(c)) gen::deepseek2_resolve(c);
    return c;
}

uint64_t generated_model_size(const GeneratorConfig &requested) {
    const GeneratorConfig c = resolve_generator_config(requested);
    gguf::GgufWriter w;
    build_header(w, c, tensor_specs(c));
    return w.file_size();
}

void generate_model(const GeneratorConfig &requested, const std::string &path,
                    const std::function<void(uint64_t, uint64_t)> &progress) {
    const GeneratorConfig c = resolve_generator_config(requested);
    const std::vector<TensorSpec> specs = tensor_specs(c);
    gguf::GgufWriter w;
    build_header(w, c, specs);
    const uint64_t total = w.file_size();
    AtomicFile out(path);
    w.begin(out);

    // Two chunk buffers: one is filled while the other is written.
    constexpr uint64_t kChunk = 8u << 20;
    std::vector<uint8_t> buffers[2] = {std::vector<uint8_t>(kChunk + 4096), std::vector<uint8_t>(kChunk + 4096)};
    std::future<void> pending;
    int which = 0;
    uint64_t done = 0;
    for (const TensorSpec &t : specs) {
        Rng rng = gen::tensor_rng(c, t.name);
        const TypeTraits &tr = type_traits(t.type);
        uint64_t n_elems = 1;
        for (int64_t d : t.ne) n_elems *= static_cast<uint64_t>(d);
        // attn_kv_b is written a head at a time (F32).
        std::optional<gen::JointKvB> joint;
        if (t.init == Init::joint_kv_b) joint.emplace(c, t);
        const uint64_t elems_per_chunk = joint ? joint->elems_per_head()
                                               : std::max<uint64_t>(tr.block_elems, kChunk / tr.block_bytes * tr.block_elems);
        for (uint64_t first = 0; first < n_elems; first += elems_per_chunk) {
            const uint64_t n = std::min(elems_per_chunk, n_elems - first);
            std::vector<uint8_t> &buf = buffers[which];
            const size_t bytes = static_cast<size_t>(n / tr.block_elems * tr.block_bytes);
            if (joint) {
                if (buf.size() < bytes) buf.resize(bytes);  // its write finished: only the other buffer's is pending
                joint->next_head(reinterpret_cast<float *>(buf.data()));
            } else {
                fill_tensor_chunk(t, buf.data(), first, n, rng);
            }
            if (pending.valid()) pending.get();  // rethrows a write error
            pending = std::async(std::launch::async, [&w, &buf, bytes] { w.write_data(buf.data(), bytes); });
            which ^= 1;
            done += bytes;
            if (progress) progress(done, total);
        }
    }
    if (pending.valid()) pending.get();
    w.finish();
    out.commit();
    if (progress) progress(total, total);
}

}  // namespace moe
