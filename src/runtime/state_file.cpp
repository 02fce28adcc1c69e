#include "runtime/state_file.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/regular_file.hpp"
#include "common/unique_fd.hpp"
#include "moestream.h"

static_assert(std::endian::native == std::endian::little,
              "state files store token ids and KV rows in host order, which must be little-endian");

namespace moe::state {
namespace {

constexpr uint8_t kMagic[8] = {'M', 'O', 'E', 'S', 'T', 'A', 'T', 'E'};

uint64_t pad8(uint64_t n) { return (8 - (n & 7)) & 7; }

void put_u32(uint8_t *p, uint32_t v) { std::memcpy(p, &v, 4); }
void put_u64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// The header without its checksum (filled in by the caller).
void encode_header(uint8_t *h, const StateShape &shape, const StateContents &contents,
                   uint64_t payload_size) {
    std::memset(h, 0, kHeaderSize);
    std::memcpy(h, kMagic, 8);
    put_u32(h + 8, format_version_of(shape, contents));
    put_u32(h + 12, static_cast<uint32_t>(kHeaderSize));
    put_u64(h + 16, shape.fingerprint);
    put_u32(h + 24, shape.n_layer);
    put_u32(h + 28, shape.n_head_kv);
    put_u32(h + 32, shape.head_dim_k);
    put_u32(h + 36, shape.head_dim_v);
    put_u32(h + 40, shape.n_ctx);
    put_u32(h + 44, static_cast<uint32_t>(shape.kv_type));
    put_u32(h + 48, shape.n_vocab);
    put_u32(h + 52, shape.kv_layout);
    put_u32(h + 56, contents.n_past);
    put_u32(h + 60, static_cast<uint32_t>(contents.sections.size()));
    put_u64(h + 64, payload_size);
}

void encode_section_header(uint8_t *s, const SectionData &section) {
    put_u32(s, static_cast<uint32_t>(section.type));
    put_u32(s + 4, section.index);
    put_u64(s + 8, section.size());
}

uint64_t payload_size_of(const StateContents &contents) {
    uint64_t total = 0;
    for (const SectionData &s : contents.sections) {
        const uint64_t n = s.size();
        total += kSectionHeaderSize + n + pad8(n);
    }
    return total;
}

// Visits the payload as a sequence of byte ranges, in file order.
template <typename Emit>
void for_each_payload_range(const StateContents &contents, Emit &&emit) {
    static const uint8_t zeros[8] = {};
    for (const SectionData &s : contents.sections) {
        uint8_t sh[kSectionHeaderSize];
        encode_section_header(sh, s);
        emit(sh, kSectionHeaderSize);
        for (const auto &part : s.parts)
            if (!part.empty()) emit(part.data(), part.size());
        emit(zeros, pad8(s.size()));
    }
}

// The full header, checksum included.
void encode_full_header(uint8_t *h, const StateShape &shape, const StateContents &contents) {
    encode_header(h, shape, contents, payload_size_of(contents));
    XXH3_state_t *st = XXH3_createState();
    if (!st) throw std::bad_alloc();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, h, kChecksumOffset);
    for_each_payload_range(contents, [&](const uint8_t *p, size_t n) {
        if (n) XXH3_64bits_update(st, p, n);
    });
    put_u64(h + kChecksumOffset, XXH3_64bits_digest(st));
    XXH3_freeState(st);
}

// Collects small ranges into one buffer so a many-part section does not cost
// a system call per part; large ranges go straight to the file.
class BufferedWriter {
public:
    explicit BufferedWriter(AtomicFile &file) : file_(file) { buf_.reserve(kBufferBytes); }
    void put(const uint8_t *p, size_t n) {
        if (buf_.size() + n > kBufferBytes) flush();
        if (n >= kBufferBytes) {
            file_.write(p, n);
        } else {
            buf_.insert(buf_.end(), p, p + n);
        }
    }
    void flush() {
        if (!buf_.empty()) file_.write(buf_.data(), buf_.size());
        buf_.clear();
    }

private:
    static constexpr size_t kBufferBytes = 1 << 20;
    AtomicFile &file_;
    std::vector<uint8_t> buf_;
};

std::string describe_type(uint32_t type_id) {
    const char *name = type_traits(type_id).name;
    return name ? std::string(name) : format("type %u", type_id);
}

// Reads the image front to back; every read is bounds-checked.
class Cursor {
public:
    Cursor(const std::vector<uint8_t> &image, size_t pos, const std::string &label)
        : image_(image), pos_(pos), label_(label) {}
    size_t pos() const { return pos_; }
    size_t left() const { return image_.size() - pos_; }
    const uint8_t *take(uint64_t n, const char *what) {
        if (n > left())
            fail(Status::bad_format, "%s: %s at offset %zu needs %llu bytes but only %zu remain",
                 label_.c_str(), what, pos_, static_cast<unsigned long long>(n), left());
        const uint8_t *p = image_.data() + pos_;
        pos_ += static_cast<size_t>(n);
        return p;
    }

private:
    const std::vector<uint8_t> &image_;
    size_t pos_;
    const std::string &label_;
};

const char *section_name(uint32_t type) {
    switch (type) {
    case 1: return "tokens";
    case 2: return "positions";
    case 3: return "kv_k";
    case 4: return "kv_v";
    case 5: return "sampler";
    default: return "unknown";
    }
}

void check_shape_field(const std::string &label, const char *field, uint64_t file_value,
                       uint64_t ours) {
    if (file_value != ours)
        fail(Status::state_mismatch, "%s: saved with %s = %llu but this context has %llu", label.c_str(),
             field, static_cast<unsigned long long>(file_value), static_cast<unsigned long long>(ours));
}

// Fingerprint and shape: whether the file belongs to this model and context.
void check_identity(const RawHeader &raw, const StateShape &expected, const std::string &label) {
    const char *lbl = label.c_str();
    if (raw.shape.fingerprint != expected.fingerprint)
        fail(Status::state_mismatch,
             "%s: saved from another model (fingerprint %016llx, this model is %016llx)", lbl,
             static_cast<unsigned long long>(raw.shape.fingerprint),
             static_cast<unsigned long long>(expected.fingerprint));
    const StateShape &s = raw.shape;
    check_shape_field(label, "n_layer", s.n_layer, expected.n_layer);
    check_shape_field(label, "n_head_kv", s.n_head_kv, expected.n_head_kv);
    check_shape_field(label, "head_dim_k", s.head_dim_k, expected.head_dim_k);
    check_shape_field(label, "head_dim_v", s.head_dim_v, expected.head_dim_v);
    check_shape_field(label, "n_ctx", s.n_ctx, expected.n_ctx);
    if (s.kv_type != expected.kv_type)
        fail(Status::state_mismatch, "%s: saved with a %s KV cache but this context uses %s", lbl,
             describe_type(static_cast<uint32_t>(s.kv_type)).c_str(),
             describe_type(static_cast<uint32_t>(expected.kv_type)).c_str());
    check_shape_field(label, "n_vocab", s.n_vocab, expected.n_vocab);
    check_shape_field(label, "kv_layout", s.kv_layout, expected.kv_layout);
}

// Checks 1-4 (docs/state-format.md), which need only the header and the
// file's size: a reader runs them before reading the payload, so a file that
// is not a state of this context (a model, a huge file) is refused without
// reading it into memory. `header` is the file's first bytes, up to
// kHeaderSize of them.
RawHeader check_header(std::span<const uint8_t> header, uint64_t file_size, const StateShape &expected,
                       const std::string &label) {
    const char *lbl = label.c_str();
    // 1. magic
    if (header.size() < kHeaderSize)
        fail(Status::bad_format, "%s: %zu bytes is too short for a state file header (%zu bytes)", lbl,
             header.size(), kHeaderSize);
    if (std::memcmp(header.data(), kMagic, 8) != 0)
        fail(Status::bad_format, "%s: not a moestream state file (bad magic)", lbl);
    RawHeader raw;
    peek_header(header, raw);
    // 2. version
    if (raw.version < kOldestFormatVersion || raw.version > kFormatVersion)
        fail(Status::unsupported, "%s: state format version %u; this build reads versions %u to %u", lbl,
             raw.version, kOldestFormatVersion, kFormatVersion);
    // 3. header size
    if (raw.header_size != kHeaderSize)
        fail(Status::bad_format, "%s: header size %u, expected %zu", lbl, raw.header_size, kHeaderSize);
    // 4. payload size
    const uint64_t payload_available = file_size - kHeaderSize;
    if (raw.payload_size != payload_available)
        fail(Status::bad_format, "%s: header declares %llu payload bytes but the file has %llu (%s)", lbl,
             static_cast<unsigned long long>(raw.payload_size),
             static_cast<unsigned long long>(payload_available),
             raw.payload_size > payload_available ? "truncated" : "trailing bytes");
    const uint64_t limit = max_payload_size(expected);
    if (raw.payload_size > limit) {
        // A real state of another model or context shape says so, as it would
        // after the checksum; anything else is not a state this context can hold.
        check_identity(raw, expected, label);
        fail(Status::bad_format,
             "%s: header declares %llu payload bytes, more than the %llu bytes of the largest state this context "
             "can hold (n_ctx %u)",
             lbl, static_cast<unsigned long long>(raw.payload_size), static_cast<unsigned long long>(limit),
             expected.n_ctx);
    }
    return raw;
}

// Reads up to n bytes; fewer only at the end of the file.
size_t read_up_to(int fd, uint8_t *p, size_t n, const std::string &path) {
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, p + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            fail_errno(errno, "cannot read state file %s", path.c_str());
        }
        if (r == 0) break;
        got += static_cast<size_t>(r);
    }
    return got;
}

}  // namespace

