#include "support/gguf_builder.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "common/error.hpp"

namespace moe::test {
namespace {

enum : uint32_t {
    T_UINT8 = 0, T_INT8 = 1, T_UINT16 = 2, T_INT16 = 3, T_UINT32 = 4, T_INT32 = 5, T_FLOAT32 = 6,
    T_BOOL = 7, T_STRING = 8, T_ARRAY = 9, T_UINT64 = 10, T_INT64 = 11, T_FLOAT64 = 12,
};

template <typename T>
void put_le(std::vector<uint8_t> &out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_str(std::vector<uint8_t> &out, const std::string &s) {
    put_le<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

template <typename T>
std::vector<uint8_t> scalar_bytes(T v) {
    std::vector<uint8_t> out;
    put_le(out, v);
    return out;
}

uint64_t pad(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

struct SplitMix {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1ull << 24); }  // [0,1)
};

// IEEE binary16 from a float, round to nearest even; inputs here are small and finite.
uint16_t to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000;
    const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffff;
    if (exp <= 0) {
        if (exp < -10) return static_cast<uint16_t>(sign);
        mant |= 0x800000;
        const uint32_t shift = static_cast<uint32_t>(14 - exp);
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
    uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
}

void set_half(uint8_t *p, float v) {
    const uint16_t h = to_half(v);
    std::memcpy(p, &h, 2);
}

}  // namespace

// --- metadata -------------------------------------------------------------------

GgufBuilder &GgufBuilder::put(const std::string &key, uint32_t type, Bytes value) {
    for (Kv &kv : kvs_) {
        if (kv.key == key) {
            kv.type = type;
            kv.value = std::move(value);
            return *this;
        }
    }
    kvs_.push_back(Kv{key, type, std::move(value)});
    return *this;
}

GgufBuilder &GgufBuilder::kv_u8(const std::string &k, uint8_t v) { return put(k, T_UINT8, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_i8(const std::string &k, int8_t v) { return put(k, T_INT8, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_u16(const std::string &k, uint16_t v) { return put(k, T_UINT16, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_i16(const std::string &k, int16_t v) { return put(k, T_INT16, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_u32(const std::string &k, uint32_t v) { return put(k, T_UINT32, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_i32(const std::string &k, int32_t v) { return put(k, T_INT32, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_u64(const std::string &k, uint64_t v) { return put(k, T_UINT64, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_i64(const std::string &k, int64_t v) { return put(k, T_INT64, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_f32(const std::string &k, float v) { return put(k, T_FLOAT32, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_f64(const std::string &k, double v) { return put(k, T_FLOAT64, scalar_bytes(v)); }
GgufBuilder &GgufBuilder::kv_bool(const std::string &k, bool v) {
    return put(k, T_BOOL, scalar_bytes<uint8_t>(v ? 1 : 0));
}
GgufBuilder &GgufBuilder::kv_string(const std::string &k, const std::string &v) {
    Bytes b;
    put_str(b, v);
    return put(k, T_STRING, std::move(b));
}

GgufBuilder &GgufBuilder::kv_array_u32(const std::string &k, const std::vector<uint32_t> &v) {
    Bytes b;
    put_le<uint32_t>(b, T_UINT32);
    put_le<uint64_t>(b, v.size());
    for (uint32_t x : v) put_le(b, x);
    return put(k, T_ARRAY, std::move(b));
}
GgufBuilder &GgufBuilder::kv_array_bool(const std::string &k, const std::vector<bool> &v) {
    Bytes b;
    put_le<uint32_t>(b, T_BOOL);
    put_le<uint64_t>(b, v.size());
    for (bool x : v) put_le<uint8_t>(b, x ? 1 : 0);
    return put(k, T_ARRAY, std::move(b));
}
GgufBuilder &GgufBuilder::kv_array_i32(const std::string &k, const std::vector<int32_t> &v) {
    Bytes b;
    put_le<uint32_t>(b, T_INT32);
    put_le<uint64_t>(b, v.size());
    for (int32_t x : v) put_le(b, x);
    return put(k, T_ARRAY, std::move(b));
}
GgufBuilder &GgufBuilder::kv_array_f32(const std::string &k, const std::vector<float> &v) {
    Bytes b;
    put_le<uint32_t>(b, T_FLOAT32);
    put_le<uint64_t>(b, v.size());
    for (float x : v) put_le(b, x);
    return put(k, T_ARRAY, std::move(b));
}
GgufBuilder &GgufBuilder::kv_array_string(const std::string &k, const std::vector<std::string> &v) {
    Bytes b;
    put_le<uint32_t>(b, T_STRING);
    put_le<uint64_t>(b, v.size());
    for (const std::string &s : v) put_str(b, s);
    return put(k, T_ARRAY, std::move(b));
}
GgufBuilder &GgufBuilder::kv_raw(const std::string &k, uint32_t type_id, const Bytes &value) {
    return put(k, type_id, value);
}
GgufBuilder &GgufBuilder::alignment(uint32_t a) {
    padding_ = a;
    return kv_u32("general.alignment", a);
}
bool GgufBuilder::has_kv(const std::string &key) const {
    for (const Kv &kv : kvs_)
        if (kv.key == key) return true;
    return false;
}
GgufBuilder &GgufBuilder::remove_kv(const std::string &key) {
    std::erase_if(kvs_, [&](const Kv &kv) { return kv.key == key; });
    return *this;
}

// --- tensors --------------------------------------------------------------------

uint64_t GgufBuilder::tensor_bytes(GgmlType type, const std::vector<int64_t> &ne) {
    const TypeTraits &tr = type_traits(type);
    if (!tr.name || ne.empty() || ne.size() > 4) throw std::invalid_argument("bad tensor type or rank");
    if (ne[0] % tr.block_elems != 0) throw std::invalid_argument("ne[0] not a multiple of the block size");
    uint64_t n = uint64_t(ne[0]) / tr.block_elems * tr.block_bytes;
    for (size_t d = 1; d < ne.size(); ++d) n *= uint64_t(ne[d]);
    return n;
}

GgufBuilder::Bytes GgufBuilder::random_bytes(GgmlType type, const std::vector<int64_t> &ne, uint64_t seed) {
    const uint64_t nbytes = tensor_bytes(type, ne);
    const TypeTraits &tr = type_traits(type);
    SplitMix rng{seed * 0x2545F4914F6CDD1Dull + 1};
    Bytes out(nbytes);
    if (type == GgmlType::F32) {
        for (uint64_t k = 0; k < nbytes / 4; ++k) {
            const float v = rng.uniform() - 0.5f;
            std::memcpy(&out[k * 4], &v, 4);
        }
        return out;
    }
    if (type == GgmlType::F16 || type == GgmlType::BF16) {
        for (uint64_t k = 0; k < nbytes / 2; ++k) {
            const float v = rng.uniform() - 0.5f;
            uint16_t h;
            if (type == GgmlType::F16) {
                h = to_half(v);
            } else {
                uint32_t x;
                std::memcpy(&x, &v, 4);
                h = static_cast<uint16_t>(x >> 16);
            }
            std::memcpy(&out[k * 2], &h, 2);
        }
        return out;
    }
    for (uint8_t &b : out) b = static_cast<uint8_t>(rng.next());
    // Keep every block's scales small and finite so the weights are usable numbers.
    for (uint64_t off = 0; off + tr.block_bytes <= nbytes; off += tr.block_bytes) {
        uint8_t *blk = &out[off];
        const float d = 0.002f + 0.01f * rng.uniform();
        switch (type) {
        case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL:
        case GgmlType::IQ4_XS:
            set_half(blk, d);
            break;
        case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q8_1:
        case GgmlType::Q4_K: case GgmlType::Q5_K:
            set_half(blk, d);
            set_half(blk + 2, 0.5f * d);
            break;
        case GgmlType::Q2_K:
            set_half(blk + 80, d);
            set_half(blk + 82, 0.5f * d);
            break;
        case GgmlType::Q3_K: set_half(blk + 108, d); break;
        case GgmlType::Q6_K: set_half(blk + 208, d); break;
        case GgmlType::Q8_K: std::memcpy(blk, &d, 4); break;
        case GgmlType::MXFP4: blk[0] = static_cast<uint8_t>(118 + rng.next() % 8); break;
        default: break;
        }
    }
    return out;
}

GgufBuilder &GgufBuilder::tensor(const std::string &name, GgmlType type, const std::vector<int64_t> &ne, Bytes data) {
    if (data.size() != tensor_bytes(type, ne))
        throw std::invalid_argument("tensor " + name + ": data size does not match its shape");
    return tensor_raw(name, static_cast<uint32_t>(type), ne, std::move(data));
}

GgufBuilder &GgufBuilder::tensor_random(const std::string &name, GgmlType type, const std::vector<int64_t> &ne,
                                        uint64_t seed) {
    return tensor(name, type, ne, random_bytes(type, ne, seed));
}

GgufBuilder &GgufBuilder::tensor_raw(const std::string &name, uint32_t type_id, const std::vector<int64_t> &ne,
                                     Bytes data) {
    tensors_.push_back(Tensor{name, type_id, ne, std::move(data), std::nullopt});
    return *this;
}

bool GgufBuilder::has_tensor(const std::string &name) const {
    for (const Tensor &t : tensors_)
        if (t.name == name) return true;
    return false;
}

GgufBuilder &GgufBuilder::remove_tensor(const std::string &name) {
    std::erase_if(tensors_, [&](const Tensor &t) { return t.name == name; });
    return *this;
}

GgufBuilder &GgufBuilder::override_tensor_offset(size_t index, uint64_t offset) {
    tensors_.at(index).offset_override = offset;
    return *this;
}

// --- output ---------------------------------------------------------------------

GgufBuilder::Bytes GgufBuilder::build() const {
    Bytes out;
    put_le<uint32_t>(out, magic_);
    put_le<uint32_t>(out, version_);
    put_le<uint64_t>(out, n_tensors_override_.value_or(tensors_.size()));
    put_le<uint64_t>(out, n_kv_override_.value_or(kvs_.size()));
    for (const Kv &kv : kvs_) {
        put_str(out, kv.key);
        put_le<uint32_t>(out, kv.type);
        out.insert(out.end(), kv.value.begin(), kv.value.end());
    }
    uint64_t offset = 0;
    for (const Tensor &t : tensors_) {
        put_str(out, t.name);
        put_le<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put_le<int64_t>(out, d);
        put_le<uint32_t>(out, t.type);
        put_le<uint64_t>(out, t.offset_override.value_or(offset));
        offset = pad(offset + t.data.size(), padding_);
    }
    if (!tensors_.empty()) out.resize(pad(out.size(), padding_), 0);
    for (const Tensor &t : tensors_) {
        out.insert(out.end(), t.data.begin(), t.data.end());
        out.resize(pad(out.size(), padding_), 0);
    }
    return out;
}

void GgufBuilder::write(const std::string &path) const {
    const Bytes bytes = build();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<std::string> write_split_set(const std::string &prefix, std::vector<GgufBuilder> shards) {
    std::vector<std::string> paths;
    const auto count = static_cast<uint16_t>(shards.size());
    int32_t total_tensors = 0;
    for (const GgufBuilder &s : shards) total_tensors += static_cast<int32_t>(s.tensor_count());
    for (size_t k = 0; k < shards.size(); ++k) {
        GgufBuilder &s = shards[k];
        if (!s.has_kv("split.no")) s.kv_u16("split.no", static_cast<uint16_t>(k));
        if (!s.has_kv("split.count")) s.kv_u16("split.count", count);
        if (k == 0 && !s.has_kv("split.tensors.count")) s.kv_i32("split.tensors.count", total_tensors);
        paths.push_back(prefix + format("-%05u-of-%05u.gguf", unsigned(k + 1), unsigned(count)));
        s.write(paths.back());
    }
    return paths;
}

// --- tiny models ----------------------------------------------------------------

GgufBuilder tiny_moe(const TinyMoe &m) {
    GgufBuilder b;
    const std::string a = m.arch + ".";
    const int32_t hd = m.head_dim ? m.head_dim : m.n_embd / m.n_head;
    b.kv_string("general.architecture", m.arch);
    b.kv_string("general.name", m.name);
    b.kv_u32(a + "context_length", uint32_t(m.n_ctx_train));
    b.kv_u32(a + "embedding_length", uint32_t(m.n_embd));
    b.kv_u32(a + "block_count", uint32_t(m.n_layer));
    b.kv_u32(a + "attention.head_count", uint32_t(m.n_head));
    b.kv_u32(a + "attention.head_count_kv", uint32_t(m.n_head_kv));
    if (m.head_dim) {
        b.kv_u32(a + "attention.key_length", uint32_t(hd));
        b.kv_u32(a + "attention.value_length", uint32_t(hd));
    }
    b.kv_f32(a + "attention.layer_norm_rms_epsilon", m.rms_eps);
    b.kv_f32(a + "rope.freq_base", m.rope_freq_base);
    b.kv_u32(a + "expert_count", uint32_t(m.n_expert));
    b.kv_u32(a + "expert_used_count", uint32_t(m.n_expert_used));
    if (m.arch == "llama" || m.arch == "olmoe") {
        b.kv_u32(a + "feed_forward_length", uint32_t(m.n_ff_expert));
    } else {
        b.kv_u32(a + "expert_feed_forward_length", uint32_t(m.n_ff_expert));
    }
    if (m.arch == "qwen2moe") b.kv_u32(a + "expert_shared_feed_forward_length", uint32_t(m.n_ff_shared));

    uint64_t seed = m.seed * 1000003;
    auto norm = [&](const std::string &name, int64_t n) {
        // Norm weights near 1 so activations keep their scale.
        std::vector<uint8_t> bytes(size_t(n) * 4);
        SplitMix rng{++seed};
        for (int64_t k = 0; k < n; ++k) {
            const float v = 1.0f + 0.2f * (rng.uniform() - 0.5f);
            std::memcpy(&bytes[size_t(k) * 4], &v, 4);
        }
        b.tensor(name, GgmlType::F32, {n}, std::move(bytes));
    };
    auto rand = [&](const std::string &name, GgmlType t, std::vector<int64_t> ne) {
        b.tensor_random(name, t, ne, ++seed);
    };

    rand("token_embd.weight", m.dense_type, {m.n_embd, m.n_vocab});
    for (int32_t il = 0; il < m.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        norm(p + "attn_norm.weight", m.n_embd);
        rand(p + "attn_q.weight", m.dense_type, {m.n_embd, int64_t(m.n_head) * hd});
        rand(p + "attn_k.weight", m.dense_type, {m.n_embd, int64_t(m.n_head_kv) * hd});
        rand(p + "attn_v.weight", m.dense_type, {m.n_embd, int64_t(m.n_head_kv) * hd});
        rand(p + "attn_output.weight", m.dense_type, {int64_t(m.n_head) * hd, m.n_embd});
        if (m.arch == "qwen3moe") {
            norm(p + "attn_q_norm.weight", hd);
            norm(p + "attn_k_norm.weight", hd);
        } else if (m.arch == "olmoe") {
            norm(p + "attn_q_norm.weight", int64_t(m.n_head) * hd);
            norm(p + "attn_k_norm.weight", int64_t(m.n_head_kv) * hd);
        } else if (m.arch == "qwen2moe") {
            rand(p + "attn_q.bias", GgmlType::F32, {int64_t(m.n_head) * hd});
            rand(p + "attn_k.bias", GgmlType::F32, {int64_t(m.n_head_kv) * hd});
            rand(p + "attn_v.bias", GgmlType::F32, {int64_t(m.n_head_kv) * hd});
        }
        norm(p + "ffn_norm.weight", m.n_embd);
        rand(p + "ffn_gate_inp.weight", GgmlType::F32, {m.n_embd, m.n_expert});
        rand(p + "ffn_gate_exps.weight", m.expert_type, {m.n_embd, m.n_ff_expert, m.n_expert});
        rand(p + "ffn_up_exps.weight", m.expert_type, {m.n_embd, m.n_ff_expert, m.n_expert});
        rand(p + "ffn_down_exps.weight", m.expert_type, {m.n_ff_expert, m.n_embd, m.n_expert});
        if (m.arch == "qwen2moe") {
            rand(p + "ffn_gate_inp_shexp.weight", GgmlType::F32, {m.n_embd});
            rand(p + "ffn_gate_shexp.weight", m.dense_type, {m.n_embd, m.n_ff_shared});
            rand(p + "ffn_up_shexp.weight", m.dense_type, {m.n_embd, m.n_ff_shared});
            rand(p + "ffn_down_shexp.weight", m.dense_type, {m.n_ff_shared, m.n_embd});
        }
    }
    norm("output_norm.weight", m.n_embd);
    if (!m.tied_output) rand("output.weight", m.dense_type, {m.n_embd, m.n_vocab});
    return b;
}

}  // namespace moe::test
