#include "common/topology.hpp"

#include <hwloc.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.hpp"

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
        // Only the CPUs the process is bound to (taskset, numactl
        // --cpunodebind, sched_setaffinity before the first context): hwloc
        // otherwise leaves out only the cgroup's disallowed CPUs, and the
        // pool would count, and pin its threads to, cores the process was
        // kept off. The binding is read once, when the topology is loaded.
#if HWLOC_API_VERSION >= 0x00020500
        (void)hwloc_topology_set_flags(
            topo_, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM | HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING);
#endif
        if (hwloc_topology_load(topo_) != 0) {
            hwloc_topology_destroy(topo_);
            return;
        }
#if HWLOC_API_VERSION < 0x00020500
        if (hwloc_bitmap_t bound = hwloc_bitmap_alloc()) {
            if (hwloc_get_cpubind(topo_, bound, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound))
                (void)hwloc_topology_restrict(topo_, bound, 0);
            hwloc_bitmap_free(bound);
        }
#endif
        ok_ = true;
    }
    hwloc_topology_t topo_{};
    bool ok_ = false;
};

// The CPUs the calling thread may run on, for when hwloc cannot tell
// (hardware_concurrency() counts CPUs the process may not use).
std::vector<int> affinity_cpus() {
    std::vector<int> out;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) out.push_back(c);
    if (out.empty()) {
        const unsigned n = std::max(1u, std::thread::hardware_concurrency());
        for (unsigned i = 0; i < n; ++i) out.push_back(int(i));
    }
    return out;
}

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
    return static_cast<int>(affinity_cpus().size());
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

namespace {
// Threads pinned to each core by this process (index: hwloc's logical core
// index). Never destroyed: a pool may outlive static destruction.
struct CoreUse {
    std::mutex mu;
    std::vector<int> threads;
};
CoreUse &core_use() {
    static CoreUse *use = new CoreUse;
    return *use;
}
}  // namespace

std::vector<int> claim_cores(int n) {
    std::vector<int> out;
    hwloc_topology_t t = Topology::get().handle();
    const int cores = t ? hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) : 0;
    if (cores <= 0 || n <= 0) return out;
    CoreUse &use = core_use();
    std::lock_guard lock(use.mu);
    use.threads.resize(size_t(cores), 0);
    for (int k = 0; k < n; ++k) {
        int best = -1;
        for (int i = 1; i <= cores; ++i) {
            const int c = i % cores;
            if (best < 0 || use.threads[size_t(c)] < use.threads[size_t(best)]) best = c;
        }
        ++use.threads[size_t(best)];
        out.push_back(best);
    }
    return out;
}

void release_cores(const std::vector<int> &cores) {
    if (cores.empty()) return;
    CoreUse &use = core_use();
    std::lock_guard lock(use.mu);
    for (int c : cores)
        if (c >= 0 && size_t(c) < use.threads.size() && use.threads[size_t(c)] > 0) --use.threads[size_t(c)];
}

bool bind_thread_to_numa_node(int node) {
    hwloc_topology_t t = Topology::get().handle();
    if (!t || node < 0) return false;
    hwloc_obj_t obj = hwloc_get_numanode_obj_by_os_index(t, static_cast<unsigned>(node));
    if (!obj) return false;
    hwloc_topology_t topo = t;
    return hwloc_set_cpubind(topo, obj->cpuset, HWLOC_CPUBIND_THREAD) == 0;
}