uint64_t max_payload_size(const StateShape &shape) {
    auto section = [](uint64_t n) { return kSectionHeaderSize + n + pad8(n); };
    const uint64_t n_ctx = shape.n_ctx;
    uint64_t total = kOptionalSectionAllowance + 2 * section(n_ctx * sizeof(int32_t));
    for (size_t l = 0; l < shape.k_row_bytes.size(); ++l) total += section(n_ctx * shape.k_row_bytes[l]);
    for (size_t l = 0; l < shape.v_row_bytes.size(); ++l)
        if (shape.v_row_bytes[l] != 0) total += section(n_ctx * shape.v_row_bytes[l]);
    return total;
}

uint64_t model_fingerprint(const gguf::GgufFile &file) {
    XXH3_state_t *st = XXH3_createState();
    if (!st) throw std::bad_alloc();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, file.header_bytes(), static_cast<size_t>(file.header_size()));
    for (const gguf::TensorInfo &t : file.tensors()) {
        const uint64_t n = t.nbytes < kFingerprintSampleBytes ? t.nbytes : kFingerprintSampleBytes;
        if (t.data && n) XXH3_64bits_update(st, t.data, static_cast<size_t>(n));
    }
    const uint64_t sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return sum;
}

uint32_t format_version_of(const StateShape &shape, const StateContents &contents) {
    for (const SectionData &s : contents.sections) {
        const bool k = s.type == SectionType::kv_k, v = s.type == SectionType::kv_v;
        const std::vector<uint64_t> &row = k ? shape.k_row_bytes : shape.v_row_bytes;
        if ((k || v) && s.index < row.size() && s.size() != uint64_t(contents.n_past) * row[s.index])
            return 2;
    }
    return 1;
}

