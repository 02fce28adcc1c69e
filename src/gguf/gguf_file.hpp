// Bounds-checked GGUF v2/v3 reader over a read-only mapping.
//
// Nothing read from the file is trusted: every length, count, offset and
// dimension is checked before use, and any violation throws
// moe::Error(Status::bad_format, "<path>: <what is wrong>").
// Split sets (NAME-00001-of-0000N.gguf) are opened from the first shard; the
// tensors of all shards are indexed together.
//
// Memory is bounded by the file, never by what its counts claim. Keys,
// strings and arrays stay in the file's bytes and are read in place (a
// string array costs nothing per element, however long). The reader keeps a
// 40-byte row per metadata pair, which takes at least 14 bytes of file, and
// a 120-byte one per tensor (plus its name beyond 15 bytes), which takes at
// least 25; each table is sized only once its count has been checked
// against the bytes left, so a count the rest of the file cannot hold is
// refused before anything is allocated for it. Opening a file allocates at
// most 6 bytes per byte of its header at the peak, plus 64 KiB
// (tests/unit/test_gguf_memory.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ggml_types.hpp"
#include "common/mapped_file.hpp"

namespace moe::gguf {

enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char *value_type_name(ValueType t);

// The strings of an ARRAY of STRING, read in place from the file's bytes:
// holding one costs nothing per element, and walking it decodes each length
// as it goes. Valid while the GgufFile it came from lives.
class StringArray {
public:
    class iterator {
    public:
        using iterator_concept = std::forward_iterator_tag;
        using iterator_category = std::input_iterator_tag;  // yields values, not references
        using value_type = std::string_view;
        using difference_type = std::ptrdiff_t;
        using reference = std::string_view;

        iterator() = default;
        std::string_view operator*() const {
            uint64_t len;
            std::memcpy(&len, at_, 8);
            return {reinterpret_cast<const char *>(at_ + 8), static_cast<size_t>(len)};
        }
        iterator &operator++() {
            at_ += 8 + (**this).size();
            ++index_;
            return *this;
        }
        iterator operator++(int) {
            iterator before = *this;
            ++*this;
            return before;
        }
        bool operator==(const iterator &o) const { return index_ == o.index_; }

    private:
        friend class StringArray;
        iterator(const uint8_t *at, uint64_t index) : at_(at), index_(index) {}
        const uint8_t *at_ = nullptr;  // the length field of the current string
        uint64_t index_ = 0;
    };

    StringArray() = default;
    // `first` is the length field of the first of `count` encoded strings,
    // all of which the reader has checked lie inside the file.
    StringArray(const uint8_t *first, uint64_t count) : first_(first), count_(count) {}
    uint64_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    iterator begin() const { return {first_, 0}; }
    iterator end() const { return {nullptr, count_}; }

private:
    const uint8_t *first_ = nullptr;
    uint64_t count_ = 0;
};

// One metadata value, decoded on lookup. Scalars are widened into the
// matching field; strings and arrays are views of the file's bytes.
struct Value {
    ValueType type = ValueType::UINT8;
    ValueType elem_type = ValueType::UINT8;  // for ARRAY
    uint64_t u = 0;       // unsigned scalars and BOOL
    int64_t i = 0;        // signed scalars
    double f = 0;         // FLOAT32 / FLOAT64
    std::string_view s;   // STRING
    uint64_t count = 0;   // ARRAY element count
    const uint8_t *array_data = nullptr;  // ARRAY: the raw little-endian elements
    StringArray strings;                  // ARRAY of STRING: its strings
};

// A metadata pair as it lies in the file: its key and where its value is
// encoded (both checked when the file was opened; GgufFile::find decodes it).
struct MetadataEntry {
    std::string_view key;
    ValueType type = ValueType::UINT8;
    const uint8_t *value = nullptr;
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
    std::optional<Value> find(std::string_view key) const;
    bool has(std::string_view key) const { return kv_.find(key) != nullptr; }
    // The pairs in file order.
    const std::vector<MetadataEntry> &metadata() const { return kv_.entries; }
    // Typed getters: throw bad_format if present with another type, return fallback if absent.
    // get_u32 accepts any integer type whose value fits; get_f32 accepts FLOAT32/FLOAT64.
    uint32_t get_u32(std::string_view key, uint32_t fallback) const;
    std::optional<uint32_t> get_u32(std::string_view key) const;
    float get_f32(std::string_view key, float fallback) const;
    bool get_bool(std::string_view key, bool fallback) const;
    std::string get_string(std::string_view key, std::string_view fallback = {}) const;
    // Array accessors; empty when absent; bad_format on wrong element type.
    StringArray get_string_array(std::string_view key) const;
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
    // One shard's metadata: the pairs in file order and, for lookups, their
    // indices sorted by key.
    struct Metadata {
        std::vector<MetadataEntry> entries;
        std::vector<size_t> by_key;
        const MetadataEntry *find(std::string_view key) const;
    };
    GgufFile() = default;
    // Parses shard `index` (already in shards_) and appends its tensors; its
    // metadata goes to `kv_out`.
    void parse_shard(uint32_t index, Metadata &kv_out);
    void index_tensors();
    void open_split_set(const std::string &first_path);

    std::string path_;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    std::vector<Shard> shards_;
    Metadata kv_;
    std::vector<TensorInfo> tensors_;
    std::vector<size_t> tensors_by_name_;  // indices into tensors_, sorted by name
};

}  // namespace moe::gguf
