#include "vmm/kvm/vm.h"

#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::kvm {

Vm::Vm(const KvmSystem& system, std::uint64_t memory_bytes)
    : system_(system), fd_(system.create_vm()), memory_(memory_bytes) {
  kvm_userspace_memory_region region{};
  region.slot = 0;
  region.guest_phys_addr = 0;
  region.memory_size = memory_bytes;
  region.userspace_addr = reinterpret_cast<__u64>(memory_.host_base());
  if (::ioctl(fd_.get(), KVM_SET_USER_MEMORY_REGION, &region) != 0)
    fail_host("KVM_SET_USER_MEMORY_REGION ({} MiB): {}", memory_bytes >> 20, std::strerror(errno));
}

void Vm::create_irqchip() const {
  if (::ioctl(fd_.get(), KVM_CREATE_IRQCHIP, 0) != 0) fail_host("KVM_CREATE_IRQCHIP: {}", std::strerror(errno));
}

void Vm::create_pit() const {
  kvm_pit_config config{};
  config.flags = KVM_PIT_SPEAKER_DUMMY;
  if (::ioctl(fd_.get(), KVM_CREATE_PIT2, &config) != 0) fail_host("KVM_CREATE_PIT2: {}", std::strerror(errno));
}

bool Vm::set_irq_line(unsigned irq, bool level) const {
  kvm_irq_level line{};
  line.irq = irq;
  line.level = level ? 1 : 0;
  return ::ioctl(fd_.get(), KVM_IRQ_LINE, &line) == 0;
}

void Vm::enable_cap(std::uint32_t cap, std::uint64_t arg0, const char* name) const {
  enable_capability(fd_.get(), cap, arg0, name, "VM");
}

Vcpu Vm::create_vcpu(unsigned index, unsigned apic_id) {
  UniqueFd fd(::ioctl(fd_.get(), KVM_CREATE_VCPU, apic_id));
  if (!fd.valid()) fail_host("KVM_CREATE_VCPU {}: {}", index, std::strerror(errno));
  return Vcpu(std::move(fd), system_.vcpu_mmap_size(), index);
}

ExtraSlot::ExtraSlot(const Vm& vm, unsigned slot, std::uint64_t gpa, const void* host, std::uint64_t bytes,
                     bool read_only)
    : vm_fd_(vm.fd()), slot_(slot), gpa_(gpa), bytes_(bytes), read_only_(read_only) {
  kvm_userspace_memory_region region{};
  region.slot = slot;
  region.flags = read_only ? KVM_MEM_READONLY : 0;
  region.guest_phys_addr = gpa;
  region.memory_size = bytes;
  region.userspace_addr = reinterpret_cast<__u64>(host);
  if (::ioctl(vm_fd_, KVM_SET_USER_MEMORY_REGION, &region) != 0)
    fail_host("KVM_SET_USER_MEMORY_REGION (slot {}, {} bytes at GPA {:#x}{}): {}", slot, bytes, gpa,
              read_only ? ", read-only" : "", std::strerror(errno));
}

ExtraSlot::~ExtraSlot() {
  kvm_userspace_memory_region region{};
  region.slot = slot_;
  region.guest_phys_addr = gpa_;
  region.memory_size = 0;  // deletes the slot
  ::ioctl(vm_fd_, KVM_SET_USER_MEMORY_REGION, &region);
}

}  // namespace lockvisor::kvm