uint64_t SectionData::size() const {
    uint64_t n = 0;
    for (const auto &p : parts) n += p.size();
    return n;
}

std::vector<uint8_t> encode_state(const StateShape &shape, const StateContents &contents) {
    std::vector<uint8_t> out(kHeaderSize);
    encode_full_header(out.data(), shape, contents);
    out.reserve(kHeaderSize + payload_size_of(contents));
    for_each_payload_range(contents, [&](const uint8_t *p, size_t n) { out.insert(out.end(), p, p + n); });
    return out;
}

std::string write_state_file(const std::string &path, const StateShape &shape, const StateContents &contents,
                             const FileOps &ops) {
    uint8_t header[kHeaderSize];
    encode_full_header(header, shape, contents);
    // Private: a state holds the conversation (its tokens and KV cache).
    AtomicFile file(path, ops, 0600);
    BufferedWriter out(file);
    out.put(header, kHeaderSize);
    for_each_payload_range(contents, [&](const uint8_t *p, size_t n) { out.put(p, n); });
    out.flush();
    std::string warning;
    file.commit(&warning);
    return warning;
}

bool peek_header(std::span<const uint8_t> image, RawHeader &out) {
    if (image.size() < kHeaderSize) return false;
    const uint8_t *h = image.data();
    out.version = get_u32(h + 8);
    out.header_size = get_u32(h + 12);
    out.shape.fingerprint = get_u64(h + 16);
    out.shape.n_layer = get_u32(h + 24);
    out.shape.n_head_kv = get_u32(h + 28);
    out.shape.head_dim_k = get_u32(h + 32);
    out.shape.head_dim_v = get_u32(h + 36);
    out.shape.n_ctx = get_u32(h + 40);
    out.shape.kv_type = static_cast<GgmlType>(get_u32(h + 44));
    out.shape.n_vocab = get_u32(h + 48);
    out.shape.kv_layout = get_u32(h + 52);
    out.n_past = get_u32(h + 56);
    out.n_sections = get_u32(h + 60);
    out.payload_size = get_u64(h + 64);
    out.checksum = get_u64(h + 72);
    return true;
}

