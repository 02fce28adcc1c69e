// Machine topology (hwloc) for thread placement and NUMA-aware buffers.
// Every query degrades to a safe answer when hwloc or sysfs cannot tell.
#pragma once

#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace moe::topology {

// Physical cores this process may run on (at least 1).
int physical_cores();
// NUMA nodes of the machine (at least 1).
int numa_nodes();
// NUMA node the block device behind `path` (a file on it, or the device node
// itself) is attached to; -1 if unknown (no NUMA, virtual or stacked device).
int numa_node_of_path(const std::string &path);
// Binds the calling thread to physical core `index` (taken modulo
// physical_cores()). Returns false if binding is not possible.
bool bind_thread_to_core(int index);
// Physical cores for `n` threads of one pool to be pinned to, one each: the
// cores this process has pinned the fewest threads to so far (ties in the
// order 1, 2, ..., 0: a lone pool leaves core 0 to its unpinned caller), so
// that the pools of contexts alive together do not crowd onto the same
// cores. Each counts as taken until release_cores(). Empty when hwloc cannot
// tell.
std::vector<int> claim_cores(int n);
void release_cores(const std::vector<int> &cores);
// Binds the calling thread to the CPUs of a NUMA node; false if not possible.
bool bind_thread_to_numa_node(int node);

// CPUs this process may use (the cgroup's cpuset and the process's CPU
// binding, as hwloc sees them when it loads), ascending; never empty (falls
// back to the calling thread's affinity).
std::vector<int> allowed_cpus();

// Where I/O threads for a storage device should run.
struct DevicePlacement {
    std::vector<int> cpus;   // OS CPU indices, ascending, non-empty, within allowed_cpus()
    int numa_node = -1;      // the device's NUMA node, -1 when unknown
    std::string device;      // block device name ("nvme0n1"), "" when none backs the file
    std::string how;         // one line for logs: what was found and how
};

// The CPUs near the block device behind a file: the CPUs of the device's NUMA
// node (sysfs numa_node), else those hwloc's I/O topology places the device
// under, else the device's sysfs local_cpulist. Files on tmpfs, overlay or
// other devices without a block device get every allowed CPU. Results are
// cached per device (the I/O topology is loaded at most once per process).
DevicePlacement placement_for_device(dev_t device);
DevicePlacement placement_for_path(const std::string &path);
DevicePlacement placement_for_fd(int fd);

// Binds a thread (not necessarily the caller) or the calling thread to a set
// of CPUs; false when binding is not possible here.
bool bind_thread_to_cpus(std::thread &thread, const std::vector<int> &cpus);
bool bind_current_thread_to_cpus(const std::vector<int> &cpus);
// "0-3,8,10-11"
std::string cpu_list_text(const std::vector<int> &cpus);

}  // namespace moe::topology
