#include "common/numa_memory.hpp"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "common/error.hpp"
#include "common/huge_pages.hpp"

namespace moe {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// Maps `bytes` (rounded up) aligned to 2 MiB when large, so THP can back it.
void *map_aligned(size_t bytes, size_t &mapped) {
    const size_t align = bytes >= kHugePage ? kHugePage : 4096;
    const size_t len = (bytes + align - 1) / align * align;
    const size_t over = len + (align > 4096 ? align : 0);
    void *raw = ::mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    uintptr_t p = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (p + align - 1) / align * align;
    if (aligned > p) ::munmap(raw, aligned - p);
    const uintptr_t end = p + over, used_end = aligned + len;
    if (end > used_end) ::munmap(reinterpret_cast<void *>(used_end), end - used_end);
    mapped = len;
    return reinterpret_cast<void *>(aligned);
}

// mbind(2) directly rather than libnuma's wrappers, which print to stderr
// when the call fails; here a failure only means no policy.
bool apply_policy(void *data, size_t len, int mode, const struct bitmask *nodes) {
    return mbind(data, len, mode, nodes->maskp, nodes->size + 1, 0) == 0;
}

// A preference (MPOL_PREFERRED), so a full node spills over instead of
// failing the allocation.
bool prefer_node(void *data, size_t len, int node) {
    if (node < 0) return false;
    struct bitmask *mask = numa_allocate_nodemask();
    numa_bitmask_setbit(mask, unsigned(node));
    const bool ok = apply_policy(data, len, MPOL_PREFERRED, mask);
    numa_free_nodemask(mask);
    return ok;
}

// Mode flags get_mempolicy(2) reports with the mode: MPOL_F_STATIC_NODES,
// MPOL_F_RELATIVE_NODES, MPOL_F_NUMA_BALANCING.
constexpr int kModeFlags = 7 << 13;

struct Nodemask {
    struct bitmask *mask = numa_allocate_nodemask();
    ~Nodemask() { numa_free_nodemask(mask); }
    Nodemask() = default;
    Nodemask(const Nodemask &) = delete;
    Nodemask &operator=(const Nodemask &) = delete;
};

// The memory policy the calling thread was given (numactl --membind,
// --interleave or --preferred before the program started, or set_mempolicy
// in the application), with its flags; MPOL_DEFAULT when none.
int given_policy(struct bitmask *nodes) {
    int mode = MPOL_DEFAULT;
    if (get_mempolicy(&mode, nodes->maskp, nodes->size + 1, nullptr, 0) != 0) return MPOL_DEFAULT;
    return (mode & ~kModeFlags) == MPOL_LOCAL ? MPOL_DEFAULT : mode;
}

const char *policy_name(int mode) {
    switch (mode & ~kModeFlags) {
    case MPOL_BIND: return "bind";
    case MPOL_INTERLEAVE: return "interleave";
    case MPOL_PREFERRED: return "preferred";
    default: return "other";
    }
}

int current_node() {
    const int cpu = sched_getcpu();
    return cpu >= 0 ? numa_node_of_cpu(cpu) : -1;
}

}  // namespace

bool numa_supported() {
    static const bool ok = numa_available() >= 0;
    return ok;
}

NumaBuffer::NumaBuffer(size_t bytes, NumaPlacement placement, int node) {
    const int max_node = numa_supported() ? numa_max_node() : 0;
    if (placement == NumaPlacement::node && (node < 0 || node > max_node))
        fail(Status::invalid_argument, "NUMA node %d does not exist (max %d)", node, max_node);
    if (bytes == 0) return;
    data_ = map_aligned(bytes, mapped_);
    if (!data_) fail(Status::out_of_memory, "cannot map %zu bytes: errno %d", bytes, errno);
    size_ = bytes;
    // The policy goes on before the first touch, so pages are born where they belong.
    // It is applied even on a one-node machine, where it changes nothing but
    // can be read back (get_mempolicy), so the same code runs everywhere.
    if (numa_supported()) {
        // mbind() on the range beats the process's policy: a policy the
        // process was given is kept for the local placement (the default)
        // and bounds the interleaved one, instead of being overridden.
        // An explicit node ignores the process's policy, so it is not read for one.
        const Nodemask given;
        const int given_mode = placement == NumaPlacement::node ? MPOL_DEFAULT : given_policy(given.mask);
        const bool bound = (given_mode & ~kModeFlags) == MPOL_BIND && numa_bitmask_weight(given.mask) > 0;
        switch (placement) {
        case NumaPlacement::local:
            if (given_mode != MPOL_DEFAULT && apply_policy(data_, mapped_, given_mode, given.mask)) {
                numa_placed_ = true;
                placement_ = format("the process's NUMA policy (%s)", policy_name(given_mode));
                break;
            }
            node = current_node();
            numa_placed_ = prefer_node(data_, mapped_, node);
            if (numa_placed_) {
                placement_ = format("node %d", node);
            } else if (apply_policy(data_, mapped_, MPOL_LOCAL, numa_no_nodes_ptr)) {
                // A node without memory of its own (or an unknown CPU): the
                // kernel's nearest node with memory, page by page.
                numa_placed_ = true;
                placement_ = "nearest node";
            }
            break;
        case NumaPlacement::node:
            numa_placed_ = prefer_node(data_, mapped_, node);
            if (numa_placed_) placement_ = format("node %d", node);
            break;
        case NumaPlacement::interleave: {
            const struct bitmask *over = bound ? given.mask : numa_all_nodes_ptr;
            numa_placed_ = apply_policy(data_, mapped_, MPOL_INTERLEAVE, over);
            const unsigned nodes = numa_bitmask_weight(over);
            if (numa_placed_) placement_ = format("interleaved over %u node%s", nodes, nodes > 1 ? "s" : "");
            break;
        }
        }
    }
    if (!numa_placed_) placement_ = "no NUMA policy";
    if (mapped_ >= kHugePage) huge_ = advise_huge_pages(data_, mapped_);
    if (huge_) placement_ += ", huge pages";
}

NumaBuffer::~NumaBuffer() { release(); }

NumaBuffer::NumaBuffer(NumaBuffer &&o) noexcept { *this = std::move(o); }

NumaBuffer &NumaBuffer::operator=(NumaBuffer &&o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        mapped_ = std::exchange(o.mapped_, 0);
        numa_placed_ = std::exchange(o.numa_placed_, false);
        huge_ = std::exchange(o.huge_, false);
        placement_ = std::move(o.placement_);
    }
    return *this;
}

void NumaBuffer::release() noexcept {
    if (data_) ::munmap(data_, mapped_);
    data_ = nullptr;
    size_ = mapped_ = 0;
}

}  // namespace moe
