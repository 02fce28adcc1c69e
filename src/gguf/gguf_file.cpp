#include "gguf/gguf_file.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace moe::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kDefaultAlignment = 32;
constexpr size_t kMaxTensorNameBytes = 63;  // names must be shorter than 64 bytes
constexpr uint32_t kMaxDims = 4;
// The fewest bytes an entry can take in the file, which bound a count by the
// bytes left after it.
constexpr uint64_t kMinStringBytes = 8;     // its length, for an empty string
constexpr uint64_t kMinMetadataBytes = 14;  // key length, a 1-byte key, type, a 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 25;  // name length, a 1-byte name, n_dims (0), type, offset

bool is_valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Size of one fixed-width element; 0 for STRING and ARRAY.
uint64_t scalar_size(ValueType t) {
    switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
    }
    return 0;
}

bool is_integer_type(ValueType t) {
    switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
        return true;
    default:
        return false;
    }
}

bool is_signed_type(ValueType t) {
    return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
           t == ValueType::INT64;
}

std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 80)) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f) out += c;
        else out += format("\\x%02x", u);
    }
    if (s.size() > 80) out += "...";
    return out;
}

// Overflow-checked helpers; `what` names the quantity for the error message.
bool add_overflows(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_add_overflow(a, b, out); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_mul_overflow(a, b, out); }

// Cursor over one shard's bytes; every read is bounds-checked.
class Reader {
public:
    Reader(const uint8_t *data, uint64_t size, const std::string &label)
        : data_(data), size_(size), label_(label) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }
    const uint8_t *here() const { return data_ + pos_; }

    void need(uint64_t n, const std::string &what) const {
        if (n > remaining())
            fail(Status::bad_format,
                 "%s: truncated at offset %llu reading %s (need %llu bytes, %llu left)",
                 label_.c_str(), static_cast<unsigned long long>(pos_), what.c_str(),
                 static_cast<unsigned long long>(n), static_cast<unsigned long long>(remaining()));
    }
    // Refuses a count of entries of at least `min_bytes` each that the bytes
    // left cannot hold, before any entry is read or stored.
    void need_entries(uint64_t count, uint64_t min_bytes, const std::string &what) const {
        if (count > remaining() / min_bytes)
            fail(Status::bad_format,
                 "%s: truncated or corrupt: %s claims %llu entries of at least %llu bytes, but only %llu bytes "
                 "are left at offset %llu",
                 label_.c_str(), what.c_str(), static_cast<unsigned long long>(count),
                 static_cast<unsigned long long>(min_bytes), static_cast<unsigned long long>(remaining()),
                 static_cast<unsigned long long>(pos_));
    }
    void skip(uint64_t n, const std::string &what) {
        need(n, what);
        pos_ += n;
    }
    template <typename T>
    T read(const std::string &what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string_view read_string(const std::string &what) {
        const uint64_t len = read<uint64_t>(what + " length");
        need(len, what);
        std::string_view s(reinterpret_cast<const char *>(data_ + pos_), len);
        pos_ += len;
        return s;
    }

private:
    const uint8_t *data_;
    uint64_t size_;
    uint64_t pos_ = 0;
    const std::string &label_;
};

// Reads one fixed-width element of type t at p into the widened fields of v.
void decode_scalar(ValueType t, const uint8_t *p, Value &v) {
    switch (t) {
    case ValueType::UINT8: v.u = p[0]; break;
    case ValueType::INT8: v.i = static_cast<int8_t>(p[0]); break;
    case ValueType::BOOL: v.u = p[0]; break;
    case ValueType::UINT16: { uint16_t x; std::memcpy(&x, p, 2); v.u = x; break; }
    case ValueType::INT16: { int16_t x; std::memcpy(&x, p, 2); v.i = x; break; }
    case ValueType::UINT32: { uint32_t x; std::memcpy(&x, p, 4); v.u = x; break; }
    case ValueType::INT32: { int32_t x; std::memcpy(&x, p, 4); v.i = x; break; }
    case ValueType::FLOAT32: { float x; std::memcpy(&x, p, 4); v.f = x; break; }
    case ValueType::UINT64: { uint64_t x; std::memcpy(&x, p, 8); v.u = x; break; }
    case ValueType::INT64: { int64_t x; std::memcpy(&x, p, 8); v.i = x; break; }
    case ValueType::FLOAT64: { double x; std::memcpy(&x, p, 8); v.f = x; break; }
    case ValueType::STRING: case ValueType::ARRAY: break;
    }
}

