#include "gguf_tensor_sizes.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace cli {
namespace {

class Reader {
public:
    explicit Reader(std::FILE *f) : f_(f) {}
    bool ok() const { return ok_; }
    uint64_t pos() const { return pos_; }
    template <typename T>
    T get() {
        T v{};
        if (ok_ && std::fread(&v, sizeof v, 1, f_) == 1) pos_ += sizeof v;
        else ok_ = false;
        return v;
    }
    // Small skips read through the stdio buffer (a seek would cost a system
    // call per vocabulary string).
    void skip(uint64_t n) {
        if (!ok_) return;
        if (n <= sizeof scratch_) {
            if (n && std::fread(scratch_, 1, n, f_) != n) ok_ = false;
        } else if (std::fseek(f_, long(n), SEEK_CUR) != 0) {
            ok_ = false;
        }
        pos_ += n;
    }
    std::string string() {
        const uint64_t n = get<uint64_t>();
        if (!ok_ || n > (1u << 20)) {
            ok_ = false;
            return {};
        }
        std::string s(n, '\0');
        if (n && std::fread(s.data(), 1, n, f_) != n) ok_ = false;
        pos_ += n;
        return s;
    }

private:
    std::FILE *f_;
    char scratch_[4096];
    bool ok_ = true;
    uint64_t pos_ = 0;
};

// Bytes of a scalar GGUF metadata value type; 0 for string/array.
uint64_t scalar_bytes(uint32_t type) {
    switch (type) {
    case 0: case 1: case 7: return 1;        // u8, i8, bool
    case 2: case 3: return 2;                // u16, i16
    case 4: case 5: case 6: return 4;        // u32, i32, f32
    case 10: case 11: case 12: return 8;     // u64, i64, f64
    default: return 0;
    }
}

bool skip_value(Reader &r, uint32_t type) {
    if (const uint64_t b = scalar_bytes(type)) {
        r.skip(b);
        return r.ok();
    }
    if (type == 8) {
        const uint64_t n = r.get<uint64_t>();
        r.skip(n);
        return r.ok();
    }
    if (type == 9) {
        const uint32_t item = r.get<uint32_t>();
        const uint64_t n = r.get<uint64_t>();
        if (const uint64_t b = scalar_bytes(item)) {
            r.skip(b * n);
            return r.ok();
        }
        for (uint64_t i = 0; i < n && r.ok(); ++i)
            if (!skip_value(r, item)) return false;
        return r.ok();
    }
    return false;
}

bool starts_with(const std::string &s, const char *p) { return s.rfind(p, 0) == 0; }

// Layer of "blk.N.ffn_{gate,up,down}_exps.weight" (or a fused gate_up), else -1.
int32_t expert_tensor_layer(const std::string &name) {
    if (!starts_with(name, "blk.") || name.find("_exps.") == std::string::npos) return -1;
    if (name.find(".ffn_gate_exps.") == std::string::npos && name.find(".ffn_up_exps.") == std::string::npos &&
        name.find(".ffn_down_exps.") == std::string::npos && name.find(".ffn_gate_up_exps.") == std::string::npos)
        return -1;
    return int32_t(std::strtol(name.c_str() + 4, nullptr, 10));
}

}  // namespace

bool read_gguf_tensor_sizes(const std::string &path, std::vector<GgufTensorSize> &out, std::string &why) {
    std::unique_ptr<std::FILE, int (*)(std::FILE *)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) {
        why = path + ": " + std::strerror(errno);
        return false;
    }
    Reader r(f.get());
    const uint32_t magic = r.get<uint32_t>();
    const uint32_t version = r.get<uint32_t>();
    if (!r.ok() || magic != 0x46554747u || version < 2 || version > 3) {
        why = path + ": not a GGUF v2/v3 file";
        return false;
    }
    const uint64_t n_tensors = r.get<uint64_t>();
    const uint64_t n_kv = r.get<uint64_t>();
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < n_kv && r.ok(); ++i) {
        const std::string key = r.string();
        const uint32_t type = r.get<uint32_t>();
        if (key == "general.alignment" && type == 4) {
            alignment = r.get<uint32_t>();
            continue;
        }
        if (!skip_value(r, type)) break;
    }
    struct Info {
        std::string name;
        uint64_t offset;
    };
    std::vector<Info> infos;
    for (uint64_t i = 0; i < n_tensors && r.ok(); ++i) {
        Info info;
        info.name = r.string();
        const uint32_t n_dims = r.get<uint32_t>();
        if (n_dims > 8) break;
        r.skip(8ull * n_dims + 4);  // dims, type
        info.offset = r.get<uint64_t>();
        infos.push_back(std::move(info));
    }
    if (!r.ok() || infos.size() != n_tensors || alignment == 0) {
        why = path + ": truncated or malformed GGUF header";
        return false;
    }
    const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
    if (std::fseek(f.get(), 0, SEEK_END) != 0) {
        why = path + ": cannot seek";
        return false;
    }
    const uint64_t file_size = uint64_t(std::ftell(f.get()));
    std::vector<size_t> order(infos.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return infos[a].offset < infos[b].offset; });
    out.assign(infos.size(), {});
    for (size_t k = 0; k < order.size(); ++k) {
        const Info &info = infos[order[k]];
        const uint64_t end = k + 1 < order.size() ? infos[order[k + 1]].offset : file_size - data_start;
        out[order[k]] = GgufTensorSize{info.name, end >= info.offset ? end - info.offset : 0};
    }
    return true;
}

TouchedBytes touched_bytes_model(const std::vector<GgufTensorSize> &tensors, const moestream_model_info &info) {
    const int32_t n_layer = info.n_layer, n_expert = info.n_expert, n_vocab = info.n_vocab;
    TouchedBytes t;
    t.bytes_per_expert.assign(size_t(std::max(0, n_layer)), 0);
    bool has_output = false;
    uint64_t embd = 0;
    for (const GgufTensorSize &s : tensors) {
        if (s.name == "output.weight") has_output = true;
        if (s.name == "token_embd.weight") {
            embd = s.bytes;
            continue;
        }
        const int32_t layer = expert_tensor_layer(s.name);
        if (layer >= 0) {
            if (layer < n_layer && n_expert > 0) t.bytes_per_expert[size_t(layer)] += s.bytes / uint64_t(n_expert);
            continue;
        }
        t.dense += s.bytes;
    }
    t.dense += has_output ? (n_vocab > 0 ? embd / uint64_t(n_vocab) : 0) : embd;
    // dense_bytes = total - experts - the built-from tensors + the matrices built.
    const uint64_t file_dense = info.total_bytes - info.expert_bytes;
    if (info.dense_bytes >= file_dense) t.dense += info.dense_bytes - file_dense;
    else t.dense -= std::min(t.dense, file_dense - info.dense_bytes);
    return t;
}

}  // namespace cli
