// `vnuma`: every vCPU reports the virtual NUMA topology as it reads it
// through runtime/numa.h, for the machine test that compares it with the
// --vnuma the VMM was given. Results per vCPU:
//   node       numa_node_of(this vCPU)
//   nodes      numa_nodes()
//   remote_ns  numa_remote_ns()
//   peers      the nodes of every vCPU in index order, packed 4 bits each
//              (vCPUs 0..15; the low nibble is vCPU 0): one vCPU's view of
//              the others, so that a test sees the whole map agree.
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/cpu.h"
#include "runtime/numa.h"
#include "runtime/ucall_report.h"

namespace guest {

void program_vnuma() {
  const u32 cpu = this_cpu();
  report_result("node", numa_node_of(cpu));
  report_result("nodes", numa_nodes());
  report_result("remote_ns", numa_remote_ns());
  u64 peers = 0;
  for (u32 i = 0; i < nr_cpus() && i < 16; ++i) peers |= u64{numa_node_of(i) & 0xF} << (4 * i);
  report_result("peers", peers);
}

}  // namespace guest
