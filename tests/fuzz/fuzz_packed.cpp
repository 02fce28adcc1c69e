// libFuzzer target for the packed expert file reader (src/experts/packed_file.cpp):
// the header and layer table every open parses, and the per-extent header and
// checksum checks of `pack --verify` and of the streaming source.
//
// Each input is read twice: as it is, and with the header's file size and
// checksum made to match (layout in docs/packed-format.md), so mutations reach
// the layer entries and the extents behind a check a random flip would
// otherwise never pass. Whatever the bytes, the reader must throw moe::Error
// (never Status::internal) or return a report that counts each expert once.
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "experts/packed_file.hpp"
#include "input_file.hpp"

namespace {

constexpr size_t kHeaderBytes = 48, kLayerEntryBytes = 136;
constexpr size_t kNLayerOffset = 24, kFileBytesOffset = 32, kChecksumOffset = 40;

void require(bool ok) {
    if (!ok) __builtin_trap();
}

void verify_once(moe::fuzz::InputFile &input, const std::vector<uint8_t> &image) {
    try {
        const moe::PackedVerifyReport r = moe::verify_packed_file(input.holding(image.data(), image.size()));
        require(r.bad_experts <= r.experts_checked && r.first_problem.empty() == (r.bad_experts == 0));
    } catch (const moe::Error &e) {
        require(e.status() != moe::Status::internal);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static moe::fuzz::InputFile input;
    std::vector<uint8_t> image(data, data + size);
    verify_once(input, image);
    if (size < kHeaderBytes) return 0;
    uint32_t n_layer = 0;
    std::memcpy(&n_layer, image.data() + kNLayerOffset, sizeof n_layer);
    const uint64_t table = kHeaderBytes + uint64_t(n_layer) * kLayerEntryBytes;
    if (n_layer == 0 || table > size) return 0;
    const uint64_t file_bytes = size, zero = 0;
    std::memcpy(image.data() + kFileBytesOffset, &file_bytes, sizeof file_bytes);
    std::memcpy(image.data() + kChecksumOffset, &zero, sizeof zero);
    const uint64_t sum = XXH3_64bits(image.data(), table);
    std::memcpy(image.data() + kChecksumOffset, &sum, sizeof sum);
    verify_once(input, image);
    return 0;
}