// Checks the value of `key`, of type `type`, and steps past it. Nothing is
// kept: decode_value reads it again from the file's bytes when it is looked up.
void skip_value(Reader &r, const std::string &label, ValueType type, std::string_view key) {
    const std::string what = "the value of key '" + printable(key) + "'";
    if (type == ValueType::STRING) {
        r.read_string(what);
        return;
    }
    if (type != ValueType::ARRAY) {
        const uint64_t n = scalar_size(type);
        r.need(n, what);
        if (type == ValueType::BOOL && r.here()[0] > 1)
            fail(Status::bad_format, "%s: key '%s' is a BOOL with value %u (expected 0 or 1)", label.c_str(),
                 printable(key).c_str(), r.here()[0]);
        r.skip(n, what);
        return;
    }
    const uint32_t elem = r.read<uint32_t>("the element type of array '" + printable(key) + "'");
    if (!is_valid_value_type(elem))
        fail(Status::bad_format, "%s: array '%s' has unknown element type %u", label.c_str(),
             printable(key).c_str(), elem);
    const auto elem_type = static_cast<ValueType>(elem);
    if (elem_type == ValueType::ARRAY)
        fail(Status::bad_format, "%s: array '%s' contains arrays (nested arrays are not supported)",
             label.c_str(), printable(key).c_str());
    const uint64_t count = r.read<uint64_t>("the element count of array '" + printable(key) + "'");
    const std::string elems_what = "array '" + printable(key) + "'";
    if (elem_type == ValueType::STRING) {
        r.need_entries(count, kMinStringBytes, elems_what);
        const std::string elem_what = "an element of array '" + printable(key) + "'";
        for (uint64_t k = 0; k < count; ++k) r.read_string(elem_what);
        return;
    }
    const uint64_t elem_bytes = scalar_size(elem_type);
    r.need_entries(count, elem_bytes, elems_what);  // also keeps count x size from overflowing
    const uint8_t *elems = r.here();
    r.skip(count * elem_bytes, "the elements of array '" + printable(key) + "'");
    if (elem_type == ValueType::BOOL) {
        for (uint64_t k = 0; k < count; ++k)
            if (elems[k] > 1)
                fail(Status::bad_format, "%s: array '%s' element %llu is a BOOL with value %u",
                     label.c_str(), printable(key).c_str(), static_cast<unsigned long long>(k), elems[k]);
    }
}

// Decodes a value of type `type` encoded at `p`, which skip_value has checked.
Value decode_value(ValueType type, const uint8_t *p) {
    Value v;
    v.type = type;
    if (type == ValueType::STRING) {
        uint64_t len;
        std::memcpy(&len, p, 8);
        v.s = std::string_view(reinterpret_cast<const char *>(p + 8), static_cast<size_t>(len));
    } else if (type != ValueType::ARRAY) {
        decode_scalar(type, p, v);
    } else {
        uint32_t elem;
        std::memcpy(&elem, p, 4);
        v.elem_type = static_cast<ValueType>(elem);
        std::memcpy(&v.count, p + 4, 8);
        v.array_data = p + 12;
        if (v.elem_type == ValueType::STRING) v.strings = StringArray(v.array_data, v.count);
    }
    return v;
}

// Indices 0..n-1 sorted by name_of(index), for lookups by binary search (8
// bytes an entry, where a hash map would take about 50). When two names are
// equal, on_duplicate (which throws) gets the index of one of them.
template <typename NameOf, typename OnDuplicate>
std::vector<size_t> sorted_by_name(size_t n, NameOf name_of, OnDuplicate on_duplicate) {
    std::vector<size_t> order(n);
    for (size_t k = 0; k < n; ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return name_of(a) < name_of(b); });
    for (size_t k = 1; k < n; ++k)
        if (name_of(order[k - 1]) == name_of(order[k])) on_duplicate(order[k]);
    return order;
}

// The index whose name is `name` in an order from sorted_by_name, or nullptr.
template <typename NameOf>
const size_t *find_by_name(const std::vector<size_t> &order, std::string_view name, NameOf name_of) {
    const auto it = std::lower_bound(order.begin(), order.end(), name,
                                     [&](size_t k, std::string_view n) { return name_of(k) < n; });
    return it != order.end() && name_of(*it) == name ? &*it : nullptr;
}

