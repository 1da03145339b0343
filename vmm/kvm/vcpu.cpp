#include "vmm/kvm/vcpu.h"

#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "vmm/kvm/uapi_layout.h"
#include "vmm/util/error.h"

namespace lockvisor::kvm {

Vcpu::Vcpu(UniqueFd fd, int mmap_size, unsigned index) : fd_(std::move(fd)), index_(index) {
  void* addr = ::mmap(nullptr, static_cast<std::size_t>(mmap_size), PROT_READ | PROT_WRITE, MAP_SHARED,
                      fd_.get(), 0);
  if (addr == MAP_FAILED) fail_host("vCPU {}: cannot map kvm_run: {}", index, std::strerror(errno));
  run_ = Mapping(addr, static_cast<std::size_t>(mmap_size));
}

int Vcpu::run() {
  return ::ioctl(fd_.get(), KVM_RUN, 0) == 0 ? 0 : -errno;
}

kvm_regs Vcpu::regs() const {
  kvm_regs regs{};
  if (::ioctl(fd_.get(), KVM_GET_REGS, &regs) != 0) fail_host("vCPU {}: KVM_GET_REGS: {}", index_, std::strerror(errno));
  return regs;
}

void Vcpu::set_regs(const kvm_regs& regs) const {
  if (::ioctl(fd_.get(), KVM_SET_REGS, &regs) != 0) fail_host("vCPU {}: KVM_SET_REGS: {}", index_, std::strerror(errno));
}

kvm_sregs Vcpu::sregs() const {
  kvm_sregs sregs{};
  if (::ioctl(fd_.get(), KVM_GET_SREGS, &sregs) != 0)
    fail_host("vCPU {}: KVM_GET_SREGS: {}", index_, std::strerror(errno));
  return sregs;
}

void Vcpu::set_sregs(const kvm_sregs& sregs) const {
  if (::ioctl(fd_.get(), KVM_SET_SREGS, &sregs) != 0)
    fail_host("vCPU {}: KVM_SET_SREGS: {}", index_, std::strerror(errno));
}

void Vcpu::set_cpuid(const std::vector<kvm_cpuid_entry2>& entries) const {
  std::vector<std::byte> buffer(sizeof(uapi::Cpuid2Header) + entries.size() * sizeof(kvm_cpuid_entry2));
  const uapi::Cpuid2Header header{static_cast<std::uint32_t>(entries.size()), 0};
  std::memcpy(buffer.data(), &header, sizeof header);
  std::memcpy(buffer.data() + sizeof header, entries.data(), entries.size() * sizeof(kvm_cpuid_entry2));
  if (::ioctl(fd_.get(), uapi::kSetCpuid2, buffer.data()) != 0)
    fail_host("vCPU {}: KVM_SET_CPUID2: {}", index_, std::strerror(errno));
}

void Vcpu::set_mp_state(std::uint32_t state) const {
  kvm_mp_state mp{};
  mp.mp_state = state;
  if (::ioctl(fd_.get(), KVM_SET_MP_STATE, &mp) != 0)
    fail_host("vCPU {}: KVM_SET_MP_STATE {}: {}", index_, state, std::strerror(errno));
}

void Vcpu::enable_local_apic() const {
  kvm_lapic_state lapic{};
  if (::ioctl(fd_.get(), KVM_GET_LAPIC, &lapic) != 0) fail_host("vCPU {}: KVM_GET_LAPIC: {}", index_, std::strerror(errno));
  constexpr std::size_t kSvr = 0xF0;
  const std::uint32_t svr = 0x1FF;  // APIC software enable, spurious vector 0xFF
  std::memcpy(lapic.regs + kSvr, &svr, sizeof svr);
  if (::ioctl(fd_.get(), KVM_SET_LAPIC, &lapic) != 0) fail_host("vCPU {}: KVM_SET_LAPIC: {}", index_, std::strerror(errno));
}

void enable_capability(int fd, std::uint32_t cap, std::uint64_t arg0, const char* name, const std::string& what) {
  kvm_enable_cap request{};
  request.cap = cap;
  request.args[0] = arg0;
  if (::ioctl(fd, KVM_ENABLE_CAP, &request) != 0) fail_host("{}: KVM_ENABLE_CAP {}: {}", what, name, std::strerror(errno));
}

void Vcpu::enable_cap(std::uint32_t cap, std::uint64_t arg0, const char* name) const {
  enable_capability(fd_.get(), cap, arg0, name, fmt::format("vCPU {}", index_));
}

UniqueFd Vcpu::stats_fd() const {
#ifdef KVM_GET_STATS_FD
  return UniqueFd(::ioctl(fd_.get(), KVM_GET_STATS_FD, 0));
#else
  return UniqueFd();
#endif
}

}  // namespace lockvisor::kvm
