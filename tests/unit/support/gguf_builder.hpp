// Writes GGUF images for tests: arbitrary metadata and tensors with given bytes,
// split sets, and tiny random-weight MoE models of the supported architectures.
//
// The builder lays files out the way the reader expects (tensors packed in
// table order, each padded to the alignment) unless told otherwise through the
// override_* calls, which exist to produce corrupt files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/ggml_types.hpp"
#include "gguf/gguf_file.hpp"

namespace moe::test {

class GgufBuilder {
public:
    using Bytes = std::vector<uint8_t>;

    // --- metadata -------------------------------------------------------------
    GgufBuilder &kv_u8(const std::string &key, uint8_t v);
    GgufBuilder &kv_i8(const std::string &key, int8_t v);
    GgufBuilder &kv_u16(const std::string &key, uint16_t v);
    GgufBuilder &kv_i16(const std::string &key, int16_t v);
    GgufBuilder &kv_u32(const std::string &key, uint32_t v);
    GgufBuilder &kv_i32(const std::string &key, int32_t v);
    GgufBuilder &kv_u64(const std::string &key, uint64_t v);
    GgufBuilder &kv_i64(const std::string &key, int64_t v);
    GgufBuilder &kv_f32(const std::string &key, float v);
    GgufBuilder &kv_f64(const std::string &key, double v);
    GgufBuilder &kv_bool(const std::string &key, bool v);
    GgufBuilder &kv_string(const std::string &key, const std::string &v);
    GgufBuilder &kv_array_u32(const std::string &key, const std::vector<uint32_t> &v);
    GgufBuilder &kv_array_bool(const std::string &key, const std::vector<bool> &v);
    GgufBuilder &kv_array_i32(const std::string &key, const std::vector<int32_t> &v);
    GgufBuilder &kv_array_f32(const std::string &key, const std::vector<float> &v);
    GgufBuilder &kv_array_string(const std::string &key, const std::vector<std::string> &v);
    // Any value: `value` is written verbatim after the key and the type id.
    GgufBuilder &kv_raw(const std::string &key, uint32_t type_id, const Bytes &value);
    // Replaces (or appends) general.alignment as UINT32 and pads with it.
    GgufBuilder &alignment(uint32_t a);
    bool has_kv(const std::string &key) const;
    GgufBuilder &remove_kv(const std::string &key);

    // --- tensors --------------------------------------------------------------
    // `data` must hold exactly the tensor's bytes (checked; throws std::invalid_argument).
    GgufBuilder &tensor(const std::string &name, GgmlType type, const std::vector<int64_t> &ne, Bytes data);
    // Deterministic random contents: small finite floats for float types, random
    // quants with small finite scales for block types.
    GgufBuilder &tensor_random(const std::string &name, GgmlType type, const std::vector<int64_t> &ne,
                               uint64_t seed);
    // No size check, any type id: for corrupt files. `data` is written as the tensor's bytes.
    GgufBuilder &tensor_raw(const std::string &name, uint32_t type_id, const std::vector<int64_t> &ne,
                            Bytes data);
    bool has_tensor(const std::string &name) const;
    size_t tensor_count() const { return tensors_.size(); }
    GgufBuilder &remove_tensor(const std::string &name);

    // --- corruption -----------------------------------------------------------
    GgufBuilder &override_magic(uint32_t magic) { magic_ = magic; return *this; }
    GgufBuilder &override_version(uint32_t version) { version_ = version; return *this; }
    GgufBuilder &override_tensor_count(uint64_t n) { n_tensors_override_ = n; return *this; }
    GgufBuilder &override_kv_count(uint64_t n) { n_kv_override_ = n; return *this; }
    // Stored offset of the index-th tensor (data is still written where it belongs).
    GgufBuilder &override_tensor_offset(size_t index, uint64_t offset);
    // Padding used for layout, without touching general.alignment.
    GgufBuilder &override_padding(uint32_t a) { padding_ = a; return *this; }

    // --- output ---------------------------------------------------------------
    Bytes build() const;
    void write(const std::string &path) const;

    // Bytes of a tensor of this shape (throws std::invalid_argument for bad shapes).
    static uint64_t tensor_bytes(GgmlType type, const std::vector<int64_t> &ne);
    // Deterministic random contents as tensor_random() writes them.
    static Bytes random_bytes(GgmlType type, const std::vector<int64_t> &ne, uint64_t seed);

private:
    struct Kv {
        std::string key;
        uint32_t type;
        Bytes value;
    };
    struct Tensor {
        std::string name;
        uint32_t type;
        std::vector<int64_t> ne;
        Bytes data;
        std::optional<uint64_t> offset_override;
    };
    GgufBuilder &put(const std::string &key, uint32_t type, Bytes value);

    std::vector<Kv> kvs_;
    std::vector<Tensor> tensors_;
    uint32_t magic_ = 0x46554747;
    uint32_t version_ = 3;
    uint32_t padding_ = 32;
    std::optional<uint64_t> n_tensors_override_, n_kv_override_;
};

// Writes `shards` as PREFIX-0000k-of-0000N.gguf, adding split.no (UINT16),
// split.count (UINT16) and, to the first shard, split.tensors.count (INT32).
// Returns the paths, first shard first.
std::vector<std::string> write_split_set(const std::string &prefix, std::vector<GgufBuilder> shards);

// A tiny MoE model of one of the supported architectures, F32 (or the given
// types) with deterministic random weights.
struct TinyMoe {
    std::string arch = "qwen3moe";  // qwen3moe | llama | olmoe | qwen2moe
    std::string name = "tiny";
    int32_t n_vocab = 64;
    int32_t n_ctx_train = 128;
    int32_t n_embd = 32;
    int32_t n_layer = 2;
    int32_t n_head = 4;
    int32_t n_head_kv = 2;   // olmoe models use n_head
    int32_t head_dim = 0;    // 0: n_embd / n_head (no key_length/value_length keys written)
    int32_t n_expert = 4;
    int32_t n_expert_used = 2;
    int32_t n_ff_expert = 32;
    int32_t n_ff_shared = 32;  // qwen2moe only
    float rope_freq_base = 10000.0f;
    float rms_eps = 1e-6f;
    bool tied_output = false;  // omit output.weight
    GgmlType dense_type = GgmlType::F32;   // 2-D dense matrices (attention, output, embedding)
    GgmlType expert_type = GgmlType::F32;  // the 3-D routed expert tensors
    uint64_t seed = 1;
};
GgufBuilder tiny_moe(const TinyMoe &m);

}  // namespace moe::test
