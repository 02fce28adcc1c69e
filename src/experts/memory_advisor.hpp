// Residency hints for byte ranges of a read-only file mapping, behind a small
// interface so the bookkeeping that decides what to hint can be tested with a
// recording fake. The system advisor uses madvise(2) where it exists and does
// nothing elsewhere (the mapping still works; only the hints are lost).
#pragma once

#include <cstdint>
#include <memory>

namespace moe {

class MemoryAdvisor {
public:
    virtual ~MemoryAdvisor() = default;
    virtual const char *name() const = 0;
    // The range will be read soon: start reading it in now.
    virtual void will_need(const uint8_t *data, uint64_t length) = 0;
    // The range is not needed for a while: drop it from this process's
    // resident set. Reading it again later must still return the same bytes
    // (the mapping is file-backed and read-only, so the file supplies them).
    virtual void release(const uint8_t *data, uint64_t length) = 0;
};

// madvise(MADV_WILLNEED) / madvise(MADV_DONTNEED) on Linux, widened to whole
// pages; a no-op advisor on systems without madvise.
std::unique_ptr<MemoryAdvisor> make_system_advisor();

}  // namespace moe