uint64_t compute_checksum(std::span<const uint8_t> image) {
    RawHeader raw;
    peek_header(image, raw);
    const uint64_t available = image.size() - kHeaderSize;
    const uint64_t n = raw.payload_size < available ? raw.payload_size : available;
    XXH3_state_t *st = XXH3_createState();
    if (!st) throw std::bad_alloc();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, image.data(), kChecksumOffset);
    XXH3_64bits_update(st, image.data() + kHeaderSize, static_cast<size_t>(n));
    const uint64_t sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return sum;
}

LoadedState parse_state(std::vector<uint8_t> image, const StateShape &expected, const std::string &label) {
    const char *lbl = label.c_str();
    if (expected.k_row_bytes.size() != expected.n_layer || expected.v_row_bytes.size() != expected.n_layer ||
        (!expected.window.empty() && expected.window.size() != expected.n_layer))
        fail(Status::internal, "%s: expected shape has %zu/%zu row sizes and %zu windows for %u layers", lbl,
             expected.k_row_bytes.size(), expected.v_row_bytes.size(), expected.window.size(), expected.n_layer);

    const RawHeader raw = check_header(std::span(image).first(std::min(image.size(), kHeaderSize)),
                                       image.size(), expected, label);
    // 5. checksum
    const uint64_t sum = compute_checksum(image);
    if (sum != raw.checksum)
        fail(Status::bad_format, "%s: checksum mismatch (file says %016llx, contents hash to %016llx): corrupt",
             lbl, static_cast<unsigned long long>(raw.checksum), static_cast<unsigned long long>(sum));
    // 6, 7. fingerprint and shape
    check_identity(raw, expected, label);
    if (raw.n_past > expected.n_ctx)
        fail(Status::bad_format, "%s: holds %u tokens, more than its n_ctx %u", lbl, raw.n_past,
             expected.n_ctx);

    // 8. sections
    LoadedState out;
    out.n_past = raw.n_past;
    out.version = raw.version;
    out.rows.assign(expected.n_layer, 0);
    out.k.resize(expected.n_layer);
    out.v.resize(expected.n_layer);
    std::vector<uint8_t> seen_k(expected.n_layer, 0), seen_v(expected.n_layer, 0);
    bool seen_tokens = false, seen_positions = false, seen_sampler = false;
    const uint64_t id_bytes = uint64_t(raw.n_past) * sizeof(int32_t);

    Cursor cur(image, kHeaderSize, label);
    for (uint32_t i = 0; i < raw.n_sections; ++i) {
        const size_t at = cur.pos();
        const uint8_t *sh = cur.take(kSectionHeaderSize, "section header");
        const uint32_t type = get_u32(sh), index = get_u32(sh + 4);
        const uint64_t length = get_u64(sh + 8);
        const uint8_t *data = cur.take(length, "section data");
        const uint8_t *padding = cur.take(pad8(length), "section padding");
        for (uint64_t p = 0; p < pad8(length); ++p)
            if (padding[p] != 0)
                fail(Status::bad_format, "%s: non-zero padding after section %u at offset %zu", lbl, i, at);
        const auto bytes = std::span<const uint8_t>(data, static_cast<size_t>(length));
        auto expect_length = [&](uint64_t want) {
            if (length != want)
                fail(Status::bad_format, "%s: %s section (layer %u) at offset %zu has %llu bytes, expected %llu",
                     lbl, section_name(type), index, at, static_cast<unsigned long long>(length),
                     static_cast<unsigned long long>(want));
        };
        auto expect_once = [&](bool &seen) {
            if (seen) fail(Status::bad_format, "%s: duplicate %s section at offset %zu", lbl, section_name(type), at);
            seen = true;
        };
        auto layer_of = [&]() {
            if (index >= expected.n_layer)
                fail(Status::bad_format, "%s: %s section at offset %zu names layer %u of %u", lbl,
                     section_name(type), at, index, expected.n_layer);
            return index;
        };
        // The rows of a KV section: n_past in version 1; in version 2 whole
        // rows, the same count in K and V, at most n_past and for a layer
        // without a window exactly n_past (checked once all are read).
        auto kv_rows = [&](uint32_t l, uint64_t row_bytes, bool other_seen) {
            if (raw.version == 1 || row_bytes == 0) {
                expect_length(uint64_t(raw.n_past) * row_bytes);
                return raw.n_past;
            }
            if (length % row_bytes != 0 || length / row_bytes > raw.n_past)
                fail(Status::bad_format,
                     "%s: %s section (layer %u) at offset %zu has %llu bytes: not whole rows of %llu bytes for at "
                     "most %u positions",
                     lbl, section_name(type), l, at, static_cast<unsigned long long>(length),
                     static_cast<unsigned long long>(row_bytes), raw.n_past);
            const uint32_t rows = uint32_t(length / row_bytes);
            if (other_seen && rows != out.rows[l])
                fail(Status::bad_format, "%s: layer %u holds %u K rows but %u V rows", lbl, l,
                     type == static_cast<uint32_t>(SectionType::kv_k) ? rows : out.rows[l],
                     type == static_cast<uint32_t>(SectionType::kv_k) ? out.rows[l] : rows);
            return rows;
        };
        switch (type) {
        case static_cast<uint32_t>(SectionType::tokens):
            expect_once(seen_tokens);
            expect_length(id_bytes);
            out.tokens = {reinterpret_cast<const int32_t *>(data), raw.n_past};
            break;
        case static_cast<uint32_t>(SectionType::positions):
            expect_once(seen_positions);
            expect_length(id_bytes);
            out.positions = {reinterpret_cast<const int32_t *>(data), raw.n_past};
            break;
        case static_cast<uint32_t>(SectionType::kv_k): {
            const uint32_t l = layer_of();
            if (seen_k[l]) fail(Status::bad_format, "%s: duplicate kv_k section for layer %u", lbl, l);
            seen_k[l] = 1;
            out.rows[l] = kv_rows(l, expected.k_row_bytes[l], seen_v[l]);
            out.k[l] = bytes;
            break;
        }
        case static_cast<uint32_t>(SectionType::kv_v): {
            const uint32_t l = layer_of();
            if (expected.v_row_bytes[l] == 0)
                fail(Status::bad_format, "%s: kv_v section for layer %u, which has no V cache", lbl, l);
            if (seen_v[l]) fail(Status::bad_format, "%s: duplicate kv_v section for layer %u", lbl, l);
            seen_v[l] = 1;
            out.rows[l] = kv_rows(l, expected.v_row_bytes[l], seen_k[l]);
            out.v[l] = bytes;
            break;
        }
        case static_cast<uint32_t>(SectionType::sampler):
            expect_once(seen_sampler);
            out.sampler = bytes;
            out.has_sampler = true;
            break;
        default:
            if (!(type & kOptionalSectionBit))
                fail(Status::unsupported, "%s: unknown required section type %u at offset %zu", lbl, type, at);
            break;
        }
    }
    if (cur.left() != 0)
        fail(Status::bad_format, "%s: %zu bytes after the last of %u sections", lbl, cur.left(), raw.n_sections);
    if (!seen_tokens) fail(Status::bad_format, "%s: no tokens section", lbl);
    if (!seen_positions) fail(Status::bad_format, "%s: no positions section", lbl);
    for (uint32_t l = 0; l < expected.n_layer; ++l) {
        if (!seen_k[l]) fail(Status::bad_format, "%s: no kv_k section for layer %u", lbl, l);
        if (expected.v_row_bytes[l] != 0 && !seen_v[l])
            fail(Status::bad_format, "%s: no kv_v section for layer %u", lbl, l);
        // What the layer reads from n_past on: all positions, or the window's.
        const uint32_t window = expected.window.empty() ? 0 : expected.window[l];
        const uint32_t needed = window == 0 ? raw.n_past : std::min(raw.n_past, window - 1);
        if (out.rows[l] < needed || (window == 0 && out.rows[l] != raw.n_past))
            fail(Status::bad_format, "%s: layer %u holds the rows of %u positions but reads %s%u", lbl, l,
                 out.rows[l], window == 0 ? "" : "the last ", needed);
    }
    for (uint32_t t = 0; t < raw.n_past; ++t) {
        const int32_t tok = out.tokens[t];
        if (tok < 0 || static_cast<uint32_t>(tok) >= expected.n_vocab)
            fail(Status::bad_format, "%s: token %u has id %d outside [0, %u)", lbl, t, tok, expected.n_vocab);
        const int32_t pos = out.positions[t];
        if (pos < 0 || static_cast<uint32_t>(pos) >= expected.n_ctx || (t > 0 && pos <= out.positions[t - 1]))
            fail(Status::bad_format, "%s: token %u has position %d (positions must increase within [0, %u))",
                 lbl, t, pos, expected.n_ctx);
    }
    out.image = std::move(image);  // the views stay valid: moving a vector keeps its buffer
    return out;
}

LoadedState read_state_file(const std::string &path, const StateShape &expected) {
    // Refuses a pipe (or device, or directory) at once: a blocking open of a
    // named pipe would wait for a writer.
    uint64_t file_size = 0;
    const UniqueFd fd = open_regular_fd_or_fail(path, "state file", &file_size);
    std::vector<uint8_t> image(static_cast<size_t>(std::min<uint64_t>(file_size, kHeaderSize)));
    image.resize(read_up_to(fd.get(), image.data(), image.size(), path));
    check_header(image, file_size, expected, path);  // before the payload costs any memory
    image.resize(static_cast<size_t>(file_size));
    const size_t got = kHeaderSize + read_up_to(fd.get(), image.data() + kHeaderSize, image.size() - kHeaderSize, path);
    image.resize(got);  // shorter if the file shrank while being read: it will not verify
    return parse_state(std::move(image), expected, path);
}

}  // namespace moe::state