uint64_t pad_to(uint64_t x, uint64_t align, const std::string &label, const char *what) {
    const uint64_t rem = x % align;
    uint64_t out = x;
    if (rem != 0 && add_overflows(x, align - rem, &out))
        fail(Status::bad_format, "%s: %s overflows when padded to %llu bytes", label.c_str(), what,
             static_cast<unsigned long long>(align));
    return out;
}

// Integer value (scalar or array element) as a signed/unsigned pair; false for non-integers.
struct IntValue {
    bool negative = false;
    uint64_t magnitude = 0;  // value when !negative
};

bool integer_of(ValueType t, const Value &v, IntValue *out) {
    if (!is_integer_type(t)) return false;
    if (is_signed_type(t)) {
        out->negative = v.i < 0;
        out->magnitude = v.i < 0 ? 0 : static_cast<uint64_t>(v.i);
    } else {
        out->negative = false;
        out->magnitude = v.u;
    }
    return true;
}

std::string split_shard_name(const std::string &prefix, uint32_t no1, uint32_t count) {
    return prefix + format("-%05u-of-%05u.gguf", no1, count);
}

}  // namespace

const char *value_type_name(ValueType t) {
    switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
    }
    return "?";
}

// ---------------------------------------------------------------------------
// Parsing

void GgufFile::parse_shard(uint32_t index, Metadata &kv_out) {
    Shard &shard = shards_[index];
    const std::string &label = shard.path;
    Reader r(shard.data, shard.size, label);

    const uint32_t magic = r.read<uint32_t>("the magic");
    if (magic != kMagic)
        fail(Status::bad_format, "%s: not a GGUF file (magic 0x%08x, expected \"GGUF\")", label.c_str(),
             magic);
    const uint32_t version = r.read<uint32_t>("the version");
    if (version != 2 && version != 3) {
        if (version != 0 && (version & 0xFFFF) == 0)
            fail(Status::bad_format, "%s: GGUF version 0x%08x looks byte-swapped (big-endian file?)",
                 label.c_str(), version);
        fail(Status::bad_format, "%s: unsupported GGUF version %u (supported: 2, 3)", label.c_str(),
             version);
    }
    if (index == 0) version_ = version;

    const uint64_t n_tensors = r.read<uint64_t>("the tensor count");
    const uint64_t n_kv = r.read<uint64_t>("the metadata count");
    if (n_tensors > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(Status::bad_format, "%s: tensor count %llu is negative as int64", label.c_str(),
             static_cast<unsigned long long>(n_tensors));
    if (n_kv > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(Status::bad_format, "%s: metadata count %llu is negative as int64", label.c_str(),
             static_cast<unsigned long long>(n_kv));

    // Every entry takes some bytes: a count the bytes left cannot hold is
    // refused here, and the tables are sized only after this check.
    r.need_entries(n_kv, kMinMetadataBytes, "the metadata count");
    r.need_entries(n_tensors, kMinTensorInfoBytes, "the tensor count");

    // Metadata: each pair is checked and located, and decoded again on lookup.
    kv_out.entries.reserve(n_kv);
    for (uint64_t k = 0; k < n_kv; ++k) {
        const std::string_view key = r.read_string(format("the key of metadata entry %llu",
                                                          static_cast<unsigned long long>(k)));
        if (key.empty())
            fail(Status::bad_format, "%s: metadata entry %llu has an empty key", label.c_str(),
                 static_cast<unsigned long long>(k));
        const uint32_t type = r.read<uint32_t>("the type of key '" + printable(key) + "'");
        if (!is_valid_value_type(type))
            fail(Status::bad_format, "%s: key '%s' has unknown value type %u", label.c_str(),
                 printable(key).c_str(), type);
        const uint8_t *value = r.here();
        skip_value(r, label, static_cast<ValueType>(type), key);
        kv_out.entries.push_back(MetadataEntry{key, static_cast<ValueType>(type), value});
    }
    const auto key_of = [&](size_t k) { return kv_out.entries[k].key; };
    kv_out.by_key = sorted_by_name(kv_out.entries.size(), key_of, [&](size_t k) {
        fail(Status::bad_format, "%s: duplicate metadata key '%s'", label.c_str(), printable(key_of(k)).c_str());
    });

    // general.alignment: UINT32, non-zero power of two.
    uint32_t alignment = kDefaultAlignment;
    if (const MetadataEntry *e = kv_out.find("general.alignment")) {
        const Value v = decode_value(e->type, e->value);
        if (v.type != ValueType::UINT32)
            fail(Status::bad_format, "%s: general.alignment has type %s, expected UINT32", label.c_str(),
                 value_type_name(v.type));
        if (v.u == 0 || (v.u & (v.u - 1)) != 0)
            fail(Status::bad_format, "%s: general.alignment %llu is not a power of two", label.c_str(),
                 static_cast<unsigned long long>(v.u));
        alignment = static_cast<uint32_t>(v.u);
    }
    shard.alignment = alignment;
    if (index == 0) alignment_ = alignment;

    // Tensor table.
    const size_t first_tensor = tensors_.size();
    r.need_entries(n_tensors, kMinTensorInfoBytes, "the tensor count");  // the bytes after the metadata
    tensors_.reserve(first_tensor + n_tensors);
    uint64_t expected_offset = 0;  // tensors are packed in table order, each padded to alignment
    for (uint64_t k = 0; k < n_tensors; ++k) {
        const std::string where = format("tensor %llu", static_cast<unsigned long long>(k));
        const std::string_view name = r.read_string("the name of " + where);
        if (name.empty())
            fail(Status::bad_format, "%s: %s has an empty name", label.c_str(), where.c_str());
        if (name.size() > kMaxTensorNameBytes)
            fail(Status::bad_format, "%s: %s name '%s' is %zu bytes (limit %zu)", label.c_str(),
                 where.c_str(), printable(name).c_str(), name.size(), kMaxTensorNameBytes);
        const std::string tname = "tensor '" + printable(name) + "'";
        TensorInfo t;
        t.name = std::string(name);
        t.shard = index;
        t.n_dims = r.read<uint32_t>("the dimension count of " + tname);
        if (t.n_dims > kMaxDims)
            fail(Status::bad_format, "%s: %s has %u dimensions (at most %u)", label.c_str(),
                 tname.c_str(), t.n_dims, kMaxDims);
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            t.ne[d] = r.read<int64_t>(format("dimension %u of ", d) + tname);
            if (t.ne[d] < 0)
                fail(Status::bad_format, "%s: %s has negative dimension ne[%u] = %lld", label.c_str(),
                     tname.c_str(), d, static_cast<long long>(t.ne[d]));
        }
        const uint32_t type_id = r.read<uint32_t>("the type of " + tname);
        const TypeTraits &tr = type_traits(type_id);
        if (!tr.name || tr.block_elems == 0)
            fail(Status::bad_format, "%s: %s has unknown tensor type id %u", label.c_str(),
                 tname.c_str(), type_id);
        t.type = static_cast<GgmlType>(type_id);
        t.offset = r.read<uint64_t>("the data offset of " + tname);

        // Element count must fit int64; byte count must fit uint64.
        uint64_t elems = 1;
        for (uint32_t d = 0; d < kMaxDims; ++d) {
            if (mul_overflows(elems, uint64_t(t.ne[d]), &elems) ||
                elems > uint64_t(std::numeric_limits<int64_t>::max()))
                fail(Status::bad_format, "%s: %s element count overflows (ne = %lld x %lld x %lld x %lld)",
                     label.c_str(), tname.c_str(), static_cast<long long>(t.ne[0]),
                     static_cast<long long>(t.ne[1]), static_cast<long long>(t.ne[2]),
                     static_cast<long long>(t.ne[3]));
        }
        if (uint64_t(t.ne[0]) % tr.block_elems != 0)
            fail(Status::bad_format, "%s: %s row length ne[0] = %lld is not a multiple of the %s block size %u",
                 label.c_str(), tname.c_str(), static_cast<long long>(t.ne[0]), tr.name, tr.block_elems);
        uint64_t nbytes = uint64_t(t.ne[0]) / tr.block_elems;
        bool overflow = mul_overflows(nbytes, tr.block_bytes, &nbytes);
        for (uint32_t d = 1; d < kMaxDims && !overflow; ++d)
            overflow = mul_overflows(nbytes, uint64_t(t.ne[d]), &nbytes);
        if (overflow)
            fail(Status::bad_format, "%s: %s byte size overflows", label.c_str(), tname.c_str());
        t.nbytes = nbytes;

        if (t.offset != expected_offset)
            fail(Status::bad_format,
                 "%s: %s has data offset %llu, expected %llu (tensor data must be packed in table "
                 "order, each aligned to %u bytes)",
                 label.c_str(), tname.c_str(), static_cast<unsigned long long>(t.offset),
                 static_cast<unsigned long long>(expected_offset), alignment);
        uint64_t end = 0;
        if (add_overflows(t.offset, nbytes, &end))
            fail(Status::bad_format, "%s: %s data offset + size overflows", label.c_str(), tname.c_str());
        expected_offset = pad_to(end, alignment, label, ("the data end of " + tname).c_str());
        tensors_.push_back(std::move(t));
    }

    // Data section: padded to alignment after the table, only when there are tensors.
    uint64_t data_offset = r.pos();
    if (n_tensors > 0) data_offset = pad_to(data_offset, alignment, label, "the data section start");
    if (data_offset > shard.size)
        fail(Status::bad_format, "%s: truncated: data section starts at %llu but the file has %llu bytes",
             label.c_str(), static_cast<unsigned long long>(data_offset),
             static_cast<unsigned long long>(shard.size));
    shard.data_offset = data_offset;
    for (size_t k = first_tensor; k < tensors_.size(); ++k) {
        TensorInfo &t = tensors_[k];
        uint64_t begin = 0, end = 0;
        if (add_overflows(data_offset, t.offset, &begin) || add_overflows(begin, t.nbytes, &end) ||
            end > shard.size)
            fail(Status::bad_format,
                 "%s: tensor '%s' data [%llu, +%llu) at data offset %llu lies beyond the end of the "
                 "file (%llu bytes)",
                 label.c_str(), printable(t.name).c_str(), static_cast<unsigned long long>(t.offset),
                 static_cast<unsigned long long>(t.nbytes), static_cast<unsigned long long>(data_offset),
                 static_cast<unsigned long long>(shard.size));
        t.file_offset = begin;
        t.data = shard.data + begin;
    }
}

void GgufFile::index_tensors() {
    tensors_by_name_ = sorted_by_name(
        tensors_.size(), [&](size_t k) { return std::string_view(tensors_[k].name); },
        [&](size_t k) {
            const TensorInfo &t = tensors_[k];
            fail(Status::bad_format, "%s: duplicate tensor name '%s'", shards_[t.shard].path.c_str(),
                 printable(t.name).c_str());
        });
}

const MetadataEntry *GgufFile::Metadata::find(std::string_view key) const {
    const size_t *k = find_by_name(by_key, key, [&](size_t i) { return entries[i].key; });
    return k ? &entries[*k] : nullptr;
}

std::unique_ptr<GgufFile> GgufFile::parse_memory(const uint8_t *data, size_t size, const std::string &label) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = label;
    Shard s;
    s.path = label;
    s.data = data;
    s.size = size;
    f->shards_.push_back(std::move(s));
    f->parse_shard(0, f->kv_);
    f->index_tensors();
    const uint32_t count = f->get_u32("split.count", 1);
    if (count > 1)
        fail(Status::bad_format, "%s: image is shard %u of a split set of %u; split sets must be opened from files",
             label.c_str(), f->get_u32("split.no", 0) + 1, count);
    return f;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string &path) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = path;
    f->open_split_set(path);
    return f;
}

