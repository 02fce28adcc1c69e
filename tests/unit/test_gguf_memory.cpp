// What opening a hostile GGUF costs in memory. A header can pack millions of
// entries into a few bytes each (an empty string is 8 bytes, a metadata pair
// 14, a tensor-table row 25); the promise (src/gguf/gguf_file.hpp) is that
// the reader's allocations stay within kMaxBytesPerHeaderByte bytes per byte
// of the file at their peak, that a string array costs nothing per element,
// and that a count the rest of the file cannot hold is refused before
// anything is allocated for it.
//
// This binary replaces the global operator new and delete with versions that
// keep the live and peak heap bytes (malloc_usable_size, so what the
// allocator really hands out), then measures the peak above the starting
// point while the reader runs.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void *counted(void *p) {
    if (!p) throw std::bad_alloc();
    const int64_t live = g_live.fetch_add(int64_t(malloc_usable_size(p)), std::memory_order_relaxed) +
                         int64_t(malloc_usable_size(p));
    int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
    return p;
}

void uncounted(void *p) noexcept {
    if (!p) return;
    g_live.fetch_sub(int64_t(malloc_usable_size(p)), std::memory_order_relaxed);
    std::free(p);
}

void *aligned(std::size_t size, std::align_val_t a) {
    const std::size_t align = static_cast<std::size_t>(a);
    return std::aligned_alloc(align, (size + align - 1) / align * align);
}

}  // namespace

