#include "experts/slot_arena.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace moe {

SlotArena::SlotArena(size_t bytes, NumaPlacement placement) {
    try {
        memory_ = NumaBuffer(bytes, placement);
    } catch (const Error &e) {
        fail(Status::out_of_memory, "cannot reserve %zu bytes for the expert cache: %s", bytes, e.what());
    }
}

void SlotArena::populate() {
    uint8_t *p = data();
    const size_t n = size();
#ifdef MADV_POPULATE_WRITE
    if (::madvise(p, n, MADV_POPULATE_WRITE) == 0) return;
    if (errno != EINVAL) {  // EINVAL: a kernel before 5.14, touched below
        const int err = errno;
        memory_ = NumaBuffer();
        fail(Status::out_of_memory, "cannot fault in %zu bytes of expert cache: %s", n, std::strerror(err));
    }
#endif
    for (size_t off = 0; off < n; off += 4096) p[off] = 0;
}

}  // namespace moe
