#include "gguf/gguf_writer.hpp"

#include <algorithm>
#include <cstring>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace moe::gguf {
namespace {

constexpr uint32_t kTypeU32 = 4, kTypeI32 = 5, kTypeF32 = 6, kTypeBool = 7, kTypeString = 8, kTypeArray = 9;
constexpr size_t kBufferBytes = 8u << 20;

uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)))
        fail(Status::invalid_argument, "GGUF alignment %u is not a power of two", alignment);
    if (alignment != 32) add_u32("general.alignment", alignment);
}

void GgufWriter::put(const void *data, size_t size) {
    const auto *p = static_cast<const uint8_t *>(data);
    if (header_mode_) {
        kv_bytes_.insert(kv_bytes_.end(), p, p + size);
        return;
    }
    while (size > 0) {
        size_t n = std::min(size, buffer_.size() - buffer_used_);
        std::memcpy(buffer_.data() + buffer_used_, p, n);
        buffer_used_ += n;
        p += n;
        size -= n;
        if (buffer_used_ == buffer_.size()) flush();
    }
}

void GgufWriter::flush() {
    out_->write(buffer_.data(), buffer_used_);
    buffer_used_ = 0;
}

void GgufWriter::put_string(const std::string &s) {
    put_u64(s.size());
    put(s.data(), s.size());
}

void GgufWriter::begin_kv(const std::string &key, uint32_t type) {
    if (!header_mode_) fail(Status::internal, "GGUF metadata %s added after begin()", key.c_str());
    if (std::find(keys_.begin(), keys_.end(), key) != keys_.end())
        fail(Status::invalid_argument, "GGUF metadata key %s added twice", key.c_str());
    keys_.push_back(key);
    ++n_kv_;
    put_string(key);
    put_u32(type);
}

void GgufWriter::add_u32(const std::string &key, uint32_t value) {
    begin_kv(key, kTypeU32);
    put_u32(value);
}
void GgufWriter::add_i32(const std::string &key, int32_t value) {
    begin_kv(key, kTypeI32);
    put(&value, 4);
}
void GgufWriter::add_f32(const std::string &key, float value) {
    begin_kv(key, kTypeF32);
    put(&value, 4);
}
void GgufWriter::add_bool(const std::string &key, bool value) {
    begin_kv(key, kTypeBool);
    uint8_t b = value ? 1 : 0;
    put(&b, 1);
}
void GgufWriter::add_string(const std::string &key, const std::string &value) {
    begin_kv(key, kTypeString);
    put_string(value);
}
void GgufWriter::add_string_array(const std::string &key, const std::vector<std::string> &values) {
    begin_kv(key, kTypeArray);
    put_u32(kTypeString);
    put_u64(values.size());
    for (const std::string &v : values) put_string(v);
}
void GgufWriter::add_f32_array(const std::string &key, const std::vector<float> &values) {
    begin_kv(key, kTypeArray);
    put_u32(kTypeF32);
    put_u64(values.size());
    put(values.data(), values.size() * 4);
}
void GgufWriter::add_i32_array(const std::string &key, const std::vector<int32_t> &values) {
    begin_kv(key, kTypeArray);
    put_u32(kTypeI32);
    put_u64(values.size());
    put(values.data(), values.size() * 4);
}

