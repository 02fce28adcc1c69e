#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "support/gguf_builder.hpp"
#include "support/paths.hpp"

using moe::Error;
using moe::GgmlType;
using moe::Status;
using moe::gguf::GgufFile;
using moe::gguf::ValueType;
using moe::test::GgufBuilder;

namespace {

using Bytes = std::vector<uint8_t>;

std::unique_ptr<GgufFile> parse(const Bytes &b) { return GgufFile::parse_memory(b.data(), b.size(), "img.gguf"); }

// Parses and expects a bad_format error whose message contains every fragment.
void expect_bad_format(const Bytes &b, std::initializer_list<const char *> fragments) {
    try {
        parse(b);
        ADD_FAILURE() << "parse succeeded";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::bad_format) << e.what();
        EXPECT_EQ(std::string(e.what()).rfind("img.gguf: ", 0), 0u) << e.what();
        for (const char *f : fragments) EXPECT_NE(std::strstr(e.what(), f), nullptr) << "missing '" << f << "' in: " << e.what();
    }
}

// A small file using every metadata type and a few tensor types.
GgufBuilder sample() {
    GgufBuilder b;
    b.kv_string("general.architecture", "qwen3moe")
        .kv_u8("t.u8", 200)
        .kv_i8("t.i8", -100)
        .kv_u16("t.u16", 60000)
        .kv_i16("t.i16", -30000)
        .kv_u32("t.u32", 4000000000u)
        .kv_i32("t.i32", -2000000000)
        .kv_u64("t.u64", 1ull << 40)
        .kv_i64("t.i64", -(1ll << 40))
        .kv_f32("t.f32", 1.5f)
        .kv_f64("t.f64", -2.25)
        .kv_bool("t.bool", true)
        .kv_array_u32("t.arr_u32", {7, 7, 7})
        .kv_array_i32("t.arr_i32", {1, -2, 3})
        .kv_array_f32("t.arr_f32", {0.5f, -1.0f})
        .kv_array_string("t.arr_str", {"a", "", "ccc"});
    b.tensor_random("a.weight", GgmlType::F32, {8, 3}, 1);
    b.tensor_random("b.weight", GgmlType::Q8_0, {64, 2}, 2);
    b.tensor_random("c.weight", GgmlType::Q4_K, {256, 1, 2}, 3);
    b.tensor_random("d.weight", GgmlType::F16, {5}, 4);
    return b;
}

Bytes with_u64_at(Bytes b, size_t pos, uint64_t v) {
    std::memcpy(&b[pos], &v, 8);
    return b;
}

}  // namespace

// --- valid files -------------------------------------------------------------------

TEST(Gguf, ParsesEveryMetadataType) {
    const Bytes img = sample().build();
    auto f = parse(img);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->get_string("general.architecture"), "qwen3moe");
    EXPECT_EQ(f->get_u32("t.u8", 0), 200u);
    EXPECT_EQ(f->find("t.i8")->i, -100);
    EXPECT_EQ(f->get_u32("t.u16", 0), 60000u);
    EXPECT_EQ(f->find("t.i16")->i, -30000);
    EXPECT_EQ(f->get_u32("t.u32", 0), 4000000000u);
    EXPECT_EQ(f->find("t.i32")->i, -2000000000);
    EXPECT_EQ(f->find("t.u64")->u, 1ull << 40);
    EXPECT_EQ(f->find("t.i64")->i, -(1ll << 40));
    EXPECT_FLOAT_EQ(f->get_f32("t.f32", 0), 1.5f);
    EXPECT_FLOAT_EQ(f->get_f32("t.f64", 0), -2.25f);
    EXPECT_TRUE(f->get_bool("t.bool", false));
    EXPECT_EQ(f->get_u32_or_array("t.arr_u32"), (std::vector<uint32_t>{7, 7, 7}));
    EXPECT_EQ(f->get_u32_or_array("t.u16"), (std::vector<uint32_t>{60000}));
    EXPECT_EQ(f->get_i32_array("t.arr_i32"), (std::vector<int32_t>{1, -2, 3}));
    EXPECT_EQ(f->get_f32_array("t.arr_f32"), (std::vector<float>{0.5f, -1.0f}));
    const moe::gguf::StringArray arr = f->get_string_array("t.arr_str");
    EXPECT_EQ(arr.size(), 3u);
    const std::vector<std::string_view> strs(arr.begin(), arr.end());
    ASSERT_EQ(strs.size(), 3u);
    EXPECT_EQ(strs[0], "a");
    EXPECT_EQ(strs[1], "");
    EXPECT_EQ(strs[2], "ccc");
    EXPECT_EQ(f->find("t.arr_str")->elem_type, ValueType::STRING);
    EXPECT_EQ(f->metadata().size(), 16u);
    // Absent keys fall back.
    EXPECT_EQ(f->get_u32("nope", 9), 9u);
    EXPECT_FALSE(f->get_u32("nope").has_value());
    EXPECT_EQ(f->get_string("nope", "x"), "x");
    EXPECT_TRUE(f->get_string_array("nope").empty());
    EXPECT_TRUE(f->get_u32_or_array("nope").empty());
}