void GgufFile::open_split_set(const std::string &first_path) {
    auto add_shard = [&](const std::string &p) {
        Shard s;
        s.path = p;
        s.map = MappedFile(p);
        s.data = s.map.data();
        s.size = s.map.size();
        shards_.push_back(std::move(s));
    };
    add_shard(first_path);
    parse_shard(0, kv_);  // kv_ is final from here on; find() works
    index_tensors();

    const uint32_t count = get_u32("split.count", 1);
    const uint32_t no = get_u32("split.no", 0);
    if (count == 0)
        fail(Status::bad_format, "%s: split.count is 0", first_path.c_str());
    if (no >= count)
        fail(Status::bad_format, "%s: split.no %u is not below split.count %u", first_path.c_str(), no, count);
    if (count == 1) return;

    // PREFIX-00001-of-0000N.gguf
    const std::string suffix = format("-%05u-of-%05u.gguf", 1u, count);
    if (no != 0) {
        fail(Status::bad_format, "%s: this is shard %u of %u of a split set; open the first shard (...%s)",
             first_path.c_str(), no + 1, count, suffix.c_str());
    }
    if (first_path.size() <= suffix.size() ||
        first_path.compare(first_path.size() - suffix.size(), suffix.size(), suffix) != 0)
        fail(Status::bad_format, "%s: split.count is %u but the file name does not end in %s",
             first_path.c_str(), count, suffix.c_str());
    const std::string prefix = first_path.substr(0, first_path.size() - suffix.size());

    for (uint32_t k = 1; k < count; ++k) {
        const std::string p = split_shard_name(prefix, k + 1, count);
        try {
            add_shard(p);
        } catch (const Error &e) {
            throw Error(e.status(), format("%s: shard %u of %u of the split set: %s", first_path.c_str(),
                                           k + 1, count, e.what()));
        }
        Metadata kv;
        parse_shard(k, kv);
        auto int_key = [&](const char *key) -> std::optional<uint64_t> {
            const MetadataEntry *e = kv.find(key);
            if (!e) return std::nullopt;
            const Value v = decode_value(e->type, e->value);
            IntValue iv;
            if (!integer_of(v.type, v, &iv) || iv.negative)
                fail(Status::bad_format, "%s: %s has type %s, expected an unsigned integer", p.c_str(), key,
                     value_type_name(v.type));
            return iv.magnitude;
        };
        const auto shard_no = int_key("split.no");
        const auto shard_count = int_key("split.count");
        if (!shard_no || !shard_count)
            fail(Status::bad_format, "%s: shard %u of a split set lacks split.no/split.count", p.c_str(), k + 1);
        if (*shard_count != count)
            fail(Status::bad_format, "%s: split.count is %llu but the first shard says %u", p.c_str(),
                 static_cast<unsigned long long>(*shard_count), count);
        if (*shard_no != k)
            fail(Status::bad_format, "%s: split.no is %llu, expected %u for this file name", p.c_str(),
                 static_cast<unsigned long long>(*shard_no), k);
    }
    index_tensors();
    if (const auto total = get_u32("split.tensors.count"); total && *total != tensors_.size())
        fail(Status::bad_format, "%s: split.tensors.count is %u but the shards hold %zu tensors",
             first_path.c_str(), *total, tensors_.size());
}

