#include "runtime/cpuid_snapshot.h"

#include "lockvisor/abi/guest_layout.h"
#include "runtime/cpu.h"

namespace guest {
namespace {
Cpl0Cpuid g_snapshots[kMaxVcpus];
}  // namespace

const Cpl0Cpuid& cpl0_cpuid() { return g_snapshots[this_cpu()]; }

void set_cpl0_cpuid(u32 cpu, const Cpl0Cpuid& snapshot) { g_snapshots[cpu] = snapshot; }

}  // namespace guest