TEST(Gguf, TypedGettersRejectWrongTypes) {
    const Bytes img = sample().build();
    auto f = parse(img);
    auto expect_type_error = [](const std::function<void()> &fn, const char *key) {
        try {
            fn();
            ADD_FAILURE() << "no error for " << key;
        } catch (const Error &e) {
            EXPECT_EQ(e.status(), Status::bad_format);
            EXPECT_NE(std::strstr(e.what(), key), nullptr) << e.what();
        }
    };
    expect_type_error([&] { f->get_u32("t.f32", 0); }, "t.f32");
    expect_type_error([&] { f->get_u32("t.i8", 0); }, "t.i8");         // negative
    expect_type_error([&] { f->get_u32("t.u64", 0); }, "t.u64");       // does not fit
    expect_type_error([&] { f->get_f32("t.u32", 0); }, "t.u32");
    expect_type_error([&] { f->get_bool("t.u8", false); }, "t.u8");
    expect_type_error([&] { f->get_string("t.u8"); }, "t.u8");
    expect_type_error([&] { f->get_string_array("t.arr_u32"); }, "t.arr_u32");
    expect_type_error([&] { f->get_f32_array("t.arr_str"); }, "t.arr_str");
    expect_type_error([&] { f->get_i32_array("t.f32"); }, "t.f32");
    expect_type_error([&] { f->get_u32_or_array("t.arr_i32"); }, "t.arr_i32");  // negative element
    expect_type_error([&] { f->get_u32_or_array("t.arr_f32"); }, "t.arr_f32");
}

TEST(Gguf, IndexesTensorsWithShapesAndOffsets) {
    const Bytes img = sample().build();
    auto f = parse(img);
    ASSERT_EQ(f->tensors().size(), 4u);
    const auto *a = f->tensor("a.weight");
    const auto *b = f->tensor("b.weight");
    const auto *c = f->tensor("c.weight");
    const auto *d = f->tensor("d.weight");
    ASSERT_TRUE(a && b && c && d);
    EXPECT_EQ(f->tensor("missing"), nullptr);
    EXPECT_EQ(a->nbytes, 8u * 3 * 4);
    EXPECT_EQ(a->n_elements(), 24u);
    EXPECT_EQ(b->nbytes, 2u * 2 * 34);
    EXPECT_EQ(b->row_bytes(), 68u);
    EXPECT_EQ(c->nbytes, 2u * 144);
    EXPECT_EQ(c->n_dims, 3u);
    EXPECT_EQ(c->ne[2], 2);
    EXPECT_EQ(c->ne[3], 1);
    EXPECT_EQ(d->nbytes, 10u);
    EXPECT_EQ(a->offset, 0u);
    EXPECT_EQ(b->offset, 96u);
    EXPECT_EQ(c->offset, 96u + 160u);
    EXPECT_EQ(f->header_size() % 32, 0u);
    for (const auto &t : f->tensors()) {
        EXPECT_EQ(t.file_offset, f->header_size() + t.offset);
        EXPECT_EQ(t.data, img.data() + t.file_offset);
        EXPECT_EQ(t.file_offset % 32, 0u);
    }
    // The data pointer really addresses the tensor's bytes.
    const auto expect = GgufBuilder::random_bytes(GgmlType::Q8_0, {64, 2}, 2);
    EXPECT_EQ(std::memcmp(b->data, expect.data(), expect.size()), 0);
    EXPECT_EQ(f->total_file_bytes(), img.size());
    EXPECT_EQ(f->n_shards(), 1u);
}

