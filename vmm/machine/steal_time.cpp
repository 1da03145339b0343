#include "vmm/machine/steal_time.h"

#include <atomic>

#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/kvm_hypercall.h"

namespace lockvisor::machine {

void read_steal_time(const kvm::GuestMemory& memory, std::vector<VcpuReport>& vcpus) {
  for (auto& v : vcpus) {
    if (v.index >= abi::kMaxVcpus) continue;
    const std::uint64_t gpa = abi::kStealTimeAddr + abi::kStealTimeStride * v.index;
    // The vCPUs have stopped, but the host may still be finishing an update
    // (odd version): KVM's seqcount protocol, a few tries.
    for (int attempt = 0; attempt < 100; ++attempt) {
      const auto before = memory.read<abi::KvmStealTime>(gpa);
      if (!before) break;
      std::atomic_thread_fence(std::memory_order_acquire);
      const auto after = memory.read<abi::KvmStealTime>(gpa);
      if (!after || before->version != after->version || (before->version & 1) != 0) continue;
      if (before->version != 0) {
        v.steal_time_ns = before->steal;
        v.steal_preempted = (before->preempted & abi::kStealPreempted) != 0;
      }
      break;
    }
  }
}

}  // namespace lockvisor::machine
