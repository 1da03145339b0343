#include "vmm/machine/machine.h"

#include "vmm/machine/machine_state.h"

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/guest_layout.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/open_files.h"
#include "vmm/kvm/vm.h"
#include "vmm/loader/elf_loader.h"
#include "vmm/machine/serial_console.h"
#include "vmm/devices/power_ports.h"
#include "vmm/devices/uart_8250.h"
#include "vmm/linuxboot/kvm_entry.h"
#include "vmm/machine/freestanding_ports.h"
#include "vmm/machine/linux_console.h"
#include "vmm/machine/linux_cpuid.h"
#include "vmm/devices/io_bus.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/vcpu_runner.h"
#include "lockvisor/abi/doorbell.h"
#include "vmm/pvlock/hypercall_table.h"
#include "vmm/machine/x86_boot.h"
#include "vmm/pvlock/kvm_halt_poll.h"
#include "vmm/pvlock/pv_backend.h"
#include "vmm/runstate/runstate_page.h"
#include "vmm/util/error.h"
#include "vmm/util/mapping.h"
#include "vmm/util/page_faults.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;
namespace {

// A short reference measurement when KVM cannot tell the TSC frequency.
std::uint64_t calibrate_tsc_khz() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t c0 = __builtin_ia32_rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::uint64_t c1 = __builtin_ia32_rdtsc();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<std::uint64_t>(static_cast<double>(c1 - c0) / seconds / 1000.0);
}

// The run-state memslot's number (slot 0 is RAM).
constexpr unsigned kRunStateSlot = 1;


const char* runstate_mode_name(RunStateMode mode) {
  switch (mode) {
    case RunStateMode::kOn: return "on";
    case RunStateMode::kOff: return "off";
    case RunStateMode::kAuto: break;
  }
  return "auto";
}

}  // namespace

std::uint64_t files_for_vcpus(unsigned vcpus) {
  // Per vCPU: its KVM fd, its runner's binary-statistics fd and, with
  // --backend kvm, the backend's own (vcpu_runner.cpp, kvm_backend.cpp).
  // Beside them the VM, its memory, devices, run-state page and output
  // files take a few (a generous bound).
  constexpr std::uint64_t kPerVcpu = 3, kBeside = 64;
  return kPerVcpu * vcpus + kBeside;
}

void validate_config(const MachineConfig& config) {
  if (config.vcpus < 1 || config.vcpus > abi::kMaxVcpus)
    fail("--vcpus {}: must be between 1 and {}", config.vcpus, abi::kMaxVcpus);
  if (config.memory_mib < 2 || config.memory_mib % 2 != 0 || config.memory_mib > (abi::kMaxMemoryBytes >> 20))
    fail("--memory {}: must be an even number of MiB between 2 and {}", config.memory_mib, abi::kMaxMemoryBytes >> 20);
  if (config.program.size() >= abi::kProgramNameBytes) fail("workload name '{}' is too long", config.program);
  if (config.args.size() >= abi::kProgramArgsBytes)
    fail("workload parameters are too long ({} bytes, at most {})", config.args.size(), abi::kProgramArgsBytes - 1);
  if (config.sbi_experimental_eid < abi::kSbiExperimentalFirst || config.sbi_experimental_eid > abi::kSbiExperimentalLast)
    fail("--sbi-eid {:#x}: must be in the experimental range 0x08000000-0x08ffffff", config.sbi_experimental_eid);
  if (config.timeout_s < 0) fail("--timeout must not be negative");
  if (config.workload && config.workload->cpus != config.vcpus)
    fail("workload parameters are for {} CPUs, the VM has {} vCPUs", config.workload->cpus, config.vcpus);
  if (config.guest_ring != 0 && config.guest_ring != 3) fail("--guest-ring {}: must be 0 or 3", config.guest_ring);
  // An IPI or NMI wake-up needs KVM's in-kernel LAPIC to deliver it and CPL0
  // to send (an ICR write) and take it (an interrupt handler).
  if (config.pv_wake != abi::PvWake::kHypercall &&
      (config.backend_kind != pvlock::BackendKind::kKvm || config.guest_ring != 0))
    fail("--pv-wake {}: needs --backend kvm --guest-ring 0 (the in-kernel LAPIC delivers it; only CPL0 code sends "
         "and takes it)", abi::pv_wake_name(config.pv_wake));
  if (config.backend_kind == pvlock::BackendKind::kKvm) {
    // KVM's pv_unhalted is sticky and its kick and halt never reach the VMM.
    if (config.backend.mode == pvlock::KickMode::kLossy)
      fail("--kick lossy: not possible with --backend kvm (KVM's pv_unhalted is sticky)");
    if (config.backend.kick_delay_us != 0)
      fail("--kick-delay-us: not possible with --backend kvm (KVM delivers KICK_CPU in the kernel)");
    if (config.backend.kick_yield || config.backend.kick_boost)
      fail("--kick-yield/--kick-boost: not possible with --backend kvm (KVM delivers KICK_CPU in the kernel and yields itself)");
  }
  if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
  if (config.vnuma) validate_vnuma(*config.vnuma, config.vcpus);
  if (config.vnuma_remote_ns > kMaxVnumaRemoteNs)
    fail("--vnuma-remote-ns {}: at most {}", config.vnuma_remote_ns, kMaxVnumaRemoteNs);
  if (config.vnuma_remote_ns != 0 && !config.vnuma)
    fail("--vnuma-remote-ns: needs --vnuma (a remote handoff needs two nodes)");
}