TEST(Gguf, AcceptsVersion2AndCustomAlignment) {
    GgufBuilder b = sample();
    b.override_version(2).alignment(64);
    const Bytes img = b.build();
    auto f = parse(img);
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->alignment(), 64u);
    for (const auto &t : f->tensors()) EXPECT_EQ(t.file_offset % 64, 0u);
}

TEST(Gguf, EmptyFileWithoutTensorsHasNoPadding) {
    GgufBuilder b;
    b.kv_string("general.architecture", "x");
    const Bytes img = b.build();
    auto f = parse(img);
    EXPECT_EQ(f->tensors().size(), 0u);
    EXPECT_EQ(f->header_size(), img.size());
}

TEST(Gguf, ParsesKnownButUnsupportedTypesAndZeroSizedTensors) {
    GgufBuilder b;
    b.tensor_raw("iq2", 16, {256, 2}, Bytes(2 * 66, 0));  // iq2_xxs: parseable, not computable
    b.tensor_raw("empty", 0, {0, 4}, {});
    const Bytes img = b.build();
    auto f = parse(img);
    EXPECT_EQ(f->tensor("iq2")->nbytes, 132u);
    EXPECT_EQ(f->tensor("empty")->nbytes, 0u);
}

TEST(Gguf, OpensFromDisk) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/m.gguf";
    sample().write(path);
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->path(), path);
    EXPECT_EQ(f->tensors().size(), 4u);
    EXPECT_EQ(f->total_file_bytes(), std::filesystem::file_size(path));
    EXPECT_EQ(f->shard_mapping(0).size(), std::filesystem::file_size(path));
    EXPECT_EQ(f->tensor("a.weight")->data, f->shard_mapping(0).data() + f->tensor("a.weight")->file_offset);
}

TEST(Gguf, MissingFileIsAnIoError) {
    try {
        GgufFile::open(moe::test::scratch_dir() + "/absent.gguf");
        FAIL();
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::io);
        EXPECT_NE(std::strstr(e.what(), "absent.gguf"), nullptr);
    }
}

// --- corrupt files -------------------------------------------------------------------

TEST(GgufCorrupt, TruncationAtEveryByteIsACleanError) {
    const Bytes img = sample().build();
    auto f = parse(img);
    const uint64_t header = f->header_size();
    ASSERT_GT(header, 200u);
    const auto &last = f->tensors().back();
    const uint64_t data_end = last.file_offset + last.nbytes;
    ASSERT_LT(data_end, img.size());  // the last tensor is followed by padding
    // Every prefix of the header, metadata and tensor table, and of the data section.
    for (uint64_t n = 0; n < data_end; ++n) {
        const Bytes cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
        try {
            parse(cut);
            ADD_FAILURE() << "truncation to " << n << " bytes parsed";
        } catch (const Error &e) {
            ASSERT_EQ(e.status(), Status::bad_format) << n << ": " << e.what();
            ASSERT_EQ(std::string(e.what()).rfind("img.gguf: ", 0), 0u) << e.what();
        }
    }
}

TEST(Gguf, PaddingAfterTheLastTensorIsOptional) {
    const Bytes img = sample().build();
    auto f = parse(img);
    const auto &last = f->tensors().back();
    const Bytes cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(last.file_offset + last.nbytes));
    EXPECT_EQ(parse(cut)->tensors().size(), 4u);
}

