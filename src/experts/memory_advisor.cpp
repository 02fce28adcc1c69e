#include "experts/memory_advisor.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace moe {
namespace {

#if defined(MADV_WILLNEED) && defined(MADV_DONTNEED)

// Hints apply to whole pages: both advices widen the range outwards. Dropping
// a page shared with a neighbouring expert that is still in use only costs
// that neighbour a minor fault (the page cache still holds the bytes), while
// shrinking inwards would leave such boundary pages resident for ever.
//
// Release uses MADV_DONTNEED rather than MADV_COLD: on a shared read-only file
// mapping DONTNEED unmaps the pages at once, so they leave the resident set
// the budget bounds, and the page cache keeps the bytes until the kernel needs
// the memory (a re-routed expert is then a minor fault, not a read). COLD only
// moves the pages to the inactive list and leaves them mapped and counted.
class MadviseAdvisor final : public MemoryAdvisor {
public:
    MadviseAdvisor() {
        const long page = ::sysconf(_SC_PAGESIZE);
        page_ = page > 0 ? uint64_t(page) : 4096;
    }
    const char *name() const override { return "madvise"; }
    void will_need(const uint8_t *data, uint64_t length) override { advise(data, length, MADV_WILLNEED); }
    void release(const uint8_t *data, uint64_t length) override { advise(data, length, MADV_DONTNEED); }

private:
    void advise(const uint8_t *data, uint64_t length, int advice) const {
        if (!data || length == 0) return;
        const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page_ * page_;
        const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + length + page_ - 1) / page_ * page_;
        // A hint that fails (EAGAIN under memory pressure, EINVAL on an odd
        // mapping) changes only speed and residency, never the bytes read.
        (void)::madvise(reinterpret_cast<void *>(begin), end - begin, advice);
    }
    uint64_t page_ = 4096;
};

#else

class MadviseAdvisor final : public MemoryAdvisor {
public:
    const char *name() const override { return "none"; }
    void will_need(const uint8_t *, uint64_t) override {}
    void release(const uint8_t *, uint64_t) override {}
};

#endif

}  // namespace

std::unique_ptr<MemoryAdvisor> make_system_advisor() { return std::make_unique<MadviseAdvisor>(); }

}  // namespace moe
