// A KVM virtual machine: its fd, its one memory slot and its vCPUs.
#pragma once
#include <memory>
#include <vector>

#include "vmm/kvm/guest_memory.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/kvm/vcpu.h"

namespace lockvisor::kvm {

class Vm {
 public:
  Vm(const KvmSystem& system, std::uint64_t memory_bytes);

  GuestMemory& memory() { return memory_; }
  const GuestMemory& memory() const { return memory_; }
  // KVM_CREATE_VCPU with vcpu id = apic_id.
  Vcpu create_vcpu(unsigned index, unsigned apic_id);
  int fd() const { return fd_.get(); }

 private:
  const KvmSystem& system_;
  UniqueFd fd_;
  GuestMemory memory_;
};

}  // namespace lockvisor::kvm