void refuse_what_pvm_cannot_run(const MachineConfig& config) {
  const bool pvm = kvm::detect_backend() == kvm::Backend::kPvm;
  if (pvm && config.backend_kind == pvlock::BackendKind::kKvm)
    fail("--backend kvm: not possible on this PVM host (vmcall never completes; use --backend userspace)");
  if (pvm && config.guest_ring == 0)
    fail("--guest-ring 0: refused on this PVM host (guest CPL0 code is emulated at ~1 us per instruction)");
}

void validate_host(const MachineConfig& config, const kvm::KvmSystem& kvm) {
  const kvm::VcpuLimit limit = kvm.vcpu_limit();
  if (config.vcpus > limit.vcpus)
    fail("--vcpus {}: this host's KVM allows at most {} vCPUs per VM ({})", config.vcpus, limit.vcpus, limit.source);
  refuse_what_pvm_cannot_run(config);
  if (config.ple == PleMode::kOff && (kvm.check_extension(KVM_CAP_X86_DISABLE_EXITS) & KVM_X86_DISABLE_EXITS_PAUSE) == 0)
    fail("--ple off: this KVM cannot disable pause exits (no KVM_CAP_X86_DISABLE_EXITS with PAUSE)");
  const pvlock::VmSetup setup = pvlock::vm_setup_for(config.backend_kind, config.backend);
  if (setup.in_kernel_irqchip) kvm.require_extension(KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP");
  // Kicks by 32-bit x2APIC id, without KVM's xAPIC broadcast (guest_layout.h kMaxXapicVcpus).
  if (setup.in_kernel_irqchip && config.vcpus > abi::kMaxXapicVcpus)
    kvm.require_extension(KVM_CAP_X2APIC_API, "KVM_CAP_X2APIC_API");
  if (setup.enforce_pv_feature_cpuid)
    kvm.require_extension(KVM_CAP_ENFORCE_PV_FEATURE_CPUID, "KVM_CAP_ENFORCE_PV_FEATURE_CPUID");
}

// The steps both kinds of guest share: checks, the VM and its backend's
// set-up, the run-state page; then the guest's own memory, devices and vCPUs
// (build_freestanding / build_linux); last, the serial file.
void Machine::build_common(const kvm::KvmSystem& kvm, MachineConfig config, std::chrono::steady_clock::time_point origin,
                           bool linux_guest) {
  const std::uint64_t page_faults_at_start = thread_minor_faults();
  throw_if_stop_signalled();
  validate_config(config);
  if (linux_guest) validate_linux_host(kvm);
  validate_host(config, kvm);
  host::make_room_for_files(files_for_vcpus(config.vcpus), fmt::format("--vcpus {}", config.vcpus));
  kvm.require_extension(KVM_CAP_SYNC_REGS, "KVM_CAP_SYNC_REGS");
  kvm.require_extension(KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT");
  state_ = std::make_unique<State>(kvm, std::move(config), origin);
  State& s = *state_;
  s.page_faults_at_build_start = page_faults_at_start;
  s.linux_guest = linux_guest;
  s.startup.vm = s.since_origin();
  // The backend's set-up, applied without knowing which backend it is.
  const pvlock::VmSetup setup = s.backend->vm_setup();
  if (s.config.ple == PleMode::kOff)
    s.vm.enable_cap(KVM_CAP_X86_DISABLE_EXITS, KVM_X86_DISABLE_EXITS_PAUSE, "KVM_CAP_X86_DISABLE_EXITS (PAUSE)");
  if (setup.in_kernel_irqchip) s.vm.create_irqchip();
  // --halt-poll with KVM's own halts: the VM's maximum poll window
  // (KVM_CAP_HALT_POLL); "off" leaves the module's halt_poll_ns in force.
  if (setup.guest_uses_kvm_hypercalls && s.config.backend.halt_poll.mode != pvlock::HaltPollMode::kOff)
    pvlock::apply_kvm_halt_poll(s.vm.fd(), s.config.backend.halt_poll);
  map_runstate_page(kvm);
  s.startup.runstate = s.since_origin();
  install_vcpu_interrupt_signal();
}

Machine::Machine(const kvm::KvmSystem& kvm, MachineConfig config, std::span<const std::byte> image,
                 std::chrono::steady_clock::time_point origin) {
  build_common(kvm, std::move(config), origin, false);
  build_freestanding(kvm, image);
  finish_build();
}

Machine::Machine(const kvm::KvmSystem& kvm, MachineConfig config, LinuxGuest guest,
                 std::chrono::steady_clock::time_point origin) {
  build_common(kvm, std::move(config), origin, true);
  build_linux(kvm, std::move(guest));
  finish_build();
}

void Machine::finish_build() {
  State& s = *state_;
  // --runstate on promises the page from the first guest instruction.
  if (s.config.runstate == RunStateMode::kOn) {
    if (s.settle_runstate() == nullptr)
      fail_host("--runstate on: the vCPU run-state page cannot be published: {}", s.runstate_detail);
    s.map_runstate_slot();
  }
  s.kvm_kind = kvm::backend_name(kvm::detect_backend());
  s.serial.open();  // last: a --serial file is created or truncated only once the VM is built
  s.startup.vcpus = s.since_origin();
  s.startup.build_page_faults = thread_minor_faults() - s.page_faults_at_build_start;
}

std::uint64_t Machine::tsc_khz_of(const kvm::Vcpu& vcpu) {
  const int khz = ::ioctl(vcpu.fd(), KVM_GET_TSC_KHZ, 0);
  return khz > 0 ? static_cast<std::uint64_t>(khz) : calibrate_tsc_khz();
}

Machine::~Machine() = default;

void Machine::add_service(std::unique_ptr<RunService> service) {
  State& s = *state_;
  // Services read the page from the host side from before_boot() on: they
  // get it as it will stay (waiting for a load still running).
  runstate::RunStatePage* page = s.settle_runstate();
  BootContext boot{s.config,
                   s.vm.memory(),
                   s.linux_guest ? nullptr : s.vm.memory().at<abi::BootInfo>(abi::kBootInfoAddr),
                   *s.backend,
                   s.vcpus,
                   page,
                   s.runstate_kind,
                   s.kvm_kind,
                   s.tsc_khz,
                   s.origin};
  s.boot_contexts.push_back(std::make_unique<BootContext>(boot));
  service->before_boot(*s.boot_contexts.back());
  s.services.push_back(std::move(service));
}

// --runstate (docs/runstate.md, "Handing it to the guest"): one 4 KiB
// memslot at abi::kRunStateGpa, read-only where KVM can do that, showing the
// loader's view (runstate_loader.h): zeros until the BPF-published page is
// loaded, once the vCPUs run (run() starts the load), when the mode allows it
// and nothing says at once that it cannot load; else zeros for the whole run.
void Machine::map_runstate_page(const kvm::KvmSystem& kvm) {
  State& s = *state_;
  const RunStateMode mode = s.config.runstate;
  const unsigned vcpus = s.config.vcpus;
  const bool readonly_mem = kvm.check_extension(KVM_CAP_READONLY_MEM) > 0;
  runstate::RunStateLoader::Load load;
  if (mode == RunStateMode::kOff) {
    s.runstate_detail = "--runstate off";
  } else if (!readonly_mem) {
    s.runstate_detail = "KVM lacks KVM_CAP_READONLY_MEM (the page must be a read-only memslot)";
  } else if (std::string why = runstate::RunStatePage::why_unavailable(vcpus); !why.empty()) {
    s.runstate_detail = fmt::format("vCPU run-state page unavailable: {}", why);
  } else {
    load = [vcpus] { return runstate::RunStatePage::open_shared(vcpus); };
  }
  if (!load && mode == RunStateMode::kOn)
    fail_host("--runstate on: the vCPU run-state page cannot be published: {}", s.runstate_detail);
  s.runstate_loading = static_cast<bool>(load);
  s.runstate_readonly = readonly_mem;
  s.runstate.emplace(std::move(load), vcpus);
  s.control.set_runstate(&*s.runstate, abi::kRunStateGpa, abi::kRunStateBytes);
  spdlog::debug("run-state page (--runstate {}): {}, GPA {:#x}", runstate_mode_name(mode),
                s.runstate_loading ? "loading" : s.runstate_detail, abi::kRunStateGpa);
}

// The page's memslot, showing the loader's view. A second
// KVM_SET_USER_MEMORY_REGION waits for an SRCU grace period (tens of
// microseconds here, milliseconds on a busy host), and the guest needs the
// page only when it reads it: run() adds it once the vCPU threads are
// started, and until then a guest read of the page exits and reads zeros,
// "unknown", as the view does (VcpuRunner::handle_mmio). --runstate on
// promises the page from the first guest instruction: its slot comes with
// the build. Without KVM_CAP_READONLY_MEM the zeros are mapped writable: a
// guest that writes them changes only its own view of "unknown" (the page
// is never loaded then).
void Machine::State::map_runstate_slot() {
  if (runstate_slot || !runstate) return;
  runstate_slot.emplace(vm, kRunStateSlot, abi::kRunStateGpa, runstate->view(), abi::kRunStateBytes,
                        runstate_readonly);
}

runstate::RunStatePage* Machine::State::settle_runstate() {
  runstate::RunStatePage* page = runstate ? runstate->wait() : nullptr;
  if (runstate_loading) {
    runstate_kind = page != nullptr ? "bpf" : "unknown";
    runstate_detail = page != nullptr ? page->attach_point() : runstate->failure();
    if (const auto at = runstate->published_at(); at && startup.runstate_live == 0)
      startup.runstate_live = std::chrono::duration<double>(*at - origin).count();
  }
  return page;
}
}  // namespace lockvisor::machine