TEST(GgufCorrupt, TruncatedMessagesNameTheField) {
    const Bytes img = sample().build();
    expect_bad_format(Bytes(img.begin(), img.begin() + 2), {"truncated", "magic"});
    expect_bad_format(Bytes(img.begin(), img.begin() + 6), {"version"});
    // Cut in the metadata: the 16 pairs (4 tensors) the counts announce cannot fit what is left.
    expect_bad_format(Bytes(img.begin(), img.begin() + 30),
                      {"truncated or corrupt: the metadata count claims 16 entries of at least 14 bytes",
                       "only 6 bytes are left at offset 24"});
    // Cut 50 bytes into the tensor table (which starts with the length of the name "a.weight").
    const std::string first_name = "a.weight";
    const size_t table = size_t(std::search(img.begin(), img.end(), first_name.begin(), first_name.end()) - img.begin()) - 8;
    expect_bad_format(Bytes(img.begin(), img.begin() + std::ptrdiff_t(table + 50)),
                      {"truncated or corrupt: the tensor count claims 4 entries of at least 25 bytes",
                       "only 50 bytes are left"});
    expect_bad_format(Bytes(img.begin(), img.end() - 40), {"beyond the end"});
    // One pair whose count fits what is left, cut in its key, then in its value.
    GgufBuilder one;
    one.kv_string("general.architecture", "qwen3moe");
    const Bytes pair = one.build();
    expect_bad_format(Bytes(pair.begin(), pair.begin() + 40), {"truncated", "key of metadata entry 0"});
    expect_bad_format(Bytes(pair.begin(), pair.begin() + 66), {"truncated", "value of key 'general.architecture'"});
}

TEST(GgufCorrupt, BadMagicAndVersions) {
    expect_bad_format(sample().override_magic(0x12345678).build(), {"not a GGUF file"});
    for (uint32_t v : {0u, 1u, 4u, 99u}) expect_bad_format(sample().override_version(v).build(), {"version"});
    expect_bad_format(sample().override_version(0x03000000).build(), {"byte-swapped"});
}

TEST(GgufCorrupt, HugeCountsFailWithoutAllocating) {
    expect_bad_format(sample().override_kv_count(1ull << 60).build(),
                      {"the metadata count claims 1152921504606846976 entries of at least 14 bytes"});
    expect_bad_format(sample().override_tensor_count(1ull << 60).build(),
                      {"the tensor count claims 1152921504606846976 entries of at least 25 bytes"});
    expect_bad_format(sample().override_kv_count(~0ull).build(), {"metadata count"});
    expect_bad_format(sample().override_tensor_count(~0ull).build(), {"tensor count"});
    // A string array claiming 2^60 elements.
    GgufBuilder b;
    Bytes v;
    const uint32_t elem = 8;
    const uint64_t count = 1ull << 60;
    v.insert(v.end(), reinterpret_cast<const uint8_t *>(&elem), reinterpret_cast<const uint8_t *>(&elem) + 4);
    v.insert(v.end(), reinterpret_cast<const uint8_t *>(&count), reinterpret_cast<const uint8_t *>(&count) + 8);
    b.kv_raw("big.strings", 9, v);
    expect_bad_format(b.build(), {"big.strings"});
    // A u64 array whose byte size overflows.
    GgufBuilder c;
    Bytes w;
    const uint32_t elem64 = 10;
    const uint64_t count64 = (1ull << 62) + 1;
    w.insert(w.end(), reinterpret_cast<const uint8_t *>(&elem64), reinterpret_cast<const uint8_t *>(&elem64) + 4);
    w.insert(w.end(), reinterpret_cast<const uint8_t *>(&count64), reinterpret_cast<const uint8_t *>(&count64) + 8);
    c.kv_raw("big.u64", 9, w);
    expect_bad_format(c.build(), {"big.u64"});
}

// An array's count is checked against the bytes left before its elements are
// read: a hostile one is refused at once, naming it, not after the parser has
// read (and stored) every element the rest of the file can hold.
TEST(GgufCorrupt, ArrayCountsBeyondTheBytesLeftAreRefusedBeforeReadingElements) {
    auto array_of = [](uint32_t elem, uint64_t count, size_t zero_bytes) {
        Bytes v(12 + zero_bytes, 0);
        std::memcpy(v.data(), &elem, 4);
        std::memcpy(v.data() + 4, &count, 8);
        GgufBuilder b;
        b.kv_raw("hostile", 9, v);
        return b.build();
    };
    // 1 MiB of zeros holds 131072 empty strings, 262144 u32s: far fewer than claimed.
    expect_bad_format(array_of(8, 1ull << 40, 1 << 20), {"array 'hostile' claims 1099511627776 entries", "bytes are left"});
    expect_bad_format(array_of(4, 1ull << 40, 1 << 20), {"array 'hostile' claims 1099511627776 entries"});
    expect_bad_format(array_of(8, (1u << 17) + 1, 1 << 20), {"claims 131073 entries of at least 8 bytes"});
    // Exactly as many empty strings as the bytes hold is a valid array.
    const Bytes fits = array_of(8, 1u << 17, 1 << 20);
    EXPECT_EQ(parse(fits)->get_string_array("hostile").size(), size_t(1) << 17);
}

