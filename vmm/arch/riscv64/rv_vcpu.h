// One RISC-V KVM vCPU: its fd, its kvm_run page, the core registers through
// KVM_GET/SET_ONE_REG, the timer's frequency register, the external
// interrupt line (KVM_INTERRUPT) and its binary statistics. riscv64 only:
// the register ids come from RISC-V's <asm/kvm.h>.
#pragma once
#include <linux/kvm.h>

#include <cstddef>
#include <cstdint>

#include "vmm/util/mapping.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::arch::riscv64 {

class RvVcpu {
 public:
  // KVM_CREATE_VCPU `id` on `vm`, and its kvm_run mapping of `run_bytes`
  // (KVM_GET_VCPU_MMAP_SIZE). Throws lockvisor::Error.
  RvVcpu(int vm, unsigned id, std::size_t run_bytes);

  void set_pc(std::uint64_t value);
  void set_a0(std::uint64_t value);
  void set_a1(std::uint64_t value);
  std::uint64_t pc() const;
  // The rate of the guest's `time` CSR (the device tree's timebase-frequency).
  std::uint64_t timer_frequency() const;
  // Raises or lowers the supervisor external interrupt; from any thread.
  void set_external_interrupt(bool raised) const;
  // KVM_RUN once: 0, or the errno (EINTR: a signal took it out).
  int run() const;

  kvm_run& run_page() const { return *static_cast<kvm_run*>(run_.data()); }
  std::size_t run_bytes() const { return run_.size(); }
  unsigned id() const { return id_; }
  // KVM_GET_STATS_FD; invalid when the kernel has none.
  UniqueFd stats_fd() const;

 private:
  void set_core(std::uint64_t reg_index, std::uint64_t value);
  unsigned id_;
  UniqueFd fd_;
  Mapping run_;
};

}  // namespace lockvisor::arch::riscv64
