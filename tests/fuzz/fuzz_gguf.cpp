// Fuzz target: the GGUF reader and hyper-parameter parsing on arbitrary bytes.
// Only moe::Error is an acceptable outcome besides success; anything else
// (another exception, a sanitizer report, a crash) is a bug.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.hpp"
#include "experts/io_mode_choice.hpp"
#include "gguf/gguf_file.hpp"
#include "model/hparams.hpp"
#include "model/tensor_roles.hpp"

namespace {

template <typename Fn>
void ignoring_format_errors(Fn &&fn) {
    try {
        fn();
    } catch (const moe::Error &) {
    }
}

// Every typed getter on every key: each must either convert or throw moe::Error.
void exercise_metadata(const moe::gguf::GgufFile &f) {
    for (const moe::gguf::MetadataEntry &entry : f.metadata()) {
        const std::string_view key = entry.key;
        ignoring_format_errors([&] { (void)f.get_u32(key); });
        ignoring_format_errors([&] { (void)f.get_f32(key, 0.0f); });
        ignoring_format_errors([&] { (void)f.get_bool(key, false); });
        ignoring_format_errors([&] { (void)f.get_string(key); });
        ignoring_format_errors([&] {
            volatile size_t sink = 0;
            for (std::string_view s : f.get_string_array(key)) sink = sink + s.size();
        });
        ignoring_format_errors([&] { (void)f.get_f32_array(key); });
        ignoring_format_errors([&] { (void)f.get_i32_array(key); });
        ignoring_format_errors([&] { (void)f.get_u32_or_array(key); });
    }
}

// Tensor data the reader hands out must lie inside the input.
void check_tensors(const moe::gguf::GgufFile &f, const uint8_t *data, size_t size) {
    volatile uint8_t sink = 0;
    for (const auto &t : f.tensors()) {
        if (t.data < data || t.file_offset > size || t.nbytes > size - t.file_offset || t.data != data + t.file_offset)
            std::abort();
        if (t.nbytes) sink = sink ^ t.data[0] ^ t.data[t.nbytes - 1];
        if (f.tensor(t.name) == nullptr) std::abort();
    }
    (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const auto file = moe::gguf::GgufFile::parse_memory(data, size, "fuzz.gguf");
        check_tensors(*file, data, size);
        exercise_metadata(*file);
        const moe::ModelBytes bytes = moe::account_bytes(*file);
        if (bytes.dense + bytes.expert != bytes.total) std::abort();
        const moe::HParams hp = moe::HParams::from_gguf(*file);
        (void)moe::estimate_runtime_overhead(hp, 0, 64);
    } catch (const moe::Error &) {
    }
    return 0;
}
