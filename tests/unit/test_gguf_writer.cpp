// GgufWriter: what it writes reads back through GgufFile, byte for byte, with
// the size file_size() announced, whatever the tensors' sizes (zero-size
// tensors first, between others, last, or alone).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "gguf/gguf_writer.hpp"
#include "support/paths.hpp"

using moe::GgmlType;
using moe::gguf::GgufFile;
using moe::gguf::GgufWriter;

namespace {

struct Spec {
    std::string name;
    std::vector<int64_t> ne;  // F32
};

// Tensor k's bytes: k + 1 repeated, so every tensor's contents differ.
std::vector<uint8_t> contents(size_t k, uint64_t nbytes) { return std::vector<uint8_t>(nbytes, uint8_t(k + 1)); }

// Writes the tensors (each with one write_data call, or byte by byte when
// `bytewise`), then reads the file back and checks every tensor.
void round_trip(const std::vector<Spec> &specs, bool bytewise = false) {
    const std::string path = moe::test::scratch_dir() + "/w.gguf";
    GgufWriter w(64);
    w.add_string("general.architecture", "test");
    w.add_string_array("t.strings", {"a", "", "bc"});
    for (const Spec &s : specs) w.add_tensor(s.name, GgmlType::F32, s.ne);
    {
        moe::AtomicFile out(path);
        w.begin(out);
        for (size_t k = 0; k < specs.size(); ++k) {
            const std::vector<uint8_t> bytes = contents(k, w.tensor_bytes(k));
            if (bytewise)
                for (uint8_t b : bytes) w.write_data(&b, 1);
            else
                w.write_data(bytes.data(), bytes.size());
        }
        w.finish();
        out.commit();
    }
    EXPECT_EQ(std::filesystem::file_size(path), w.file_size());
    const auto f = GgufFile::open(path);
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->get_string("general.architecture"), "test");
    EXPECT_EQ(f->get_string_array("t.strings").size(), 3u);
    ASSERT_EQ(f->tensors().size(), specs.size());
    for (size_t k = 0; k < specs.size(); ++k) {
        const moe::gguf::TensorInfo &t = f->tensors()[k];
        EXPECT_EQ(t.name, specs[k].name);
        ASSERT_EQ(t.nbytes, w.tensor_bytes(k)) << t.name;
        EXPECT_EQ(t.file_offset % 64, 0u) << t.name;
        const std::vector<uint8_t> want = contents(k, t.nbytes);
        EXPECT_TRUE(t.nbytes == 0 || std::memcmp(t.data, want.data(), t.nbytes) == 0) << t.name;
    }
}

}  // namespace

TEST(GgufWriter, RoundTrips) { round_trip({{"a", {8, 3}}, {"b", {5}}, {"c", {32, 2, 2}}}); }

TEST(GgufWriter, ZeroSizeTensorLast) {
    round_trip({{"a", {8, 3}}, {"empty", {0}}});
    round_trip({{"a", {5}}, {"empty", {0, 4}}, {"empty2", {8, 0}}}, true);
}

TEST(GgufWriter, ZeroSizeTensorBetweenOthers) {
    round_trip({{"a", {5}}, {"empty", {0}}, {"b", {7}}});
    round_trip({{"a", {5}}, {"empty", {0}}, {"empty2", {0, 2}}, {"b", {7}}}, true);
}

TEST(GgufWriter, ZeroSizeTensorFirstAndAlone) {
    round_trip({{"empty", {0}}, {"a", {3}}});
    round_trip({{"empty", {0}}});
    round_trip({{"empty", {0}}, {"empty2", {0}}});
}

TEST(GgufWriter, RefusesTooMuchOrTooLittleData) {
    const std::string path = moe::test::scratch_dir() + "/short.gguf";
    {
        GgufWriter w;
        w.add_tensor("a", GgmlType::F32, {4});
        moe::AtomicFile out(path);
        w.begin(out);
        const std::vector<uint8_t> bytes(12);
        w.write_data(bytes.data(), bytes.size());
        EXPECT_THROW(w.finish(), moe::Error);  // 4 bytes short
    }
    {
        GgufWriter w;
        w.add_tensor("a", GgmlType::F32, {4});
        w.add_tensor("empty", GgmlType::F32, {0});
        moe::AtomicFile out(path);
        w.begin(out);
        const std::vector<uint8_t> bytes(17);
        EXPECT_THROW(w.write_data(bytes.data(), bytes.size()), moe::Error);  // 1 byte more than declared
    }
}
