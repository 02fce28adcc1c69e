// Machine topology (hwloc) for thread placement and NUMA-aware buffers.
// Every query degrades to a safe answer when hwloc or sysfs cannot tell.
#pragma once

#include <string>

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
// Binds the calling thread to the CPUs of a NUMA node; false if not possible.
bool bind_thread_to_numa_node(int node);

}  // namespace moe::topology
