// The guests' steal-time records (MSR_KVM_STEAL_TIME), read by the VMM at the
// end of a run: KVM keeps them in guest memory (lockvisor/abi/guest_layout.h
// kStealTimeAddr), the VMM never sees the guest enable one. A record whose
// version is still 0 was never written by the host: the guest did not enable
// it (not advertised, --no-steal-time) or the host does not support it.
#pragma once
#include <vector>

#include "vmm/kvm/guest_memory.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::machine {

// Fills each report's steal_time_ns / steal_preempted from its vCPU's record.
void read_steal_time(const kvm::GuestMemory& memory, std::vector<VcpuReport>& vcpus);

}  // namespace lockvisor::machine