void *operator new(std::size_t n) { return counted(std::malloc(n ? n : 1)); }
void *operator new[](std::size_t n) { return counted(std::malloc(n ? n : 1)); }
void *operator new(std::size_t n, std::align_val_t a) { return counted(aligned(n ? n : 1, a)); }
void *operator new[](std::size_t n, std::align_val_t a) { return counted(aligned(n ? n : 1, a)); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
    try {
        return counted(std::malloc(n ? n : 1));
    } catch (...) {
        return nullptr;
    }
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return operator new(n, std::nothrow); }
void operator delete(void *p) noexcept { uncounted(p); }
void operator delete[](void *p) noexcept { uncounted(p); }
void operator delete(void *p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void *p, std::size_t) noexcept { uncounted(p); }
void operator delete(void *p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void *p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { uncounted(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { uncounted(p); }

namespace {

using moe::Error;
using moe::Status;
using moe::gguf::GgufFile;
using Bytes = std::vector<uint8_t>;

// The promise of gguf_file.hpp, restated: at most this many bytes of heap
// per byte of the file, plus kSlackBytes for the fixed-size parts.
constexpr int64_t kMaxBytesPerHeaderByte = 6;
constexpr int64_t kSlackBytes = 64 << 10;

// Peak heap growth while `fn` runs, in bytes.
template <typename Fn>
int64_t peak_heap_growth(Fn &&fn) {
    const int64_t start = g_live.load();
    g_peak.store(start);
    fn();
    return g_peak.load() - start;
}

// A GGUF v3 image written field by field, for layouts too large for the test builder.
class Image {
public:
    Image(uint64_t n_tensors, uint64_t n_kv) {
        put("GGUF", 4);
        u32(3);
        u64(n_tensors);
        u64(n_kv);
    }
    Image &u32(uint32_t v) { return put(&v, 4); }
    Image &u64(uint64_t v) { return put(&v, 8); }
    Image &str(std::string_view s) {
        u64(s.size());
        return put(s.data(), s.size());
    }
    Image &zeros(size_t n) {
        bytes.resize(bytes.size() + n, 0);
        return *this;
    }
    Image &put(const void *p, size_t n) {
        bytes.insert(bytes.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
        return *this;
    }
    Bytes bytes;
};

// Four distinct bytes per index: keys and names as short as uniqueness allows.
std::string short_name(uint32_t k) { return std::string(reinterpret_cast<const char *>(&k), 4); }

// n metadata pairs, each a `key_bytes`-byte key (distinct) and a UINT8.
Bytes many_tiny_pairs(uint32_t n, size_t key_bytes) {
    Image img(0, n);
    img.bytes.reserve(24 + size_t(n) * (13 + key_bytes));
    std::string key(key_bytes, 'k');
    for (uint32_t k = 0; k < n; ++k) {
        std::memcpy(key.data(), &k, 4);
        img.str(key).u32(0 /* UINT8 */).zeros(1);
    }
    return img.bytes;
}

// n tensors of zero bytes (shape {0}, F32) with `name_bytes`-byte names
// (distinct): a table row of 32 + name_bytes bytes each, padded to the data
// section, which is empty.
Bytes many_empty_tensors(uint32_t n, size_t name_bytes) {
    Image img(n, 0);
    img.bytes.reserve(56 + size_t(n) * (32 + name_bytes));
    std::string name(name_bytes, 't');
    for (uint32_t k = 0; k < n; ++k) {
        std::memcpy(name.data(), &k, 4);
        img.str(name).u32(1).u64(0).u32(0 /* F32 */).u64(0);
    }
    return img.zeros((32 - img.bytes.size() % 32) % 32).bytes;
}

// One key holding an ARRAY of `n` empty STRINGs.
Bytes empty_strings(uint64_t n) {
    Image img(0, 1);
    img.str("tokenizer.ggml.tokens").u32(9 /* ARRAY */).u32(8 /* STRING */).u64(n).zeros(size_t(n) * 8);
    return img.bytes;
}

std::unique_ptr<GgufFile> parse(const Bytes &b) { return GgufFile::parse_memory(b.data(), b.size(), "hostile.gguf"); }

int64_t bound(const Bytes &b) { return kMaxBytesPerHeaderByte * int64_t(b.size()) + kSlackBytes; }

// The message of the bad_format error parsing `b` throws ("" if it parses).
std::string bad_format_message(const Bytes &b) {
    try {
        parse(b);
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::bad_format) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "parsed";
    return {};
}

}  // namespace

// 4 Mi empty strings (32 MiB of file): held as a view of the file, walked in place.
TEST(GgufMemory, StringArrayCostsNothingPerElement) {
    constexpr uint64_t n = 4ull << 20;
    const Bytes img = empty_strings(n);
    std::unique_ptr<GgufFile> f;
    const int64_t opening = peak_heap_growth([&] { f = parse(img); });
    uint64_t seen = 0, chars = 0;
    const int64_t reading = peak_heap_growth([&] {
        for (std::string_view s : f->get_string_array("tokenizer.ggml.tokens")) {
            ++seen;
            chars += s.size();
        }
    });
    EXPECT_EQ(seen, n);
    EXPECT_EQ(chars, 0u);
    std::printf("%zu-byte file of %llu empty strings: open %lld bytes of heap at the peak, reading them %lld\n",
                img.size(), static_cast<unsigned long long>(n), static_cast<long long>(opening),
                static_cast<long long>(reading));
    EXPECT_LT(opening, kSlackBytes);
    EXPECT_LT(reading, kSlackBytes);
}

TEST(GgufMemory, ManyTinyMetadataPairsStayWithinTheBound) {
    for (size_t key_bytes : {size_t(4), size_t(17)}) {
        const Bytes img = many_tiny_pairs(1u << 20, key_bytes);
        std::unique_ptr<GgufFile> f;
        const int64_t peak = peak_heap_growth([&] { f = parse(img); });
        ASSERT_EQ(f->metadata().size(), size_t(1) << 20);
        std::printf("%zu-byte file of 1 Mi pairs with %zu-byte keys: %lld bytes of heap at the peak (%.2f per byte)\n",
                    img.size(), key_bytes, static_cast<long long>(peak), double(peak) / double(img.size()));
        EXPECT_LE(peak, bound(img)) << key_bytes << "-byte keys";
        EXPECT_TRUE(f->get_u32(short_name(12345) + std::string(key_bytes - 4, 'k')).has_value());
    }
}

TEST(GgufMemory, ManyTensorsStayWithinTheBound) {
    const Bytes img = many_empty_tensors(1u << 19, 4);
    std::unique_ptr<GgufFile> f;
    const int64_t peak = peak_heap_growth([&] { f = parse(img); });
    ASSERT_EQ(f->tensors().size(), size_t(1) << 19);
    std::printf("%zu-byte file of 512 Ki tensors: %lld bytes of heap at the peak (%.2f per byte)\n", img.size(),
                static_cast<long long>(peak), double(peak) / double(img.size()));
    EXPECT_LE(peak, bound(img));
    ASSERT_NE(f->tensor(short_name(54321)), nullptr);
    EXPECT_EQ(f->tensor(short_name(54321))->nbytes, 0u);
}

// A tensor count as large as the bytes left allow (every row 25 bytes), over
// rows of 48 bytes, with names long enough to be allocated: the table is
// sized for the count, the names are read until the bytes run out.
TEST(GgufMemory, LargestAcceptedTensorCountStaysWithinTheBound) {
    Bytes img = many_empty_tensors(1u << 18, 16);
    const uint64_t claimed = (img.size() - 24) / 25;
    std::memcpy(img.data() + 8, &claimed, 8);
    std::string message;
    const int64_t peak = peak_heap_growth([&] { message = bad_format_message(img); });
    EXPECT_NE(message.find("tensor 262144"), std::string::npos) << message;  // the first row past the real ones
    std::printf("%zu-byte file claiming %llu tensors: %lld bytes of heap at the peak (%.2f per byte)\n", img.size(),
                static_cast<unsigned long long>(claimed), static_cast<long long>(peak),
                double(peak) / double(img.size()));
    EXPECT_LE(peak, bound(img));
}

// A count one more than the bytes after it can hold: refused from the count
// alone, naming it, before a single entry is stored.
TEST(GgufMemory, CountsBeyondTheBytesLeftAreRefusedBeforeAllocating) {
    {
        Bytes img = many_tiny_pairs(1u << 18, 4);
        const uint64_t claimed = (img.size() - 24) / 14 + 1;  // every pair at least 14 bytes
        std::memcpy(img.data() + 16, &claimed, 8);
        std::string message;
        const int64_t peak = peak_heap_growth([&] { message = bad_format_message(img); });
        EXPECT_NE(message.find("the metadata count claims " + std::to_string(claimed) + " entries of at least 14 bytes"),
                  std::string::npos)
            << message;
        EXPECT_LT(peak, kSlackBytes) << message;
    }
    {
        Bytes img = many_empty_tensors(1u << 18, 4);
        const uint64_t claimed = (img.size() - 24) / 25 + 1;  // every table row at least 25 bytes
        std::memcpy(img.data() + 8, &claimed, 8);
        std::string message;
        const int64_t peak = peak_heap_growth([&] { message = bad_format_message(img); });
        EXPECT_NE(message.find("the tensor count claims " + std::to_string(claimed) + " entries of at least 25 bytes"),
                  std::string::npos)
            << message;
        EXPECT_LT(peak, kSlackBytes) << message;
    }
    {
        Bytes img = empty_strings(1u << 18);
        const uint64_t claimed = (1u << 18) + 1;
        std::memcpy(img.data() + 24 + 8 + 21 + 8, &claimed, 8);  // the array's count
        std::string message;
        const int64_t peak = peak_heap_growth([&] { message = bad_format_message(img); });
        EXPECT_NE(message.find("array 'tokenizer.ggml.tokens' claims 262145 entries of at least 8 bytes"),
                  std::string::npos)
            << message;
        EXPECT_LT(peak, kSlackBytes) << message;
    }
}
