#include "experts/slot_arena.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

#if MOESTREAM_HAVE_NUMA
#include <numa.h>
#endif

namespace moe {

SlotArena::SlotArena(size_t bytes) {
    if (bytes == 0) return;
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        fail(Status::out_of_memory, "cannot reserve %zu bytes for the expert cache: errno %d", bytes, errno);
    data_ = static_cast<uint8_t *>(p);
    size_ = bytes;
    placement_ = "default node";
#if MOESTREAM_HAVE_NUMA
    // Bind before first touch so pages are born on the local node.
    if (numa_available() >= 0 && numa_max_node() > 0) {
        const int cpu = sched_getcpu();
        const int node = cpu >= 0 ? numa_node_of_cpu(cpu) : -1;
        if (node >= 0) {
            numa_tonode_memory(data_, size_, node);
            placement_ = format("node %d", node);
        }
    }
#endif
#ifdef MADV_HUGEPAGE
    if (bytes >= (2u << 20) && ::madvise(data_, size_, MADV_HUGEPAGE) == 0) placement_ += ", huge pages";
#endif
}

void SlotArena::populate() {
#ifdef MADV_POPULATE_WRITE
    if (::madvise(data_, size_, MADV_POPULATE_WRITE) == 0) return;
    if (errno != EINVAL) {  // EINVAL: a kernel before 5.14, touched below
        const int err = errno;
        const size_t bytes = size_;
        reset();
        fail(Status::out_of_memory, "cannot fault in %zu bytes of expert cache: %s", bytes, std::strerror(err));
    }
#endif
    for (size_t off = 0; off < size_; off += 4096) data_[off] = 0;
}

SlotArena::~SlotArena() { reset(); }

SlotArena::SlotArena(SlotArena &&o) noexcept : data_(o.data_), size_(o.size_), placement_(std::move(o.placement_)) {
    o.data_ = nullptr;
    o.size_ = 0;
}

SlotArena &SlotArena::operator=(SlotArena &&o) noexcept {
    if (this != &o) {
        reset();
        data_ = o.data_;
        size_ = o.size_;
        placement_ = std::move(o.placement_);
        o.data_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

void SlotArena::reset() noexcept {
    if (data_) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace moe
