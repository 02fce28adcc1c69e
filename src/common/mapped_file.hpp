// RAII read-only file mapping (Linux: mmap; the portable fallback reads the
// file into memory). Empty files map to an empty, valid object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/unique_fd.hpp"

namespace moe {

class MappedFile {
public:
    MappedFile() = default;
    // Throws moe::Error(Status::io) when the file cannot be opened or mapped.
    explicit MappedFile(const std::string &path);
    ~MappedFile();
    MappedFile(MappedFile &&other) noexcept;
    MappedFile &operator=(MappedFile &&other) noexcept;
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    const uint8_t *data() const { return data_; }
    size_t size() const { return size_; }
    int fd() const { return fd_.get(); }  // kept open for pread/O_DIRECT users; -1 if none

    // Residency hints over a byte range (no-ops where unsupported).
    void advise_willneed(uint64_t offset, uint64_t length) const;
    void advise_dontneed(uint64_t offset, uint64_t length) const;
    // Asks for huge pages over the whole mapping: pages read in through it
    // from then on come as 2 MiB folios, each mapped by one page-table entry
    // (fewer TLB misses when weights are streamed). Returns false where
    // unsupported; pages already cached keep their size.
    bool advise_huge_pages() const;

private:
    void reset() noexcept;
    const uint8_t *data_ = nullptr;
    size_t size_ = 0;
    UniqueFd fd_;
};

}  // namespace moe
