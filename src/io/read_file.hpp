// A file opened for expert reads: with O_DIRECT when asked and the
// filesystem accepts it (the engine's cache then holds the only copy), and
// always with a buffered descriptor to fall back to when it does not.
#pragma once

#include <cstdint>
#include <string>

#include "common/unique_fd.hpp"

namespace moe::io {

// O_DIRECT needs offset, length and memory aligned to the logical block size;
// 4 KiB covers every common device.
constexpr uint64_t kDirectAlignment = 4096;

// A byte range widened to `alignment`: read [offset, offset + length) and find
// the wanted bytes `skip` bytes into the buffer.
struct AlignedRange {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t skip = 0;
};
AlignedRange align_range(uint64_t offset, uint64_t length, uint64_t alignment);
// Upper bound of align_range(o, length, alignment).length over all offsets o.
uint64_t aligned_length_bound(uint64_t length, uint64_t alignment);

inline uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

class ReadFile {
public:
    ReadFile() = default;
    // Throws moe::Error(io) naming the path when the file cannot be opened.
    ReadFile(const std::string &path, bool want_direct);

    const std::string &path() const { return path_; }
    uint64_t size() const { return size_; }
    bool direct() const { return bool(direct_fd_); }
    int direct_fd() const { return direct_fd_.get(); }
    int buffered_fd() const { return buffered_fd_.get(); }
    // Why O_DIRECT is not in use ("" when it is or was not asked for).
    const std::string &direct_refused() const { return direct_refused_; }

private:
    std::string path_;
    uint64_t size_ = 0;
    UniqueFd direct_fd_;
    UniqueFd buffered_fd_;
    std::string direct_refused_;
};

}  // namespace moe::io