uint64_t GgufFile::total_file_bytes() const {
    uint64_t total = 0;
    for (const Shard &s : shards_) total += s.size;
    return total;
}

void GgufFile::refuse_as_output(const std::string &path, const char *what) const {
    std::vector<std::string> paths;
    for (const Shard &s : shards_) paths.push_back(s.path);
    refuse_to_replace(path, paths, what);
}

// ---------------------------------------------------------------------------
// Lookups

std::optional<Value> GgufFile::find(std::string_view key) const {
    const MetadataEntry *e = kv_.find(key);
    if (!e) return std::nullopt;
    return decode_value(e->type, e->value);
}

const TensorInfo *GgufFile::tensor(std::string_view name) const {
    const size_t *k = find_by_name(tensors_by_name_, name, [&](size_t i) { return std::string_view(tensors_[i].name); });
    return k ? &tensors_[*k] : nullptr;
}

namespace {

[[noreturn]] void wrong_type(const std::string &path, std::string_view key, const Value &v, const char *expected) {
    if (v.type == ValueType::ARRAY)
        fail(Status::bad_format, "%s: key '%s' is an ARRAY of %s, expected %s", path.c_str(),
             printable(key).c_str(), value_type_name(v.elem_type), expected);
    fail(Status::bad_format, "%s: key '%s' has type %s, expected %s", path.c_str(), printable(key).c_str(),
         value_type_name(v.type), expected);
}

uint32_t to_u32(const std::string &path, std::string_view key, ValueType t, const Value &v) {
    IntValue iv;
    if (!integer_of(t, v, &iv)) wrong_type(path, key, v, "an integer");
    if (iv.negative)
        fail(Status::bad_format, "%s: key '%s' is negative (%lld)", path.c_str(), printable(key).c_str(),
             static_cast<long long>(v.i));
    if (iv.magnitude > std::numeric_limits<uint32_t>::max())
        fail(Status::bad_format, "%s: key '%s' value %llu does not fit 32 bits", path.c_str(),
             printable(key).c_str(), static_cast<unsigned long long>(iv.magnitude));
    return static_cast<uint32_t>(iv.magnitude);
}

// Element k of a non-string array, decoded into a scalar Value.
Value array_element(const Value &arr, uint64_t k) {
    Value e;
    e.type = arr.elem_type;
    decode_scalar(arr.elem_type, arr.array_data + k * scalar_size(arr.elem_type), e);
    return e;
}

}  // namespace

