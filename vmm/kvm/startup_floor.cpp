#include "vmm/kvm/startup_floor.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "vmm/kvm/kvm_system.h"
#include "vmm/util/error.h"
#include "vmm/util/mapping.h"
#include "vmm/util/page_faults.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::kvm {
namespace {

// Where the floor's guest code lives, and the port it writes.
constexpr std::uint64_t kCodeGpa = 0x1000;
constexpr std::uint16_t kExitPort = 0x80;

// mov al, 0x2a; out 0x80, al; hlt. Real mode, the vCPU's reset state but
// for CS:IP: no page tables, no GDT, nothing the VMM would otherwise build.
constexpr unsigned char kCode[] = {0xb0, 0x2a, 0xe6, kExitPort, 0xf4};

Mapping map_or_fail(std::size_t bytes, int prot, int flags, int fd, const char* what) {
  void* p = ::mmap(nullptr, bytes, prot, flags, fd, 0);
  if (p == MAP_FAILED) fail_host("startup floor: mmap of {}: {}", what, std::strerror(errno));
  return Mapping(p, bytes);
}

}  // namespace

FloorTimes measure_startup_floor(std::uint64_t memory_bytes, unsigned vcpus) {
  if (vcpus == 0 || memory_bytes < 2 * kCodeGpa || memory_bytes % 4096 != 0)
    fail("startup floor: {} vCPUs with {} bytes of memory", vcpus, memory_bytes);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto since = [start] { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); };
  FloorTimes t;
  const std::uint64_t page_faults_at_start = thread_minor_faults();

  const std::string path = kvm_device_path();
  UniqueFd kvm(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!kvm.valid()) fail_host("startup floor: open {}: {}", path, std::strerror(errno));
  const int run_size = ::ioctl(kvm.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  if (run_size <= 0) fail_host("startup floor: KVM_GET_VCPU_MMAP_SIZE: {}", std::strerror(errno));
  t.opened = since();

  UniqueFd vm(::ioctl(kvm.get(), KVM_CREATE_VM, 0));
  if (!vm.valid()) fail_host("startup floor: KVM_CREATE_VM: {}", std::strerror(errno));
  t.vm_created = since();

  // The same kind of memory the VMM maps (anonymous, not pre-faulted).
  Mapping memory = map_or_fail(memory_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                               "guest memory");
  std::memcpy(static_cast<std::byte*>(memory.data()) + kCodeGpa, kCode, sizeof(kCode));
  kvm_userspace_memory_region region{};
  region.slot = 0;
  region.memory_size = memory_bytes;
  region.userspace_addr = reinterpret_cast<__u64>(memory.data());
  if (::ioctl(vm.get(), KVM_SET_USER_MEMORY_REGION, &region) != 0)
    fail_host("startup floor: KVM_SET_USER_MEMORY_REGION: {}", std::strerror(errno));
  t.memory = since();

  // Every vCPU is created (its count is part of the cost); only vCPU 0 runs.
  std::vector<UniqueFd> vcpu_fds;
  std::vector<Mapping> runs;
  for (unsigned i = 0; i < vcpus; ++i) {
    UniqueFd fd(::ioctl(vm.get(), KVM_CREATE_VCPU, i));
    if (!fd.valid()) fail_host("startup floor: KVM_CREATE_VCPU {}: {}", i, std::strerror(errno));
    runs.push_back(map_or_fail(static_cast<std::size_t>(run_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(),
                               "kvm_run"));
    vcpu_fds.push_back(std::move(fd));
  }
  const int vcpu0 = vcpu_fds.front().get();
  kvm_sregs sregs{};
  if (::ioctl(vcpu0, KVM_GET_SREGS, &sregs) != 0) fail_host("startup floor: KVM_GET_SREGS: {}", std::strerror(errno));
  sregs.cs.base = 0;
  sregs.cs.selector = 0;
  if (::ioctl(vcpu0, KVM_SET_SREGS, &sregs) != 0) fail_host("startup floor: KVM_SET_SREGS: {}", std::strerror(errno));
  kvm_regs regs{};
  regs.rip = kCodeGpa;
  regs.rflags = 0x2;  // bit 1 is reserved and must be set
  if (::ioctl(vcpu0, KVM_SET_REGS, &regs) != 0) fail_host("startup floor: KVM_SET_REGS: {}", std::strerror(errno));
  t.vcpus = since();

  auto* run = static_cast<kvm_run*>(runs.front().data());
  t.page_faults = thread_minor_faults() - page_faults_at_start;
  t.first_entry = since();
  int rc = 0;
  do {
    rc = ::ioctl(vcpu0, KVM_RUN, 0);
  } while (rc != 0 && errno == EINTR);
  t.first_exit = since();
  if (rc != 0) fail_host("startup floor: KVM_RUN: {}", std::strerror(errno));
  if (run->exit_reason != KVM_EXIT_IO || run->io.port != kExitPort)
    fail_host("startup floor: the guest's first exit was reason {}, not its port write", run->exit_reason);
  return t;
}

}  // namespace lockvisor::kvm
