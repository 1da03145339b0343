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
  // KVM_CREATE_IRQCHIP (before any vCPU): in-kernel PIC, IOAPIC and local
  // APICs. APs then start UNINITIALIZED (Vcpu::set_mp_state).
  void create_irqchip() const;
  // KVM_CREATE_PIT2 (after the irqchip): the in-kernel 8254 timer on ports
  // 0x40-0x43 with its speaker port 0x61 answered as a dummy.
  void create_pit() const;
  // KVM_IRQ_LINE: drives ISA interrupt line `irq` of the in-kernel PIC and
  // I/O APIC. Returns false (errno set) when KVM refuses; callable from any
  // thread.
  bool set_irq_line(unsigned irq, bool level) const;
  // KVM_ENABLE_CAP on the VM; throws a host error naming `name`.
  void enable_cap(std::uint32_t cap, std::uint64_t arg0, const char* name) const;
  // KVM_CREATE_VCPU with vcpu id = apic_id.
  Vcpu create_vcpu(unsigned index, unsigned apic_id);
  int fd() const { return fd_.get(); }

 private:
  const KvmSystem& system_;
  UniqueFd fd_;
  GuestMemory memory_;
};

// One extra memory slot of a Vm (e.g. the vCPU run-state page), removed
// again (KVM_SET_USER_MEMORY_REGION with size 0) when this is destroyed: so
// declare it after both the Vm and whatever owns the host memory it maps,
// and the slot goes first. `read_only` sets KVM_MEM_READONLY (the caller
// checks KVM_CAP_READONLY_MEM): guest writes exit as KVM_EXIT_MMIO.
class ExtraSlot {
 public:
  ExtraSlot(const Vm& vm, unsigned slot, std::uint64_t gpa, const void* host, std::uint64_t bytes, bool read_only);
  ~ExtraSlot();
  ExtraSlot(const ExtraSlot&) = delete;
  ExtraSlot& operator=(const ExtraSlot&) = delete;

  std::uint64_t gpa() const { return gpa_; }
  std::uint64_t bytes() const { return bytes_; }
  bool read_only() const { return read_only_; }

 private:
  int vm_fd_;
  unsigned slot_;
  std::uint64_t gpa_;
  std::uint64_t bytes_;
  bool read_only_;
};

}  // namespace lockvisor::kvm