namespace {

// A topology with I/O devices (block devices), loaded on first use: it
// costs a sysfs walk, so only placement lookups that sysfs
// alone cannot answer pay for it.
class IoTopology {
public:
    static const IoTopology &get() {
        static const IoTopology instance;
        return instance;
    }
    hwloc_topology_t handle() const { return ok_ ? topo_ : nullptr; }
    ~IoTopology() {
        if (ok_) hwloc_topology_destroy(topo_);
    }

private:
    IoTopology() {
        if (hwloc_topology_init(&topo_) != 0) return;
        // Block devices only: the libpciaccess-based "pci" plugin leaks on
        // every load, and a disk's locality comes from the Linux I/O backend
        // (sysfs) or, failing that, sysfs numa_node/local_cpulist. Blacklisting
        // an absent plugin fails harmlessly, so its result is not checked.
        (void)hwloc_topology_set_components(topo_, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
        if (hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0 ||
            hwloc_topology_load(topo_) != 0) {
            hwloc_topology_destroy(topo_);
            return;
        }
        ok_ = true;
    }
    hwloc_topology_t topo_{};
    bool ok_ = false;
};

struct Bitmap {
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    ~Bitmap() { hwloc_bitmap_free(b); }
    Bitmap() = default;
    Bitmap(const Bitmap &) = delete;
    Bitmap &operator=(const Bitmap &) = delete;
};

std::vector<int> to_cpus(hwloc_const_bitmap_t set) {
    std::vector<int> out;
    if (!set) return out;
    int i = -1;
    while ((i = hwloc_bitmap_next(set, i)) != -1) out.push_back(i);
    return out;
}

std::vector<int> intersect(const std::vector<int> &a, const std::vector<int> &b) {
    std::vector<int> out;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
    return out;
}

// "0-3,8" (sysfs cpulist format) -> CPU indices; empty on anything else.
std::vector<int> parse_cpu_list(const std::string &text) {
    std::vector<int> out;
    std::stringstream in(text);
    std::string part;
    while (std::getline(in, part, ',')) {
        while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.pop_back();
        if (part.empty()) continue;
        char *end = nullptr;
        const long lo = std::strtol(part.c_str(), &end, 10);
        long hi = lo;
        if (*end == '-') hi = std::strtol(end + 1, &end, 10);
        if (*end || lo < 0 || hi < lo || hi > 65535) return {};
        for (long c = lo; c <= hi; ++c) out.push_back(int(c));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::string read_line(const std::string &path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// What sysfs says about the block device `dev`: its (whole-disk) name, its
// NUMA node and the CPU list local to the bus device it hangs off.
struct SysfsDevice {
    bool found = false;
    std::string name;
    int numa_node = -1;
    std::vector<int> local_cpus;
};

SysfsDevice sysfs_block_device(dev_t dev) {
    SysfsDevice d;
    if (major(dev) == 0) return d;  // anonymous device: tmpfs, overlay, proc...
    const std::string link = "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
    char resolved[PATH_MAX];
    if (!::realpath(link.c_str(), resolved)) return d;
    d.found = true;
    std::string dir = resolved;
    // A partition's directory sits inside its disk's: name the disk.
    const bool partition = std::ifstream(dir + "/partition").good();
    std::string disk_dir = dir;
    if (partition) disk_dir.resize(disk_dir.find_last_of('/'));
    d.name = disk_dir.substr(disk_dir.find_last_of('/') + 1);
    bool node_known = false;
    while (dir.size() > 4 && dir.rfind("/sys/", 0) == 0) {
        if (!node_known) {
            const int node = read_int_file(dir + "/numa_node", INT_MIN);
            if (node != INT_MIN) {
                node_known = true;
                d.numa_node = node >= 0 ? node : -1;
            }
        }
        if (d.local_cpus.empty()) d.local_cpus = parse_cpu_list(read_line(dir + "/local_cpulist"));
        if (node_known && !d.local_cpus.empty()) break;
        const size_t slash = dir.find_last_of('/');
        if (slash == std::string::npos || slash == 0) break;
        dir.resize(slash);
    }
    return d;
}

// The CPU set hwloc's I/O topology places block device `name` under.
std::vector<int> hwloc_cpus_of_block_device(const std::string &name) {
    hwloc_topology_t t = IoTopology::get().handle();
    if (!t || name.empty()) return {};
    hwloc_obj_t osdev = nullptr;
    while ((osdev = hwloc_get_next_osdev(t, osdev)) != nullptr) {
        if (!osdev->name || name != osdev->name) continue;
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, osdev);
        if (anc && anc->cpuset) return to_cpus(anc->cpuset);
    }
    return {};
}

DevicePlacement compute_placement(dev_t dev) {
    DevicePlacement p;
    const std::vector<int> allowed = allowed_cpus();
    const SysfsDevice d = sysfs_block_device(dev);
    p.device = d.name;
    if (!d.found) {
        p.cpus = allowed;
        p.how = "no block device: all allowed CPUs";
        return p;
    }
    if (d.numa_node >= 0) {
        hwloc_topology_t t = Topology::get().handle();
        hwloc_obj_t node = t ? hwloc_get_numanode_obj_by_os_index(t, unsigned(d.numa_node)) : nullptr;
        std::vector<int> cpus = node ? intersect(to_cpus(node->cpuset), allowed) : std::vector<int>{};
        if (!cpus.empty()) {
            p.cpus = std::move(cpus);
            p.numa_node = d.numa_node;
            p.how = format("%s: NUMA node %d", d.name.c_str(), d.numa_node);
            return p;
        }
    }
    std::vector<int> cpus = intersect(hwloc_cpus_of_block_device(d.name), allowed);
    if (!cpus.empty()) {
        p.cpus = std::move(cpus);
        p.how = d.name + ": hwloc I/O locality";
    } else if (!(cpus = intersect(d.local_cpus, allowed)).empty()) {
        p.cpus = std::move(cpus);
        p.how = d.name + ": sysfs local_cpulist";
    } else {
        p.cpus = allowed;
        p.how = d.name + ": locality unknown, all allowed CPUs";
    }
    // Name the node when the CPUs lie within one.
    if (hwloc_topology_t t = Topology::get().handle()) {
        Bitmap set;
        for (int c : p.cpus) hwloc_bitmap_set(set.b, unsigned(c));
        hwloc_obj_t node = nullptr;
        int matches = 0;
        for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n)) != nullptr;)
            if (hwloc_bitmap_isincluded(set.b, n->cpuset)) {
                node = n;
                ++matches;
            }
        if (matches == 1) p.numa_node = int(node->os_index);
    }
    return p;
}

}  // namespace

