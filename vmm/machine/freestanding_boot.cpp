// The freestanding guest: lockvisor's own ELF image, its boot record
// (BootInfo), page tables and TSSs, and its doorbell ports.
#include <algorithm>
#include <cstring>
#include <optional>

#include <spdlog/spdlog.h>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/pv_wake.h"
#include "vmm/loader/elf_loader.h"
#include "vmm/machine/machine_state.h"
#include "vmm/machine/x86_boot.h"
#include "vmm/util/error.h"
#include "vmm/util/executable_bytes.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;

std::uint64_t minimum_memory_mib(unsigned vcpus, std::span<const std::byte> image) {
  // Every check the real load makes, before any KVM object exists (and
  // without writing a scratch copy: 16 MiB of page faults).
  return minimum_memory_mib(vcpus, vmm::check_elf_image(image, abi::kImageLimit, abi::kImageBase, abi::kImageLimit).end_gpa);
}

void validate_image(const MachineConfig& config, std::span<const std::byte> image) {
  const std::uint64_t needed = minimum_memory_mib(config.vcpus, image);
  if (config.memory_mib < needed)
    fail("--memory {} MiB is too small for this image and {} vCPUs (need at least {} MiB)", config.memory_mib,
         config.vcpus, needed);
}

std::uint64_t minimum_memory_mib(unsigned vcpus, std::uint64_t image_end) {
  // The image, one free 2 MiB page for guest data, and the stacks.
  const std::uint64_t bytes = align_up(image_end, kTwoMiB) + kTwoMiB + vcpus * abi::kVcpuStackBlockBytes;
  return align_up(bytes, kTwoMiB) >> 20;
}

// More vCPUs than xAPIC ids address one at a time (guest_layout.h
// kMaxXapicVcpus): the guest learns its id from CPUID leaf 0xB and, with
// KVM's in-kernel LAPIC, switches it to x2APIC mode, where KVM matches a
// kick's 32-bit destination exactly once the broadcast quirk is off. Before
// any vCPU exists: KVM builds its APIC-ID map as vCPUs come.
void Machine::State::enable_x2apic_ids(const std::vector<kvm_cpuid_entry2>& supported, abi::BootInfo& boot) {
  const auto has_leaf = [&](std::uint32_t function) {
    return std::any_of(supported.begin(), supported.end(), [&](const auto& e) { return e.function == function; });
  };
  if (!has_leaf(0xB))
    fail("--vcpus {}: this host's KVM has no CPUID leaf 0xB, where a guest of more than {} vCPUs finds its APIC id",
         config.vcpus, abi::kMaxXapicVcpus);
  if (!backend->vm_setup().in_kernel_irqchip) return;  // no LAPIC: the VMM maps every kick itself
  const bool x2apic = std::any_of(supported.begin(), supported.end(), [](const auto& e) {
    return e.function == 1 && (e.ecx & abi::kCpuid1EcxX2apic) != 0;
  });
  if (!x2apic)
    fail("--vcpus {}: this host's KVM offers no x2APIC, which more than {} vCPUs need with --backend kvm",
         config.vcpus, abi::kMaxXapicVcpus);
  vm.enable_cap(KVM_CAP_X2APIC_API, KVM_X2APIC_API_USE_32BIT_IDS | KVM_X2APIC_API_DISABLE_BROADCAST_QUIRK,
                  "KVM_CAP_X2APIC_API");
  boot.flags |= abi::kBootFlagX2apic;
}

void Machine::State::add_freestanding_ports() {
  auto& hypercall = add_device<HypercallPorts>(*hypercalls);
  bus.add_ports(abi::kPortKvmHypercall, 1, hypercall, ExitKind::kHypercall);
  bus.add_ports(abi::kPortSbiCall, 1, hypercall, ExitKind::kSbi);
  report_channel = &add_device<ReportChannelPort>(control, vm.memory(), config.vcpus);
  bus.add_ports(abi::kPortUcall, 1, *report_channel, ExitKind::kUcall);
  bus.add_ports(abi::kPortFault, 1, add_device<FaultPort>(), ExitKind::kFault);
  bus.add_ports(abi::kPortNop, 1, add_device<NopPort>(), ExitKind::kNop);
  bus.add_ports(abi::kPortCom1, 8, add_device<Com1Transmitter>(control), ExitKind::kSerial);
}

