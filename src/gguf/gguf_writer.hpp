// Streaming GGUF v3 writer: metadata and tensor table first, then tensor data
// written in declaration order, so multi-GiB files never sit in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/ggml_types.hpp"

namespace moe {
class AtomicFile;
}

namespace moe::gguf {

class GgufWriter {
public:
    explicit GgufWriter(uint32_t alignment = 32);
    GgufWriter(const GgufWriter &) = delete;
    GgufWriter &operator=(const GgufWriter &) = delete;

    // Metadata, in the order added. Keys must be unique (checked).
    void add_u32(const std::string &key, uint32_t value);
    void add_i32(const std::string &key, int32_t value);
    void add_f32(const std::string &key, float value);
    void add_bool(const std::string &key, bool value);
    void add_string(const std::string &key, const std::string &value);
    void add_string_array(const std::string &key, const std::vector<std::string> &values);
    void add_f32_array(const std::string &key, const std::vector<float> &values);
    void add_i32_array(const std::string &key, const std::vector<int32_t> &values);

    // Declares a tensor; ne[0] must be a multiple of the type's block size.
    void add_tensor(const std::string &name, GgmlType type, std::vector<int64_t> ne);
    // Bytes of tensor data (without padding) of a declared tensor.
    uint64_t tensor_bytes(size_t index) const { return tensors_[index].nbytes; }
    size_t n_tensors() const { return tensors_.size(); }
    // Size the finished file will have.
    uint64_t file_size() const;

    // Writes the header to `out`, which the caller publishes once finish()
    // has returned. Afterwards write every tensor's bytes in declaration
    // order with write_data (any chunking).
    void begin(AtomicFile &out);
    void write_data(const void *data, size_t size);
    // Checks every tensor was fully written and flushes.
    void finish();

private:
    struct Tensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> ne;
        uint64_t nbytes = 0;
        uint64_t offset = 0;
    };
    void put(const void *data, size_t size);
    void put_string(const std::string &s);
    void put_u32(uint32_t v) { put(&v, 4); }
    void put_u64(uint64_t v) { put(&v, 8); }
    void put_zeros(uint64_t n);
    void begin_kv(const std::string &key, uint32_t type);
    void flush();
    uint64_t table_end() const;    // the header before its padding
    uint64_t header_size() const;  // padded to the alignment: where tensor data starts
    // The current tensor has all its bytes: pads to the next one and moves to it.
    void complete_tensor();
    // Zero-size tensors take no write_data call: moves past those at the
    // current position (also after the last data, so finish() finds them done).
    void step_past_empty_tensors();

    uint32_t alignment_;
    std::vector<uint8_t> kv_bytes_;  // encoded metadata pairs
    std::vector<std::string> keys_;
    uint64_t n_kv_ = 0;
    std::vector<Tensor> tensors_;
    AtomicFile *out_ = nullptr;
    std::vector<uint8_t> buffer_;
    size_t buffer_used_ = 0;
    size_t current_ = 0;          // tensor being written (never a zero-size one)
    uint64_t current_written_ = 0;
    bool header_mode_ = true;     // put() appends to kv_bytes_ while building metadata
};

}  // namespace moe::gguf
