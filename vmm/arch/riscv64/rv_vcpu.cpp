#include "vmm/arch/riscv64/rv_vcpu.h"

#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::arch::riscv64 {

namespace {

constexpr std::uint64_t kCoreReg = KVM_REG_RISCV | KVM_REG_SIZE_U64 | KVM_REG_RISCV_CORE;

}  // namespace

RvVcpu::RvVcpu(int vm, unsigned id, std::size_t run_bytes) : id_(id), fd_(::ioctl(vm, KVM_CREATE_VCPU, id)) {
  if (!fd_.valid()) fail_host("KVM_CREATE_VCPU {}: {}", id, std::strerror(errno));
  void* page = ::mmap(nullptr, run_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (page == MAP_FAILED) fail_host("mmap of vCPU {}'s kvm_run: {}", id, std::strerror(errno));
  run_ = Mapping(page, run_bytes);
}

void RvVcpu::set_core(std::uint64_t reg_index, std::uint64_t value) {
  const kvm_one_reg reg{.id = kCoreReg | reg_index, .addr = reinterpret_cast<std::uint64_t>(&value)};
  if (::ioctl(fd_.get(), KVM_SET_ONE_REG, &reg) != 0)
    fail_host("KVM_SET_ONE_REG (core register {}) on vCPU {}: {}", reg_index, id_, std::strerror(errno));
}

std::uint64_t RvVcpu::pc() const {
  std::uint64_t value = 0;
  const kvm_one_reg reg{.id = kCoreReg | KVM_REG_RISCV_CORE_REG(regs.pc), .addr = reinterpret_cast<std::uint64_t>(&value)};
  if (::ioctl(fd_.get(), KVM_GET_ONE_REG, &reg) != 0)
    fail_host("KVM_GET_ONE_REG (pc) on vCPU {}: {}", id_, std::strerror(errno));
  return value;
}

void RvVcpu::set_pc(std::uint64_t value) { set_core(KVM_REG_RISCV_CORE_REG(regs.pc), value); }
void RvVcpu::set_a0(std::uint64_t value) { set_core(KVM_REG_RISCV_CORE_REG(regs.a0), value); }
void RvVcpu::set_a1(std::uint64_t value) { set_core(KVM_REG_RISCV_CORE_REG(regs.a1), value); }

std::uint64_t RvVcpu::timer_frequency() const {
  std::uint64_t value = 0;
  const kvm_one_reg reg{.id = KVM_REG_RISCV | KVM_REG_SIZE_U64 | KVM_REG_RISCV_TIMER |
                              KVM_REG_RISCV_TIMER_REG(frequency),
                        .addr = reinterpret_cast<std::uint64_t>(&value)};
  if (::ioctl(fd_.get(), KVM_GET_ONE_REG, &reg) != 0)
    fail_host("KVM_GET_ONE_REG (timer frequency) on vCPU {}: {}", id_, std::strerror(errno));
  return value;
}

void RvVcpu::set_external_interrupt(bool raised) const {
  const kvm_interrupt irq{.irq = raised ? KVM_INTERRUPT_SET : KVM_INTERRUPT_UNSET};
  if (::ioctl(fd_.get(), KVM_INTERRUPT, &irq) != 0)
    fail_host("KVM_INTERRUPT on vCPU {}: {}", id_, std::strerror(errno));
}

int RvVcpu::run() const { return ::ioctl(fd_.get(), KVM_RUN, 0) == 0 ? 0 : errno; }

UniqueFd RvVcpu::stats_fd() const { return UniqueFd(::ioctl(fd_.get(), KVM_GET_STATS_FD, 0)); }

}  // namespace lockvisor::arch::riscv64
