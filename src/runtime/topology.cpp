#include "runtime/topology.hpp"

#include <hwloc.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

namespace moe::topology {
namespace {

// The topology is loaded once and only read afterwards (hwloc is thread-safe
// for read-only use).
class Topology {
public:
    static const Topology &get() {
        static const Topology instance;
        return instance;
    }
    hwloc_topology_t handle() const { return ok_ ? topo_ : nullptr; }
    ~Topology() {
        if (ok_) hwloc_topology_destroy(topo_);
    }

private:
    Topology() {
        if (hwloc_topology_init(&topo_) != 0) return;
        if (hwloc_topology_load(topo_) != 0) {
            hwloc_topology_destroy(topo_);
            return;
        }
        ok_ = true;
    }
    hwloc_topology_t topo_{};
    bool ok_ = false;
};

int read_int_file(const std::string &path, int fallback) {
    std::ifstream in(path);
    int v;
    if (in >> v) return v;
    return fallback;
}

bool bind_to(hwloc_const_cpuset_t set) {
    hwloc_topology_t t = Topology::get().handle();
    if (!t || !set) return false;
    hwloc_cpuset_t copy = hwloc_bitmap_dup(set);
    hwloc_bitmap_singlify(copy);  // one PU: no migration between SMT siblings
    const bool ok = hwloc_set_cpubind(t, copy, HWLOC_CPUBIND_THREAD) == 0;
    hwloc_bitmap_free(copy);
    return ok;
}

}  // namespace

int physical_cores() {
    hwloc_topology_t t = Topology::get().handle();
    if (t) {
        const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
        if (n > 0) return n;
    }
    const unsigned hc = std::thread::hardware_concurrency();
    return hc > 0 ? static_cast<int>(hc) : 1;
}

int numa_nodes() {
    hwloc_topology_t t = Topology::get().handle();
    if (t) {
        const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
        if (n > 0) return n;
    }
    return 1;
}

int numa_node_of_path(const std::string &path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return -1;
    const dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
    const std::string link = "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
    char resolved[PATH_MAX];
    if (!::realpath(link.c_str(), resolved)) return -1;
    // Walk up from the block device (or partition) towards its PCI device.
    std::string dir = resolved;
    while (dir.size() > 4 && dir.rfind("/sys/", 0) == 0) {
        for (const char *leaf : {"/device/numa_node", "/numa_node"}) {
            const int node = read_int_file(dir + leaf, INT_MIN);
            if (node != INT_MIN) return node >= 0 ? node : -1;
        }
        const size_t slash = dir.find_last_of('/');
        if (slash == std::string::npos || slash == 0) break;
        dir.resize(slash);
    }
    return -1;
}

bool bind_thread_to_core(int index) {
    hwloc_topology_t t = Topology::get().handle();
    if (!t || index < 0) return false;
    const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    if (n <= 0) return false;
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(index % n));
    return core && bind_to(core->cpuset);
}

bool bind_thread_to_numa_node(int node) {
    hwloc_topology_t t = Topology::get().handle();
    if (!t || node < 0) return false;
    hwloc_obj_t obj = hwloc_get_numanode_obj_by_os_index(t, static_cast<unsigned>(node));
    if (!obj) return false;
    hwloc_topology_t topo = t;
    return hwloc_set_cpubind(topo, obj->cpuset, HWLOC_CPUBIND_THREAD) == 0;
}

}  // namespace moe::topology