std::vector<int> allowed_cpus() {
    std::vector<int> out;
    if (hwloc_topology_t t = Topology::get().handle()) out = to_cpus(hwloc_topology_get_allowed_cpuset(t));
    if (out.empty()) out = affinity_cpus();
    return out;
}

DevicePlacement placement_for_device(dev_t device) {
    static std::mutex mu;
    static std::map<dev_t, DevicePlacement> cache;
    std::lock_guard lock(mu);
    auto it = cache.find(device);
    if (it == cache.end()) it = cache.emplace(device, compute_placement(device)).first;
    return it->second;
}

DevicePlacement placement_for_path(const std::string &path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        DevicePlacement p;
        p.cpus = allowed_cpus();
        p.how = "file not found: all allowed CPUs";
        return p;
    }
    return placement_for_device(S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev);
}

DevicePlacement placement_for_fd(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        DevicePlacement p;
        p.cpus = allowed_cpus();
        p.how = "bad descriptor: all allowed CPUs";
        return p;
    }
    return placement_for_device(S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev);
}

namespace {
bool bind_with(hwloc_topology_t t, const std::vector<int> &cpus, const std::function<int(hwloc_const_cpuset_t)> &apply) {
    if (!t || cpus.empty()) return false;
    Bitmap set;
    for (int c : cpus)
        if (c >= 0) hwloc_bitmap_set(set.b, unsigned(c));
    return apply(set.b) == 0;
}
}  // namespace

bool bind_thread_to_cpus(std::thread &thread, const std::vector<int> &cpus) {
    hwloc_topology_t t = Topology::get().handle();
    return bind_with(t, cpus, [&](hwloc_const_cpuset_t set) {
        return hwloc_set_thread_cpubind(t, thread.native_handle(), set, 0);
    });
}

bool bind_current_thread_to_cpus(const std::vector<int> &cpus) {
    hwloc_topology_t t = Topology::get().handle();
    return bind_with(t, cpus, [&](hwloc_const_cpuset_t set) { return hwloc_set_cpubind(t, set, HWLOC_CPUBIND_THREAD); });
}

std::string cpu_list_text(const std::vector<int> &cpus) {
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(cpus[i]);
        if (j > i) out += '-' + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace moe::topology
