// The state file container (docs/state-format.md): header, typed sections and
// a checksum, written atomically and read with every field checked before the
// caller sees any of it.
//
// This layer knows nothing about the Context: the context describes its shape
// (StateShape) and hands over byte ranges to save; on load it gets back views
// of the verified file image and copies them into place.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/ggml_types.hpp"
#include "gguf/gguf_file.hpp"

namespace moe::state {

// Version 2 lets a sliding-window layer hold only the rows its window still
// reads. The writer stamps a file 1 when every layer holds all n_past rows
// (as every version 1 file does), so such files stay readable by builds that
// know only version 1; the reader takes both.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestFormatVersion = 1;
inline constexpr size_t kHeaderSize = 80;
inline constexpr size_t kSectionHeaderSize = 16;

enum class SectionType : uint32_t {
    tokens = 1,
    positions = 2,
    kv_k = 3,
    kv_v = 4,
    sampler = 5,
};
// Types with this bit set are optional extensions that readers may skip.
inline constexpr uint32_t kOptionalSectionBit = 0x8000'0000u;

// Everything that must agree between the saving and the loading context.
struct StateShape {
    uint64_t fingerprint = 0;   // model_fingerprint() of the GGUF
    uint32_t n_layer = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim_k = 0;
    uint32_t head_dim_v = 0;
    uint32_t n_ctx = 0;
    GgmlType kv_type = GgmlType::F16;
    uint32_t n_vocab = 0;
    uint32_t kv_layout = 1;
    // Bytes of one token's K / V row per layer (size n_layer). A V entry of 0
    // means the layer has no V cache. Not stored in the file: the loading
    // context supplies them and section lengths are checked against them.
    std::vector<uint64_t> k_row_bytes;
    std::vector<uint64_t> v_row_bytes;
    // Positions a query of each layer sees, its own included; 0 = all (full
    // attention). Not stored either (the fingerprint covers the model's
    // windows): a layer with a window needs only the rows of the last
    // window - 1 positions. Empty: every layer is full.
    std::vector<uint32_t> window;
};

// XXH3-64 over the GGUF header + metadata + tensor table of the first shard,
// then the first kFingerprintSampleBytes of every tensor's data, so that two
// files with the same layout but different weights (fine-tunes, reseeded
// generated models) differ.
inline constexpr uint64_t kFingerprintSampleBytes = 64;
uint64_t model_fingerprint(const gguf::GgufFile &file);

// One section to write: its bytes are the concatenation of `parts` (so a
// context can save strided storage without copying it first).
struct SectionData {
    SectionType type = SectionType::tokens;
    uint32_t index = 0;
    std::vector<std::span<const uint8_t>> parts;
    uint64_t size() const;
};

// A KV section holds the rows of the last positions, n_past - rows .. n_past - 1:
// all n_past of them, or (format version 2) fewer for a layer with a window.
struct StateContents {
    uint32_t n_past = 0;
    std::vector<SectionData> sections;
};

// The version a state is written as: 1 when every KV section holds n_past
// rows, else 2.
uint32_t format_version_of(const StateShape &shape, const StateContents &contents);

// The system calls the writer makes (common/atomic_file.hpp), replaceable by
// tests to simulate a full disk or an I/O error part way.
using FileOps = moe::FileOps;

// Writes the state file atomically through an AtomicFile: open the directory,
// a temporary file beside `path`, fsync, rename over `path`, fsync of the
// directory. On failure throws moe::Error(io) naming the path and errno; the
// temporary file is removed and any previous file at `path` is left as it
// was. Nothing can fail after the rename: a directory fsync that fails then
// comes back as a warning (the returned text; "" when none) for the caller
// to log.
std::string write_state_file(const std::string &path, const StateShape &shape,
                             const StateContents &contents, const FileOps &ops = FileOps::posix());

// Serialises into memory (for tests and fuzz seeds): exactly the bytes
// write_state_file would write.
std::vector<uint8_t> encode_state(const StateShape &shape, const StateContents &contents);

// A verified state image. Views point into `image` (8-byte aligned).
struct LoadedState {
    std::vector<uint8_t> image;
    uint32_t n_past = 0;
    std::span<const int32_t> tokens;
    std::span<const int32_t> positions;
    uint32_t version = 0;
    // Per layer: the K and V rows of the last rows[l] positions, n_past - rows[l] .. n_past - 1.
    std::vector<uint32_t> rows;
    std::vector<std::span<const uint8_t>> k;
    std::vector<std::span<const uint8_t>> v;  // empty where the layer has no V cache
    std::span<const uint8_t> sampler;         // the sampler section's bytes (runtime/sampler_state.hpp)
    bool has_sampler = false;                 // whether the file has a sampler section
};

// The largest payload a state of `shape` can have: every required section
// sized for n_ctx tokens, plus kOptionalSectionAllowance for the sampler
// section and optional extensions. A reader refuses a larger payload before
// reading it.
inline constexpr uint64_t kOptionalSectionAllowance = 1 << 20;
uint64_t max_payload_size(const StateShape &shape);

// Checks, in order: magic, version (1 or 2), header size, payload size (against the
// image and against max_payload_size(expected)), checksum, fingerprint,
// shape, sections (docs/state-format.md, "Validation on load"). Throws
// moe::Error(bad_format) for corrupt, truncated or oversized images,
// (state_mismatch) for another model or shape, (unsupported) for another
// format version; the message starts with `label`. `expected` must be
// self-consistent (row byte vectors of size n_layer).
LoadedState parse_state(std::vector<uint8_t> image, const StateShape &expected,
                        const std::string &label);
// Reads the header and checks it against the file's size and `expected`
// first, then reads the rest and parses it, so a file that is no state of
// this context costs no more memory than its header. I/O errors throw
// moe::Error(io).
LoadedState read_state_file(const std::string &path, const StateShape &expected);

// The fields of a header without any check beyond its size (for tools and the
// fuzzer's checksum fix-up). Returns false if the image is shorter than a header.
struct RawHeader {
    uint32_t version = 0, header_size = 0;
    StateShape shape;  // row byte vectors left empty
    uint32_t n_past = 0, n_sections = 0;
    uint64_t payload_size = 0, checksum = 0;
};
bool peek_header(std::span<const uint8_t> image, RawHeader &out);
// The checksum the header of `image` should carry (header prefix + payload as
// declared, clamped to the image). Requires image.size() >= kHeaderSize.
uint64_t compute_checksum(std::span<const uint8_t> image);
inline constexpr size_t kChecksumOffset = 72;

}  // namespace moe::state
