// The virtual NUMA topology the VMM gave this guest (BootInfo version 5,
// --vnuma): one node holding every vCPU when the run has none.
#pragma once
#include "runtime/boot.h"

namespace guest {

// Number of virtual nodes, 1..kMaxVnumaNodes.
inline u32 numa_nodes() { return boot().numa_nodes; }
// Node of vCPU `cpu` (< nr_cpus()), 0..numa_nodes()-1.
inline u32 numa_node_of(u32 cpu) { return boot().vcpu_node[cpu]; }
// The modelled cost of a remote lock handoff, ns (0: not modelled).
inline u32 numa_remote_ns() { return boot().numa_remote_ns; }

}  // namespace guest