std::optional<uint32_t> GgufFile::get_u32(std::string_view key) const {
    const std::optional<Value> v = find(key);
    if (!v) return std::nullopt;
    return to_u32(path_, key, v->type, *v);
}

uint32_t GgufFile::get_u32(std::string_view key, uint32_t fallback) const {
    return get_u32(key).value_or(fallback);
}

float GgufFile::get_f32(std::string_view key, float fallback) const {
    const std::optional<Value> v = find(key);
    if (!v) return fallback;
    if (v->type != ValueType::FLOAT32 && v->type != ValueType::FLOAT64)
        wrong_type(path_, key, *v, "FLOAT32");
    return static_cast<float>(v->f);
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
    const std::optional<Value> v = find(key);
    if (!v) return fallback;
    if (v->type != ValueType::BOOL) wrong_type(path_, key, *v, "BOOL");
    return v->u != 0;
}

std::string GgufFile::get_string(std::string_view key, std::string_view fallback) const {
    const std::optional<Value> v = find(key);
    if (!v) return std::string(fallback);
    if (v->type != ValueType::STRING) wrong_type(path_, key, *v, "STRING");
    return std::string(v->s);
}

StringArray GgufFile::get_string_array(std::string_view key) const {
    const std::optional<Value> v = find(key);
    if (!v) return {};
    if (v->type != ValueType::ARRAY || v->elem_type != ValueType::STRING)
        wrong_type(path_, key, *v, "an ARRAY of STRING");
    return v->strings;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
    const std::optional<Value> v = find(key);
    if (!v) return {};
    if (v->type != ValueType::ARRAY ||
        (v->elem_type != ValueType::FLOAT32 && v->elem_type != ValueType::FLOAT64))
        wrong_type(path_, key, *v, "an ARRAY of FLOAT32");
    std::vector<float> out;
    out.reserve(v->count);  // the elements were bounds-checked against the file at parse time
    for (uint64_t k = 0; k < v->count; ++k) out.push_back(static_cast<float>(array_element(*v, k).f));
    return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
    const std::optional<Value> v = find(key);
    if (!v) return {};
    if (v->type != ValueType::ARRAY || !is_integer_type(v->elem_type))
        wrong_type(path_, key, *v, "an ARRAY of INT32");
    std::vector<int32_t> out;
    out.reserve(v->count);
    for (uint64_t k = 0; k < v->count; ++k) {
        const Value e = array_element(*v, k);
        int64_t x = 0;
        bool fits;
        if (is_signed_type(e.type)) {
            x = e.i;
            fits = x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max();
        } else {
            fits = e.u <= uint64_t(std::numeric_limits<int32_t>::max());
            x = static_cast<int64_t>(fits ? e.u : 0);
        }
        if (!fits)
            fail(Status::bad_format, "%s: array '%s' element %llu does not fit INT32", path_.c_str(),
                 printable(key).c_str(), static_cast<unsigned long long>(k));
        out.push_back(static_cast<int32_t>(x));
    }
    return out;
}

std::vector<uint32_t> GgufFile::get_u32_or_array(std::string_view key) const {
    const std::optional<Value> v = find(key);
    if (!v) return {};
    if (v->type != ValueType::ARRAY) return {to_u32(path_, key, v->type, *v)};
    if (!is_integer_type(v->elem_type)) wrong_type(path_, key, *v, "an integer or an ARRAY of integers");
    std::vector<uint32_t> out;
    out.reserve(v->count);
    for (uint64_t k = 0; k < v->count; ++k) {
        const Value e = array_element(*v, k);
        out.push_back(to_u32(path_, key, e.type, e));
    }
    return out;
}

}  // namespace moe::gguf