void Machine::build_freestanding(const kvm::KvmSystem& kvm, std::span<const std::byte> image) {
  State& s = *state_;
  const MachineConfig& cfg = s.config;
  const pvlock::VmSetup setup = s.backend->vm_setup();
  const std::uint64_t bytes = cfg.memory_mib << 20;
  auto& memory = s.vm.memory();

  const std::uint64_t stacks = stacks_bottom(bytes, cfg.vcpus);
  if (stacks <= abi::kImageBase) fail("--memory {} MiB is too small for {} vCPU stacks", cfg.memory_mib, cfg.vcpus);
  // The built-in image's pages are mapped from the executable instead of
  // copied (executable_bytes.h): the guest faults in only the pages it
  // touches, after its first instruction, rather than the VMM all of them
  // before it (2-3 us a page on a PVM host). An --image file is copied: it
  // may change while the guest runs.
  const std::optional<ExecutableRange> backing = executable_range(image);
  const vmm::MapImagePages map_pages = [&](std::uint64_t gpa, std::uint64_t length, std::uint64_t offset) {
    return memory.map_file(gpa, length, backing->file.get(), backing->offset + offset);
  };
  const auto loaded = vmm::load_elf_image(image, memory.all(), abi::kImageBase, std::min(abi::kImageLimit, stacks),
                                          vmm::Bss::kAlreadyZero,  // fresh anonymous memory
                                          backing ? map_pages : vmm::MapImagePages{});
  const std::uint64_t free_start = align_up(loaded.end_gpa, kTwoMiB);
  if (free_start + kTwoMiB > stacks)
    fail("--memory {} MiB is too small for this image and {} vCPUs (need at least {} MiB)", cfg.memory_mib, cfg.vcpus,
         minimum_memory_mib(cfg.vcpus, loaded.end_gpa));
  write_boot_tables(memory, cfg.vcpus);
  s.startup.image = s.since_origin();
  s.add_freestanding_ports();
  auto* boot = memory.at<abi::BootInfo>(abi::kBootInfoAddr);
  boot->magic = abi::kBootInfoMagic;
  boot->version = abi::kBootInfoVersion;
  boot->size = sizeof(abi::BootInfo);
  boot->vcpu_count = cfg.vcpus;
  boot->flags = (cfg.pv_unhalt ? abi::kBootFlagPvUnhalt : 0) | (cfg.sbi_pvlock ? abi::kBootFlagSbiPvlock : 0) |
                (cfg.dedicated_hint ? abi::kBootFlagDedicated : 0) |
                (setup.guest_uses_kvm_hypercalls ? abi::kBootFlagKvmHypercalls : 0) |
                (cfg.guest_ring == 0 ? abi::kBootFlagGuestRing0 : 0) | abi::pv_wake_boot_flags(cfg.pv_wake);
  boot->memory_bytes = bytes;
  boot->free_start = free_start;
  boot->free_end = stacks;
  boot->seed = cfg.seed;
  boot->sbi_experimental_eid = cfg.sbi_experimental_eid;
  boot->runstate_gpa = abi::kRunStateGpa;
  // Live as soon as its load has started: the page reads "unknown" until the
  // load is done, and for good if it fails after all (runstate_loader.h).
  boot->runstate_vcpus = s.runstate_loading ? std::min<unsigned>(cfg.vcpus, abi::kRunStateMaxVcpus) : 0;
  if (s.runstate_loading) boot->flags |= abi::kBootFlagRunStateLive;
  std::memcpy(boot->program, cfg.program.c_str(), cfg.program.size() + 1);
  std::memcpy(boot->args, cfg.args.c_str(), cfg.args.size() + 1);
  // Without --vnuma: one node holding every vCPU, so the guest's accessors
  // need no special case.
  boot->numa_nodes = cfg.vnuma ? cfg.vnuma->nodes() : 1;
  boot->numa_remote_ns = cfg.vnuma_remote_ns;
  for (unsigned i = 0; i < cfg.vcpus; ++i)
    boot->vcpu_node[i] = cfg.vnuma ? static_cast<std::uint8_t>(cfg.vnuma->vcpu_node[i]) : 0;
  boot->lock_probe_gpa = abi::kLockProbeAddr;
  if (cfg.lock_probe) {
    boot->lock_probe = *cfg.lock_probe;
    boot->flags |= abi::kBootFlagLockProbe;
  }
  if (cfg.workload) {
    boot->workload = *cfg.workload;
    abi::stamp_header(boot->workload);
    boot->workload.lock[abi::kLockNameBytes - 1] = '\0';
    boot->flags |= abi::kBootFlagWorkload;
  }
  const auto supported = kvm.supported_cpuid();
  if (cfg.vcpus > abi::kMaxXapicVcpus) s.enable_x2apic_ids(supported, *boot);
  const CpuidOptions cpuid_options{cfg.pv_unhalt, cfg.dedicated_hint, cfg.steal_time};
  for (unsigned i = 0; i < cfg.vcpus; ++i) {
    const unsigned apic_id = i;  // APIC ID == index, but every lookup goes through the map
    kvm::Vcpu vcpu = s.vm.create_vcpu(i, apic_id);
    vcpu.set_cpuid(guest_cpuid(supported, apic_id, cpuid_options));
    if (setup.enforce_pv_feature_cpuid)
      vcpu.enable_cap(KVM_CAP_ENFORCE_PV_FEATURE_CPUID, 1, "KVM_CAP_ENFORCE_PV_FEATURE_CPUID");
    vcpu.set_sregs(boot_sregs(vcpu.sregs(), i));
    vcpu.set_regs(boot_regs(loaded.entry, bytes, i));
    // With the in-kernel irqchip every AP starts UNINITIALIZED, waiting for
    // INIT/SIPI; lockvisor starts them all at the 64-bit entry instead.
    if (setup.in_kernel_irqchip) {
      vcpu.set_mp_state(KVM_MP_STATE_RUNNABLE);
      vcpu.enable_local_apic();  // and KVM's APIC-ID map now includes this vCPU (kvm/vcpu.h)
    }
    s.backend->attach_vcpu(i, vcpu.stats_fd());
    if (i == 0) s.tsc_khz = tsc_khz_of(vcpu);
    boot->vcpus[i] = {apic_id, 0, kernel_stack_top(bytes, i), user_stack_top(bytes, i)};
    s.control.map_apic(apic_id, i);
    s.vcpus.push_back(std::make_unique<VcpuRunner>(std::move(vcpu), apic_id, s.bus, s.control));
    if (cfg.steal_time)
      s.vcpus.back()->set_park_flag(
          &s.vm.memory().at<abi::KvmStealTime>(abi::kStealTimeAddr + i * abi::kStealTimeStride)->preempted);
  }
  boot->tsc_khz = s.tsc_khz;
  spdlog::debug("VM ready: {} vCPUs, {} MiB, image entry {:#x}, image end {:#x}, TSC {} kHz", cfg.vcpus,
                cfg.memory_mib, loaded.entry, loaded.end_gpa, s.tsc_khz);
}

}  // namespace lockvisor::machine
