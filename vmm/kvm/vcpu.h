// One KVM vCPU: its fd, its kvm_run page, and the register/stat plumbing the
// exit loop needs. Register access goes through KVM_CAP_SYNC_REGS: after an
// exit the GPRs are already in kvm_run, and writing them back costs no ioctl.
#pragma once
#include <linux/kvm.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/util/mapping.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::kvm {

// KVM_ENABLE_CAP on a VM or vCPU fd; throws a host error "<what>: KVM_ENABLE_CAP <name>: ...".
void enable_capability(int fd, std::uint32_t cap, std::uint64_t arg0, const char* name, const std::string& what);

class Vcpu {
 public:
  Vcpu(UniqueFd fd, int mmap_size, unsigned index);

  unsigned index() const { return index_; }
  int fd() const { return fd_.get(); }
  kvm_run* run_state() const { return static_cast<kvm_run*>(run_.data()); }
  // Size of the kvm_run mapping (KVM_GET_VCPU_MMAP_SIZE): port I/O data lies inside it.
  std::size_t run_bytes() const { return run_.size(); }

  // KVM_RUN. Returns 0, or -errno (EINTR when a signal took the vCPU out).
  int run();

  // GPRs of the last exit (valid while the vCPU is stopped in userspace).
  kvm_regs& sync_regs() const { return run_state()->s.regs.regs; }
  // Marks the GPRs dirty so the next KVM_RUN loads them.
  void commit_sync_regs() const { run_state()->kvm_dirty_regs |= KVM_SYNC_X86_REGS; }
  void request_sync_regs() const { run_state()->kvm_valid_regs = KVM_SYNC_X86_REGS; }

  kvm_regs regs() const;
  void set_regs(const kvm_regs& regs) const;
  kvm_sregs sregs() const;
  void set_sregs(const kvm_sregs& sregs) const;
  void set_cpuid(const std::vector<kvm_cpuid_entry2>& entries) const;
  // KVM_SET_MP_STATE (e.g. KVM_MP_STATE_RUNNABLE for an AP that the
  // in-kernel irqchip left UNINITIALIZED).
  void set_mp_state(std::uint32_t state) const;
  // In-kernel local APIC only: software-enables it (SVR = 0x1FF) through
  // KVM_GET_LAPIC/KVM_SET_LAPIC. Setting the state also makes KVM rebuild its
  // APIC-ID map, which KVM last built while this vCPU was being created and
  // not yet online: until rebuilt, a KICK_CPU naming this vCPU's APIC ID
  // finds nobody (measured in the nested machine: kicks to vCPU 1 were lost).
  void enable_local_apic() const;
  // KVM_ENABLE_CAP on this vCPU; throws a host error naming `name`.
  void enable_cap(std::uint32_t cap, std::uint64_t arg0, const char* name) const;
  // KVM_GET_STATS_FD; an invalid fd when the kernel has no binary stats.
  UniqueFd stats_fd() const;

 private:
  UniqueFd fd_;
  Mapping run_;
  unsigned index_;
};

}  // namespace lockvisor::kvm