void GgufWriter::add_tensor(const std::string &name, GgmlType type, std::vector<int64_t> ne) {
    const TypeTraits &tr = type_traits(type);
    if (!tr.name || tr.block_elems == 0) fail(Status::invalid_argument, "tensor %s: unknown type", name.c_str());
    if (ne.empty() || ne.size() > 4) fail(Status::invalid_argument, "tensor %s: %zu dims", name.c_str(), ne.size());
    if (name.size() >= 64) fail(Status::invalid_argument, "tensor name %s is 64 bytes or longer", name.c_str());
    if (ne[0] % tr.block_elems != 0)
        fail(Status::invalid_argument, "tensor %s: row of %lld is not a multiple of %s blocks (%u)", name.c_str(),
             static_cast<long long>(ne[0]), tr.name, tr.block_elems);
    Tensor t{name, type, std::move(ne), 0, 0};
    // A shape whose byte count wraps around 64 bits would give a file size
    // (and offsets) far smaller than the data.
    auto overflow = [&] { fail(Status::invalid_argument, "tensor %s: size overflows 64 bits", t.name.c_str()); };
    uint64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) {
        if (t.ne[i] < 0 || __builtin_mul_overflow(rows, static_cast<uint64_t>(t.ne[i]), &rows)) overflow();
    }
    if (t.ne[0] < 0 || __builtin_mul_overflow(row_bytes(type, static_cast<uint64_t>(t.ne[0])), rows, &t.nbytes))
        overflow();
    uint64_t end = 0;  // of the tensor before
    if (!tensors_.empty() && (__builtin_add_overflow(tensors_.back().offset, tensors_.back().nbytes, &end) ||
                              end > UINT64_MAX - alignment_))
        overflow();
    t.offset = pad_to(end, alignment_);
    tensors_.push_back(std::move(t));
}

uint64_t GgufWriter::table_end() const {
    uint64_t size = 4 + 4 + 8 + 8 + kv_bytes_.size();
    for (const Tensor &t : tensors_) size += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
    return size;
}

uint64_t GgufWriter::header_size() const { return pad_to(table_end(), alignment_); }

uint64_t GgufWriter::file_size() const {
    if (tensors_.empty()) return header_size();
    return header_size() + tensors_.back().offset + tensors_.back().nbytes;
}

void GgufWriter::put_zeros(uint64_t n) {
    static const uint8_t zeros[256] = {};
    while (n > 0) {
        const size_t z = static_cast<size_t>(std::min<uint64_t>(n, sizeof zeros));
        put(zeros, z);
        n -= z;
    }
}

void GgufWriter::begin(AtomicFile &out) {
    if (out_) fail(Status::internal, "GgufWriter::begin called twice");
    out_ = &out;
    header_mode_ = false;
    buffer_.resize(kBufferBytes);
    put("GGUF", 4);
    put_u32(3);
    put_u64(tensors_.size());
    put_u64(n_kv_);
    put(kv_bytes_.data(), kv_bytes_.size());  // kept: file_size() counts them
    for (const Tensor &t : tensors_) {
        put_string(t.name);
        put_u32(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put_u64(static_cast<uint64_t>(d));
        put_u32(static_cast<uint32_t>(t.type));
        put_u64(t.offset);
    }
    put_zeros(header_size() - table_end());
    current_ = 0;
    current_written_ = 0;
    step_past_empty_tensors();
}

void GgufWriter::complete_tensor() {
    const Tensor &t = tensors_[current_];
    if (current_ + 1 < tensors_.size()) put_zeros(tensors_[current_ + 1].offset - (t.offset + t.nbytes));
    ++current_;
    current_written_ = 0;
}

void GgufWriter::step_past_empty_tensors() {
    while (current_ < tensors_.size() && tensors_[current_].nbytes == 0) complete_tensor();
}

void GgufWriter::write_data(const void *data, size_t size) {
    const auto *p = static_cast<const uint8_t *>(data);
    while (size > 0) {
        if (current_ >= tensors_.size()) fail(Status::internal, "GgufWriter: more tensor data than declared");
        const Tensor &t = tensors_[current_];
        size_t n = static_cast<size_t>(std::min<uint64_t>(size, t.nbytes - current_written_));
        put(p, n);
        p += n;
        size -= n;
        current_written_ += n;
        if (current_written_ == t.nbytes) {
            complete_tensor();
            step_past_empty_tensors();
        }
    }
}

void GgufWriter::finish() {
    if (!out_) fail(Status::internal, "GgufWriter::finish without begin");
    if (current_ != tensors_.size())
        fail(Status::internal, "GgufWriter: tensor %s not fully written", tensors_[current_].name.c_str());
    flush();
}

}  // namespace moe::gguf
