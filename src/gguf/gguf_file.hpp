// Bounds-checked GGUF v2/v3 reader over a read-only mapping.
//
// Nothing read from the file is trusted: every length, count, offset and
// dimension is checked before use, and any violation throws
// moe::Error(Status::bad_format, "<path>: <what is wrong>").
// Split sets (NAME-00001-of-0000N.gguf) are opened from the first shard; the
// tensors of all shards are indexed together.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/ggml_types.hpp"
#include "common/mapped_file.hpp"

namespace moe::gguf {

enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char *value_type_name(ValueType t);

// One metadata value. Scalars are widened into the matching field; arrays keep
// their element type and a view of the elements in the mapping (strings of an
// array are decoded into `strings`).
struct Value {
    ValueType type = ValueType::UINT8;
    ValueType elem_type = ValueType::UINT8;  // for ARRAY
    uint64_t u = 0;       // unsigned scalars and BOOL
    int64_t i = 0;        // signed scalars
    double f = 0;         // FLOAT32 / FLOAT64
    std::string_view s;   // STRING (points into the mapping)
    uint64_t count = 0;   // ARRAY element count
    const uint8_t *array_data = nullptr;  // ARRAY of non-strings: raw little-endian elements
    std::vector<std::string_view> strings; // ARRAY of STRING
};

struct TensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};
    GgmlType type = GgmlType::F32;
    uint32_t shard = 0;         // index into the split set
    uint64_t offset = 0;        // relative to the shard's data section
    uint64_t file_offset = 0;   // absolute position in the shard file
    uint64_t nbytes = 0;
    const uint8_t *data = nullptr;  // into the shard's mapping

    uint64_t n_elements() const { return uint64_t(ne[0]) * ne[1] * ne[2] * ne[3]; }
    // Whether the shape has at most n dimensions: ne[d] == 1 for every d >= n.
    // Writers differ on trailing 1s (llama.cpp leaves them out of n_dims, a
    // NumPy shape may keep them), so every shape check asks this, never n_dims.
    bool fits_dims(uint32_t n) const {
        for (uint32_t d = n; d < 4; ++d)
            if (ne[d] != 1) return false;
        return true;
    }
    uint64_t row_bytes() const { return moe::row_bytes(type, uint64_t(ne[0])); }
};

class GgufFile {
public:
    // Opens and validates; throws moe::Error on any problem.
    static std::unique_ptr<GgufFile> open(const std::string &path);
    // Parses an in-memory image (used by the fuzzer); the bytes must outlive the object.
    static std::unique_ptr<GgufFile> parse_memory(const uint8_t *data, size_t size,
                                                  const std::string &label = "<memory>");

    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    const std::string &path() const { return path_; }
    size_t n_shards() const { return shards_.size(); }
    const std::string &shard_path(size_t i) const { return shards_[i].path; }
    uint64_t shard_size(size_t i) const { return shards_[i].size; }
    uint64_t total_file_bytes() const;
    // Throws invalid_argument, naming `what` (e.g. "state file"), when `path`
    // names one of the shards (the same device and inode: a symbolic or hard
    // link to it too): a file the library writes is renamed over its target,
    // which would replace the model with it.
    void refuse_as_output(const std::string &path, const char *what) const;

    // Metadata (from the first shard; split.* keys of later shards are checked).
    const Value *find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }
    const std::vector<std::pair<std::string, Value>> &metadata() const { return kv_; }
    // Typed getters: throw bad_format if present with another type, return fallback if absent.
    // get_u32 accepts any integer type whose value fits; get_f32 accepts FLOAT32/FLOAT64.
    uint32_t get_u32(std::string_view key, uint32_t fallback) const;
    std::optional<uint32_t> get_u32(std::string_view key) const;
    float get_f32(std::string_view key, float fallback) const;
    bool get_bool(std::string_view key, bool fallback) const;
    std::string get_string(std::string_view key, std::string_view fallback = {}) const;
    // Array accessors; empty vector when absent; bad_format on wrong element type.
    std::vector<std::string_view> get_string_array(std::string_view key) const;
    std::vector<float> get_f32_array(std::string_view key) const;
    std::vector<int32_t> get_i32_array(std::string_view key) const;
    // Scalar or per-layer array of integers (e.g. head_count_kv); empty when absent.
    std::vector<uint32_t> get_u32_or_array(std::string_view key) const;

    // Tensors in file order.
    const std::vector<TensorInfo> &tensors() const { return tensors_; }
    const TensorInfo *tensor(std::string_view name) const;

    // The header + tensor table of shard 0 as a byte range (used to fingerprint the model).
    const uint8_t *header_bytes() const { return shards_[0].data; }
    uint64_t header_size() const { return shards_[0].data_offset; }
    // Start of a shard's tensor data section (absolute file offset).
    uint64_t data_offset(size_t shard) const { return shards_[shard].data_offset; }
    // The read-only mapping of a shard (empty for parse_memory images).
    const MappedFile &shard_mapping(size_t i) const { return shards_[i].map; }

private:
    struct Shard {
        std::string path;
        MappedFile map;
        const uint8_t *data = nullptr;  // map.data(), or the caller's bytes for parse_memory
        uint64_t size = 0;
        uint64_t data_offset = 0;
        uint32_t alignment = 32;
    };
    GgufFile() = default;
    // Parses shard `index` (already in shards_) and appends its tensors; its
    // metadata goes to `kv_out`.
    void parse_shard(uint32_t index, std::vector<std::pair<std::string, Value>> &kv_out);
    void index_tensors();
    void open_split_set(const std::string &first_path);

    std::string path_;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    std::vector<Shard> shards_;
    std::vector<std::pair<std::string, Value>> kv_;
    std::unordered_map<std::string_view, size_t> kv_index_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace moe::gguf
