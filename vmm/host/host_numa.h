// The host's own NUMA nodes (sysfs), for `doctor` and the --vnuma docs: which
// host CPUs each node has, so that virtual nodes can be mapped onto real ones.
#pragma once
#include <vector>

namespace lockvisor::host {

struct HostNumaNode {
  int id;
  std::vector<int> cpus;  // ascending; empty for a memory-only node
};

// The online nodes of /sys/devices/system/node, by id; empty when sysfs has
// no node directory (a kernel without NUMA) or it cannot be read.
std::vector<HostNumaNode> host_numa_nodes();

}  // namespace lockvisor::host