TEST(GgufCorrupt, HugeStringLengths) {
    const Bytes img = sample().build();
    // The first key's length field follows the 24-byte header.
    expect_bad_format(with_u64_at(img, 24, 1ull << 62), {"truncated", "key of metadata entry 0"});
    expect_bad_format(with_u64_at(img, 24, ~0ull), {"truncated"});
    // The first value (a STRING) length sits after the key and its type.
    const size_t value_len_at = 24 + 8 + std::strlen("general.architecture") + 4;
    expect_bad_format(with_u64_at(img, value_len_at, ~0ull - 3), {"general.architecture"});
}

TEST(GgufCorrupt, BadOffsets) {
    expect_bad_format(sample().override_tensor_offset(1, 100).build(), {"b.weight", "offset 100", "expected 96"});
    expect_bad_format(sample().override_tensor_offset(0, 32).build(), {"a.weight", "expected 0"});
    expect_bad_format(sample().override_tensor_offset(3, ~0ull - 7).build(), {"d.weight"});
    // Data section shorter than the table says.
    Bytes img = sample().build();
    img.resize(img.size() - 30);
    expect_bad_format(img, {"d.weight", "beyond the end"});
}

TEST(GgufCorrupt, OffsetArithmeticOverflow) {
    // A tensor so large that offset + size overflows.
    GgufBuilder b;
    b.tensor_raw("huge", 0, {1ll << 30, 1ll << 30, 4}, {});  // 2^62 bytes of f32
    b.tensor_raw("next", 0, {4}, {});
    expect_bad_format(b.build(), {"huge"});
    GgufBuilder c;
    c.tensor_raw("z", 0, {8}, Bytes(32, 0)).override_tensor_offset(0, ~0ull - 7);
    expect_bad_format(c.build(), {"'z'"});
}

TEST(GgufCorrupt, BadDimensions) {
    GgufBuilder neg;
    neg.tensor_raw("neg", 0, {4, -1}, {});
    expect_bad_format(neg.build(), {"neg", "negative dimension"});
    GgufBuilder over;
    over.tensor_raw("over", 0, {1ll << 32, 1ll << 32}, {});
    expect_bad_format(over.build(), {"over", "overflows"});
    GgufBuilder over_bytes;
    over_bytes.tensor_raw("ob", 0, {1ll << 31, 1ll << 31}, {});  // 2^62 elements fit, 2^64 bytes do not
    expect_bad_format(over_bytes.build(), {"ob", "overflows"});
    GgufBuilder dims;
    dims.tensor_raw("five", 0, {1, 1, 1, 1, 1}, Bytes(4, 0));
    expect_bad_format(dims.build(), {"five", "5 dimensions"});
    GgufBuilder block;
    block.tensor_raw("q", 8, {48, 2}, Bytes(128, 0));  // q8_0 needs multiples of 32
    expect_bad_format(block.build(), {"'q'", "block size 32"});
}

