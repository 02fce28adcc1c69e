// Packed expert file ("moepack"): a sidecar beside a GGUF model in which each
// routed expert (gate, up and down of one layer) is one 4 KiB-aligned extent,
// so a cache miss is exactly one aligned read. The layout is documented in
// docs/packed-format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "experts/expert_source.hpp"

namespace moe {

constexpr uint32_t kPackedAlignment = 4096;
constexpr uint32_t kPackedVersion = 1;

// Fingerprint of a model: XXH3-64 of its GGUF header and tensor table.
uint64_t model_fingerprint(const uint8_t *header_bytes, uint64_t header_size);

// Where one layer's experts live inside the packed file.
struct PackedLayer {
    int32_t n_expert = 0;          // 0: the layer has no routed experts
    uint64_t first_extent = 0;     // offset of expert 0's extent
    uint64_t extent_bytes = 0;     // stride between experts (multiple of 4096)
    uint64_t gate_offset = 0, gate_bytes = 0;  // within the extent
    uint64_t up_offset = 0, up_bytes = 0;
    uint64_t down_offset = 0, down_bytes = 0;
    uint64_t extent_of(int32_t expert) const { return first_extent + uint64_t(expert) * extent_bytes; }
};

// The per-expert header at the start of every extent.
struct PackedMatrix {
    uint32_t type;
    uint32_t reserved;
    int64_t cols;
    int64_t rows;
    uint64_t offset;  // from the extent start
    uint64_t bytes;
};
struct PackedExpertHeader {
    uint32_t magic;           // kExpertMagic
    uint16_t version;
    uint16_t n_matrices;      // 3 (gate may have rows == 0)
    uint32_t layer;
    uint32_t expert;
    uint64_t payload_offset;  // first matrix byte
    uint64_t payload_bytes;   // through the end of `down`
    uint64_t checksum;        // XXH3-64 of the payload
    PackedMatrix matrix[3];   // gate, up, down
};
static_assert(sizeof(PackedExpertHeader) == 160);
constexpr uint32_t kExpertMagic = 0x58454f4d;  // "MOEX"
constexpr uint64_t kExpertHeaderBytes = 192;   // header rounded up to 64 bytes

class PackedFile {
public:
    // Reads and checks the header. Throws moe::Error(bad_format) naming the
    // path when the file is malformed or was made from another model
    // (fingerprint) or a different expert layout.
    static PackedFile open(const std::string &path, uint64_t model_fingerprint,
                           const std::vector<ExpertLayerLayout> &layouts);

    const std::string &path() const { return path_; }
    uint64_t fingerprint() const { return fingerprint_; }
    const std::vector<PackedLayer> &layers() const { return layers_; }
    uint64_t max_extent_bytes() const;

    // Checks one extent as it lies in memory: header fields and payload
    // checksum. Returns "" when good, else what is wrong.
    std::string check_extent(const uint8_t *extent, int32_t layer, int32_t expert) const;

private:
    std::string path_;
    uint64_t fingerprint_ = 0;
    std::vector<PackedLayer> layers_;
};

// Default sidecar path for a model.
std::string default_packed_path(const std::string &model_path);

// Writes the packed file for `layouts` (index = layer; layers without experts
// have n_expert == 0). Expert bytes come from each matrix's `mapped` pointer,
// or, when that is null, are read from shard_paths[matrix.shard]. Writes to
// a temporary file and renames, so a failure leaves no partial sidecar.
void write_packed_file(const std::string &out_path, uint64_t model_fingerprint,
                       const std::vector<ExpertLayerLayout> &layouts, const std::vector<std::string> &shard_paths);

struct PackedVerifyReport {
    uint64_t experts_checked = 0;
    uint64_t bad_experts = 0;
    std::string first_problem;  // "" when all good
};
// The model a packed file was written from: its expert layouts and the
// files (shards) holding their bytes.
struct ModelExperts {
    const std::vector<ExpertLayerLayout> &layouts;
    const std::vector<std::string> &shard_paths;
};
// Reads every extent and checks its header and checksum. Given the model
// (which PackedFile::open must have accepted the file for), also compares
// every expert's matrices with the model's bytes.
PackedVerifyReport verify_packed_file(const std::string &path, const ModelExperts *model = nullptr);

// The fingerprint covers the GGUF's header and tensor table, not its tensor
// data: a model rewritten with other weights of the same shapes (regenerated,
// fine-tuned) keeps it. Compares two experts (the first expert layer's first,
// the last one's last) with the model's bytes; returns "" when they are
// equal, else which differs. For an opened `packed` of these layouts.
std::string packed_sample_mismatch(const PackedFile &packed, const ModelExperts &model);

}  // namespace moe