TEST(GgufCorrupt, UnknownTypes) {
    for (uint32_t id : {4u, 5u, 31u, 36u, 40u, 64u, 1000u, 0xffffffffu}) {
        GgufBuilder b;
        b.tensor_raw("t", id, {32}, Bytes(32, 0));
        expect_bad_format(b.build(), {"'t'", "unknown tensor type id"});
    }
    GgufBuilder kv;
    kv.kv_raw("k", 13, Bytes(8, 0));
    expect_bad_format(kv.build(), {"'k'", "unknown value type 13"});
    GgufBuilder arr;
    arr.kv_raw("a", 9, Bytes{77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    expect_bad_format(arr.build(), {"'a'", "unknown element type 77"});
}

TEST(GgufCorrupt, Duplicates) {
    // Rename "dux" to "dup" in the image: the builder itself refuses duplicate keys.
    GgufBuilder k2;
    k2.kv_u32("dup", 1).kv_u32("dux", 2);
    Bytes b2 = k2.build();
    const auto pos = std::search(b2.begin(), b2.end(), std::begin("dux"), std::begin("dux") + 3);
    ASSERT_NE(pos, b2.end());
    *(pos + 2) = 'p';
    expect_bad_format(b2, {"duplicate metadata key 'dup'"});

    GgufBuilder t;
    t.tensor_random("w", GgmlType::F32, {4}, 1).tensor_random("w", GgmlType::F32, {4}, 2);
    expect_bad_format(t.build(), {"duplicate tensor name 'w'"});
}

TEST(GgufCorrupt, BadNames) {
    GgufBuilder long_name;
    long_name.tensor_random(std::string(64, 'n'), GgmlType::F32, {4}, 1);
    expect_bad_format(long_name.build(), {"64 bytes"});
    GgufBuilder ok_name;
    ok_name.tensor_random(std::string(63, 'n'), GgmlType::F32, {4}, 1);
    EXPECT_NO_THROW(parse(ok_name.build()));
    GgufBuilder empty_name;
    empty_name.tensor_random("", GgmlType::F32, {4}, 1);
    expect_bad_format(empty_name.build(), {"empty name"});
    GgufBuilder empty_key;
    empty_key.kv_u32("", 1);
    expect_bad_format(empty_key.build(), {"empty key"});
}

TEST(GgufCorrupt, BadAlignment) {
    for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
        GgufBuilder b = sample();
        b.kv_u32("general.alignment", a);
        expect_bad_format(b.build(), {"general.alignment", "power of two"});
    }
    GgufBuilder typed = sample();
    typed.kv_u64("general.alignment", 32);
    expect_bad_format(typed.build(), {"general.alignment", "UINT32"});
    // Alignment stated as 64 but the data laid out with 32.
    GgufBuilder mismatch = sample();
    mismatch.alignment(64).override_padding(32);
    expect_bad_format(mismatch.build(), {"expected"});
}

TEST(GgufCorrupt, NestedArraysAndBadBools) {
    GgufBuilder b;
    Bytes v{9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};  // array of arrays, one element
    b.kv_raw("nested", 9, v);
    expect_bad_format(b.build(), {"nested", "nested arrays"});
    GgufBuilder c;
    c.kv_raw("flag", 7, Bytes{2});
    expect_bad_format(c.build(), {"flag", "BOOL"});
}

// --- split sets ----------------------------------------------------------------------

namespace {
std::vector<GgufBuilder> three_shards() {
    std::vector<GgufBuilder> s(3);
    s[0].kv_string("general.architecture", "qwen3moe");
    s[0].tensor_random("a", GgmlType::F32, {8}, 1);
    s[1].tensor_random("b", GgmlType::F32, {16}, 2).tensor_random("c", GgmlType::Q8_0, {32}, 3);
    s[2].tensor_random("d", GgmlType::F32, {4}, 4);
    return s;
}
}  // namespace

TEST(GgufSplit, IndexesAllShards) {
    const std::string prefix = moe::test::scratch_dir() + "/model";
    const auto paths = moe::test::write_split_set(prefix, three_shards());
    ASSERT_EQ(paths[0], prefix + "-00001-of-00003.gguf");
    auto f = GgufFile::open(paths[0]);
    EXPECT_EQ(f->n_shards(), 3u);
    ASSERT_EQ(f->tensors().size(), 4u);
    EXPECT_EQ(f->tensor("a")->shard, 0u);
    EXPECT_EQ(f->tensor("b")->shard, 1u);
    EXPECT_EQ(f->tensor("c")->shard, 1u);
    EXPECT_EQ(f->tensor("d")->shard, 2u);
    EXPECT_EQ(f->shard_path(2), paths[2]);
    uint64_t total = 0;
    for (const auto &p : paths) total += std::filesystem::file_size(p);
    EXPECT_EQ(f->total_file_bytes(), total);
    const auto expect = GgufBuilder::random_bytes(GgmlType::Q8_0, {32}, 3);
    EXPECT_EQ(std::memcmp(f->tensor("c")->data, expect.data(), expect.size()), 0);
    EXPECT_EQ(f->tensor("c")->data, f->shard_mapping(1).data() + f->tensor("c")->file_offset);
    EXPECT_EQ(f->get_string("general.architecture"), "qwen3moe");
}

TEST(GgufSplit, Inconsistencies) {
    auto expect_error = [](const std::string &path, Status status, const char *fragment) {
        try {
            GgufFile::open(path);
            ADD_FAILURE() << "opened " << path;
        } catch (const Error &e) {
            EXPECT_EQ(e.status(), status) << e.what();
            EXPECT_NE(std::strstr(e.what(), fragment), nullptr) << e.what();
        }
    };
    const std::string dir = moe::test::scratch_dir();
    {   // opening a later shard
        const auto p = moe::test::write_split_set(dir + "/later", three_shards());
        expect_error(p[1], Status::bad_format, "open the first shard");
    }
    {   // a missing shard
        const auto p = moe::test::write_split_set(dir + "/missing", three_shards());
        std::filesystem::remove(p[2]);
        expect_error(p[0], Status::io, "shard 3 of 3");
    }
    {   // wrong split.no in a shard
        auto s = three_shards();
        s[2].kv_u16("split.no", 1);
        const auto p = moe::test::write_split_set(dir + "/no", std::move(s));
        expect_error(p[0], Status::bad_format, "split.no is 1, expected 2");
    }
    {   // disagreeing split.count
        auto s = three_shards();
        s[1].kv_u16("split.count", 4);
        const auto p = moe::test::write_split_set(dir + "/count", std::move(s));
        expect_error(p[0], Status::bad_format, "split.count is 4");
    }
    {   // a shard without split keys
        auto s = three_shards();
        s[1].kv_u16("split.no", 1);
        const auto p = moe::test::write_split_set(dir + "/nokeys", s);
        GgufBuilder bare;
        bare.tensor_random("b", GgmlType::F32, {16}, 2);
        bare.write(p[1]);
        expect_error(p[0], Status::bad_format, "lacks split.no");
    }
    {   // duplicate tensor across shards
        auto s = three_shards();
        s[2].remove_tensor("d").tensor_random("a", GgmlType::F32, {8}, 9);
        const auto p = moe::test::write_split_set(dir + "/dup", std::move(s));
        expect_error(p[0], Status::bad_format, "duplicate tensor name 'a'");
    }
    {   // wrong total tensor count
        auto s = three_shards();
        s[0].kv_i32("split.tensors.count", 7);
        const auto p = moe::test::write_split_set(dir + "/total", std::move(s));
        expect_error(p[0], Status::bad_format, "split.tensors.count is 7");
    }
    {   // file name does not follow the pattern
        auto s = three_shards();
        const auto p = moe::test::write_split_set(dir + "/named", s);
        const std::string renamed = dir + "/renamed.gguf";
        std::filesystem::rename(p[0], renamed);
        expect_error(renamed, Status::bad_format, "does not end in -00001-of-00003.gguf");
    }
    {   // a corrupt later shard names that shard
        const auto p = moe::test::write_split_set(dir + "/corrupt", three_shards());
        std::filesystem::resize_file(p[1], 30);
        expect_error(p[0], Status::bad_format, "-00002-of-00003.gguf: truncated");
    }
    {   // split.count 0, split.no beyond count
        GgufBuilder b;
        b.kv_u16("split.count", 0);
        b.write(dir + "/zero.gguf");
        expect_error(dir + "/zero.gguf", Status::bad_format, "split.count is 0");
        GgufBuilder c;
        c.kv_u16("split.count", 2).kv_u16("split.no", 2);
        c.write(dir + "/beyond.gguf");
        expect_error(dir + "/beyond.gguf", Status::bad_format, "split.no 2");
    }
    {   // memory images cannot be split sets
        auto s = three_shards();
        s[0].kv_u16("split.no", 0).kv_u16("split.count", 3);
        const Bytes img = s[0].build();
        expect_bad_format(img, {"split set"});
    }
}

TEST(GgufSplit, SingleShardSetOpensNormally) {
    const std::string prefix = moe::test::scratch_dir() + "/one";
    std::vector<GgufBuilder> s(1);
    s[0].tensor_random("a", GgmlType::F32, {8}, 1);
    const auto p = moe::test::write_split_set(prefix, std::move(s));
    auto f = GgufFile::open(p[0]);
    EXPECT_EQ(f->n_shards(), 1u);
}
