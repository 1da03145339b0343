#include "vmm/machine/machine.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
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
#include "vmm/kvm/vm.h"
#include "vmm/loader/elf_loader.h"
#include "vmm/machine/serial_console.h"
#include "vmm/machine/steal_time.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/machine/x86_boot.h"
#include "vmm/pvlock/kvm_halt_poll.h"
#include "vmm/pvlock/pv_backend.h"
#include "vmm/runstate/runstate_page.h"
#include "vmm/trace/lock_log.h"
#include "vmm/trace/runstate_sampler.h"
#include "vmm/trace/trace.h"
#include "vmm/util/error.h"
#include "vmm/util/mapping.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;
namespace {

constexpr std::uint64_t kTwoMiB = 2u << 20;
std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

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

// A private, read-only page of zeros: the run-state page when the host does
// not publish one (every vCPU reads "unknown").
Mapping zero_page() {
  void* p = ::mmap(nullptr, abi::kRunStateBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail_host("mmap of the run-state zero page: {}", std::strerror(errno));
  return Mapping(p, abi::kRunStateBytes);
}

const char* runstate_mode_name(RunStateMode mode) {
  switch (mode) {
    case RunStateMode::kOn: return "on";
    case RunStateMode::kOff: return "off";
    case RunStateMode::kAuto: break;
  }
  return "auto";
}

}  // namespace

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
}

void validate_host(const MachineConfig& config, const kvm::KvmSystem& kvm) {
  const bool pvm = kvm::detect_backend() == kvm::Backend::kPvm;
  if (pvm && config.backend_kind == pvlock::BackendKind::kKvm)
    fail("--backend kvm: not possible on this PVM host (vmcall never completes; use --backend userspace)");
  if (pvm && config.guest_ring == 0)
    fail("--guest-ring 0: refused on this PVM host (guest CPL0 code is emulated at ~1 us per instruction)");
  if (config.ple == PleMode::kOff && (kvm.check_extension(KVM_CAP_X86_DISABLE_EXITS) & KVM_X86_DISABLE_EXITS_PAUSE) == 0)
    fail("--ple off: this KVM cannot disable pause exits (no KVM_CAP_X86_DISABLE_EXITS with PAUSE)");
  const pvlock::VmSetup setup = pvlock::vm_setup_for(config.backend_kind, config.backend);
  if (setup.in_kernel_irqchip) kvm.require_extension(KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP");
  if (setup.enforce_pv_feature_cpuid)
    kvm.require_extension(KVM_CAP_ENFORCE_PV_FEATURE_CPUID, "KVM_CAP_ENFORCE_PV_FEATURE_CPUID");
}

void validate_image(const MachineConfig& config, std::span<const std::byte> image) {
  // Every check the real load makes, before any KVM object exists (and
  // without writing a scratch copy: 16 MiB of page faults).
  const auto loaded = vmm::check_elf_image(image, abi::kImageLimit, abi::kImageBase, abi::kImageLimit);
  const std::uint64_t needed = minimum_memory_mib(config.vcpus, loaded.end_gpa);
  if (config.memory_mib < needed)
    fail("--memory {} MiB is too small for this image and {} vCPUs (need at least {} MiB)", config.memory_mib,
         config.vcpus, needed);
}

std::uint64_t minimum_memory_mib(unsigned vcpus, std::uint64_t image_end) {
  // The image, one free 2 MiB page for guest data, and the stacks.
  const std::uint64_t bytes = align_up(image_end, kTwoMiB) + kTwoMiB + vcpus * abi::kVcpuStackBlockBytes;
  return align_up(bytes, kTwoMiB) >> 20;
}

struct Machine::State {
  State(const kvm::KvmSystem& kvm, MachineConfig cfg, std::chrono::steady_clock::time_point origin_time)
      : config(std::move(cfg)),
        origin(origin_time),
        backend(pvlock::make_backend(config.backend_kind, config.vcpus, config.backend)),
        serial(config.capture_serial ? SerialConsole(SerialConsole::Capture{}, config.vcpus)
                                     : SerialConsole(config.serial_path, config.vcpus)),
        control(config, *backend, serial, origin),
        vm(kvm, config.memory_mib << 20) {}

  MachineConfig config;
  std::chrono::steady_clock::time_point origin;
  std::unique_ptr<pvlock::PvBackend> backend;  // through the interface only
  SerialConsole serial;
  RunControl control;
  // The run-state page's host memory (one of the two, or neither before the
  // constructor maps it) outlives the VM and its slot: members are destroyed
  // in reverse order, so vCPUs, then the slot (deleted), then the VM, then these.
  std::optional<runstate::RunStatePage> runstate_page;
  Mapping runstate_zero;  // unmapped (empty) when the live page is used
  kvm::Vm vm;
  std::optional<kvm::ExtraSlot> runstate_slot;
  std::string runstate_kind = "unknown";  // "bpf" when the page is live
  std::string runstate_detail;
  std::vector<std::unique_ptr<VcpuRunner>> vcpus;
  std::vector<std::unique_ptr<RunService>> services;
  std::uint64_t tsc_khz = 0;
  std::string kvm_kind;
  // --trace (attach_trace): the trace, its guest log, the clock at the start.
  trace::Trace* trace = nullptr;
  trace::LockLogPlacement lock_log;
  trace::ClockPair trace_clock_start;
  std::optional<trace::TscOffset> trace_offset_start;
  std::vector<std::optional<std::int64_t>> trace_offsets_attr;  // each vCPU's, before the run
  RunResult::StartupMarks startup;

  double since_origin() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count(); }
  std::vector<std::string> vcpu_state_lines() const;
  bool deadlocked() const;
};

Machine::Machine(const kvm::KvmSystem& kvm, MachineConfig config, std::span<const std::byte> image,
                 std::chrono::steady_clock::time_point origin) {
  throw_if_stop_signalled();
  validate_config(config);
  validate_host(config, kvm);
  kvm.require_extension(KVM_CAP_SYNC_REGS, "KVM_CAP_SYNC_REGS");
  kvm.require_extension(KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT");
  state_ = std::make_unique<State>(kvm, std::move(config), origin);
  State& s = *state_;
  const MachineConfig& cfg = s.config;
  s.startup.vm = s.since_origin();
  // The backend's set-up, applied without knowing which backend it is.
  const pvlock::VmSetup setup = s.backend->vm_setup();
  if (cfg.ple == PleMode::kOff)
    s.vm.enable_cap(KVM_CAP_X86_DISABLE_EXITS, KVM_X86_DISABLE_EXITS_PAUSE, "KVM_CAP_X86_DISABLE_EXITS (PAUSE)");
  if (setup.in_kernel_irqchip) s.vm.create_irqchip();
  // --halt-poll with KVM's own halts: the VM's maximum poll window
  // (KVM_CAP_HALT_POLL); "off" leaves the module's halt_poll_ns in force.
  if (setup.guest_uses_kvm_hypercalls && cfg.backend.halt_poll.mode != pvlock::HaltPollMode::kOff)
    pvlock::apply_kvm_halt_poll(s.vm.fd(), cfg.backend.halt_poll);
  const std::uint64_t bytes = cfg.memory_mib << 20;
  auto& memory = s.vm.memory();

  const std::uint64_t stacks = stacks_bottom(bytes, cfg.vcpus);
  if (stacks <= abi::kImageBase) fail("--memory {} MiB is too small for {} vCPU stacks", cfg.memory_mib, cfg.vcpus);
  const auto loaded = vmm::load_elf_image(image, memory.all(), abi::kImageBase, std::min(abi::kImageLimit, stacks),
                                          vmm::Bss::kAlreadyZero);  // fresh anonymous memory
  const std::uint64_t free_start = align_up(loaded.end_gpa, kTwoMiB);
  if (free_start + kTwoMiB > stacks)
    fail("--memory {} MiB is too small for this image and {} vCPUs (need at least {} MiB)", cfg.memory_mib, cfg.vcpus,
         minimum_memory_mib(cfg.vcpus, loaded.end_gpa));

  write_boot_tables(memory, cfg.vcpus);
  s.startup.image = s.since_origin();
  map_runstate_page(kvm);
  s.startup.runstate = s.since_origin();

  auto* boot = memory.at<abi::BootInfo>(abi::kBootInfoAddr);
  boot->magic = abi::kBootInfoMagic;
  boot->version = abi::kBootInfoVersion;
  boot->size = sizeof(abi::BootInfo);
  boot->vcpu_count = cfg.vcpus;
  boot->flags = (cfg.pv_unhalt ? abi::kBootFlagPvUnhalt : 0) | (cfg.sbi_pvlock ? abi::kBootFlagSbiPvlock : 0) |
                (cfg.dedicated_hint ? abi::kBootFlagDedicated : 0) |
                (setup.guest_uses_kvm_hypercalls ? abi::kBootFlagKvmHypercalls : 0) |
                (cfg.guest_ring == 0 ? abi::kBootFlagGuestRing0 : 0);
  boot->memory_bytes = bytes;
  boot->free_start = free_start;
  boot->free_end = stacks;
  boot->seed = cfg.seed;
  boot->sbi_experimental_eid = cfg.sbi_experimental_eid;
  boot->runstate_gpa = abi::kRunStateGpa;
  boot->runstate_vcpus = s.runstate_page ? std::min<unsigned>(cfg.vcpus, abi::kRunStateMaxVcpus) : 0;
  if (s.runstate_page) boot->flags |= abi::kBootFlagRunStateLive;
  std::memcpy(boot->program, cfg.program.c_str(), cfg.program.size() + 1);
  std::memcpy(boot->args, cfg.args.c_str(), cfg.args.size() + 1);
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
  const CpuidOptions cpuid_options{cfg.pv_unhalt, cfg.dedicated_hint, cfg.steal_time};
  install_vcpu_interrupt_signal();
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
    if (i == 0) {
      const int khz = ::ioctl(vcpu.fd(), KVM_GET_TSC_KHZ, 0);
      s.tsc_khz = khz > 0 ? static_cast<std::uint64_t>(khz) : calibrate_tsc_khz();
    }
    boot->vcpus[i] = {apic_id, 0, kernel_stack_top(bytes, i), user_stack_top(bytes, i)};
    s.control.map_apic(apic_id, i);
    s.vcpus.push_back(std::make_unique<VcpuRunner>(std::move(vcpu), apic_id, memory, s.control));
  }
  boot->tsc_khz = s.tsc_khz;
  s.kvm_kind = kvm::backend_name(kvm::detect_backend());
  spdlog::debug("VM ready: {} vCPUs, {} MiB, image entry {:#x}, image end {:#x}, TSC {} kHz, KVM {}", cfg.vcpus,
                cfg.memory_mib, loaded.entry, loaded.end_gpa, s.tsc_khz, s.kvm_kind);
  s.serial.open();  // last: a --serial file is created or truncated only once the VM is built
  s.startup.vcpus = s.since_origin();
}

Machine::~Machine() = default;

void Machine::add_service(std::unique_ptr<RunService> service) { state_->services.push_back(std::move(service)); }

void Machine::attach_trace(trace::Trace& trace) {
  State& s = *state_;
  const MachineConfig& cfg = s.config;
  s.trace = &trace;
  trace.begin(cfg.vcpus,
              static_cast<std::uint64_t>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(s.origin.time_since_epoch()).count()),
              kExitKindNames);
  auto& meta = trace.metadata();
  meta["clock"] = "CLOCK_MONOTONIC; ts = microseconds since the run's origin (before the VM was built)";
  meta["vcpus"] = cfg.vcpus;
  meta["program"] = cfg.program;
  meta["args"] = cfg.args;
  meta["backend"] = std::string(s.backend->name());
  meta["kvm"] = s.kvm_kind;
  meta["tsc_khz"] = s.tsc_khz;
  meta["runstate"] = s.runstate_kind;
  // Which host CPUs each vCPU thread may run on (the affinity set below in
  // run()): who competes with whom for a CPU is half of every picture.
  nlohmann::json cpus = nlohmann::json::array();
  for (unsigned i = 0; i < cfg.vcpus; ++i) {
    if (cfg.pcpus.empty()) {
      cpus.push_back(nullptr);  // unpinned: any allowed CPU
    } else if (cfg.pin == PinPolicy::kSpread) {
      cpus.push_back(nlohmann::json::array({cfg.pcpus[i % cfg.pcpus.size()]}));
    } else {
      cpus.push_back(cfg.pcpus);
    }
  }
  meta["vcpu_host_cpus"] = std::move(cpus);
  // Lock workloads record their acquisitions in guest memory (lock_trace.h),
  // carved from the top of the guest's free memory.
  auto& memory = s.vm.memory();
  auto* boot = memory.at<abi::BootInfo>(abi::kBootInfoAddr);
  if (cfg.workload) {
    s.lock_log = trace::place_lock_log(boot->free_start, boot->free_end, cfg.vcpus, trace.lock_records_per_vcpu());
    if (s.lock_log.stride != 0) {
      trace::init_lock_log(memory.all(), s.lock_log, cfg.vcpus);
      boot->lock_trace_gpa = s.lock_log.gpa;
      boot->lock_trace_stride = s.lock_log.stride;
      boot->free_end = s.lock_log.gpa;
      boot->flags |= abi::kBootFlagLockTrace;
    }
    meta["locks"]["records_per_vcpu"] = s.lock_log.capacity;
  } else {
    meta["locks"]["source"] = "none: not a lock workload";
  }
  // The host lanes, one writer each: with a live run-state page and its
  // preemption history, the sampler below drains the history (every
  // preemption exact); with the page alone each vCPU thread reads its own
  // record after every KVM_RUN; without a page the sampler reads schedstat.
  const bool history = s.runstate_page && s.runstate_page->history(0) != nullptr;
  for (auto& v : s.vcpus) {
    const unsigned i = v->index();
    const bool reads_page = s.runstate_page && i < abi::kRunStateMaxVcpus && !history;
    v->set_trace(&trace.vcpu_lane(i), reads_page ? &trace.host_lane(i) : nullptr,
                 reads_page ? &trace.preemptions(i) : nullptr);
  }
  meta["kicks"] = s.backend->observe_kicks(&trace)
                      ? "flows from the kicker's KICK_CPU to the halt it ended (userspace backend)"
                      : "not visible: this backend's kicks never reach the VMM (KVM delivers KICK_CPU in the kernel)";
  s.trace_offset_start = trace::measure_tsc_offset(s.vcpus.front()->vcpu_fd());
  for (const auto& v : s.vcpus) s.trace_offsets_attr.push_back(trace::read_tsc_offset_attr(v->vcpu_fd()));
  s.trace_clock_start = trace::sample_clock_pair();
  add_service(std::make_unique<trace::RunStateSampler>(trace));
}

// After the run: the guest TSC's relation to the trace clock, measured again
// (its change over the run is the error the metadata reports), and the
// guest's lock log turned into slices.
void Machine::finish_trace() {
  State& s = *state_;
  trace::Trace& trace = *s.trace;
  auto& meta = trace.metadata();
  const trace::ClockPair end = trace::sample_clock_pair();
  const auto offset_end = trace::measure_tsc_offset(s.vcpus.front()->vcpu_fd());
  // Each vCPU's offset: KVM's own value after the run when it tells it
  // (exact; each vCPU has its own, and KVM may adjust it while the vCPU runs,
  // e.g. when its thread moves to a CPU whose TSC differs), else vCPU 0's
  // IA32_TSC read. The reads are recorded as an independent check.
  std::vector<std::optional<std::int64_t>> attr_end;
  for (const auto& v : s.vcpus) attr_end.push_back(trace::read_tsc_offset_attr(v->vcpu_fd()));
  bool attr = true;
  std::int64_t moved = 0;  // the largest change of a vCPU's offset over the run, cycles
  for (std::size_t i = 0; i < attr_end.size(); ++i) {
    attr = attr && attr_end[i] && s.trace_offsets_attr[i];
    if (attr) moved = std::max<std::int64_t>(moved, std::abs(*attr_end[i] - *s.trace_offsets_attr[i]));
  }
  const std::int64_t read_offset = s.trace_offset_start ? s.trace_offset_start->offset : 0;
  std::vector<trace::GuestClock> clocks;
  for (std::size_t i = 0; i < s.vcpus.size(); ++i)
    clocks.emplace_back(s.trace_clock_start, end, attr ? *attr_end[i] : read_offset, s.tsc_khz);
  const double ns_per_cycle = clocks.front().ns_per_cycle();
  auto& tsc = meta["guest_tsc"];
  tsc["relation"] = "guest TSC = host TSC + offset (no TSC scaling)";
  tsc["ns_per_cycle"] = ns_per_cycle;
  tsc["offset_cycles"] = attr ? *attr_end.front() : read_offset;  // vCPU 0's
  const double pair_ns = static_cast<double>(std::max(s.trace_clock_start.bracket_cycles, end.bracket_cycles)) / 2 *
                         ns_per_cycle;
  tsc["host_clock_pair_uncertainty_ns"] = pair_ns;
  if (s.trace_offset_start && offset_end) {
    auto& read = tsc["ia32_tsc_read"];
    read["offset_cycles"] = s.trace_offset_start->offset;
    read["offset_cycles_after"] = offset_end->offset;
    read["uncertainty_ns"] =
        static_cast<double>(std::max(s.trace_offset_start->bracket_cycles, offset_end->bracket_cycles)) / 2 *
        ns_per_cycle;
    if (attr)
      read["differs_from_offset_ns"] =
          std::abs(static_cast<double>(offset_end->offset - *attr_end.front())) * ns_per_cycle;
  }
  if (attr) {
    tsc["source"] = "KVM_VCPU_TSC_OFFSET of each vCPU after the run (exact), checked by IA32_TSC reads";
    tsc["offset_moved_ns"] = static_cast<double>(moved) * ns_per_cycle;
    // A guest timestamp's error on the trace clock: the host clock pairs'
    // half-width, plus how far any vCPU's offset moved during the run (a
    // timestamp taken before the move is off by that much).
    tsc["error_ns"] = pair_ns + static_cast<double>(moved) * ns_per_cycle;
  } else if (s.trace_offset_start && offset_end) {
    const double bracket = static_cast<double>(std::max(s.trace_offset_start->bracket_cycles, offset_end->bracket_cycles));
    const double drift = std::abs(static_cast<double>(offset_end->offset - read_offset));
    tsc["source"] = "vCPU 0's IA32_TSC reads (KVM_GET_MSRS between two host rdtsc, before and after the run)";
    tsc["offset_moved_ns"] = drift * ns_per_cycle;
    tsc["error_ns"] = pair_ns + std::max(bracket / 2, drift) * ns_per_cycle;
  } else {
    tsc["source"] = "none: KVM told neither the offset nor IA32_TSC; offset assumed 0";
    tsc["error_ns"] = nullptr;
  }
  if (s.config.workload && s.lock_log.stride != 0) {
    const std::uint32_t locks = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(s.config.workload->nlocks, 1, 16));
    const auto stats = trace::read_lock_log(s.vm.memory().all(), s.lock_log, clocks, trace.origin_ns(), end.ns, locks,
                                            trace);
    meta["locks"]["source"] = "guest lock-trace log (no exits), guest TSC converted";
    meta["locks"]["records"] = stats.records;
    meta["locks"]["dropped_in_guest"] = stats.dropped;
    meta["locks"]["rejected"] = stats.rejected;
  }
}

// --runstate (docs/runstate.md, "Handing it to the guest"): the BPF-published
// page when it loads (and the mode allows), else a zero page; either way one
// 4 KiB memslot at abi::kRunStateGpa, read-only where KVM can do that.
void Machine::map_runstate_page(const kvm::KvmSystem& kvm) {
  State& s = *state_;
  const RunStateMode mode = s.config.runstate;
  const bool readonly_mem = kvm.check_extension(KVM_CAP_READONLY_MEM) > 0;
  if (mode == RunStateMode::kOff) {
    s.runstate_detail = "--runstate off";
  } else if (!readonly_mem) {
    s.runstate_detail = "KVM lacks KVM_CAP_READONLY_MEM (the page must be a read-only memslot)";
  } else if (s.config.vcpus > abi::kRunStateMaxVcpus) {
    s.runstate_detail = fmt::format("the page describes at most {} vCPUs, this VM has {}", abi::kRunStateMaxVcpus,
                                    s.config.vcpus);
  } else {
    try {
      s.runstate_page.emplace(runstate::RunStatePage::open_shared(s.config.vcpus));
      s.runstate_kind = "bpf";
      s.runstate_detail = s.runstate_page->attach_point();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kHost) throw;
      s.runstate_detail = e.what();
    }
  }
  if (!s.runstate_page && mode == RunStateMode::kOn)
    fail_host("--runstate on: the vCPU run-state page cannot be published: {}", s.runstate_detail);
  const void* host = nullptr;
  if (s.runstate_page) {
    host = s.runstate_page->page().data();
  } else {
    s.runstate_zero = zero_page();
    host = s.runstate_zero.data();
  }
  // Without KVM_CAP_READONLY_MEM a zero page is mapped writable: a guest that
  // writes it changes only its own view of "unknown".
  s.runstate_slot.emplace(s.vm, kRunStateSlot, abi::kRunStateGpa, host, abi::kRunStateBytes, readonly_mem);
  s.control.set_runstate_page(s.runstate_page ? &*s.runstate_page : nullptr, abi::kRunStateGpa, abi::kRunStateBytes);
  spdlog::debug("run-state page (--runstate {}): {} ({}), GPA {:#x}", runstate_mode_name(mode), s.runstate_kind,
                s.runstate_detail, abi::kRunStateGpa);
}

std::vector<std::string> Machine::State::vcpu_state_lines() const {
  std::vector<std::string> lines;
  for (const auto& v : vcpus) lines.push_back(v->state_line());
  return lines;
}

// Every vCPU still in the game is halted with no kick pending, and nothing
// changed while we looked (the backend's epoch): no one is left to kick. A
// state the backend cannot see (VcpuPvState::known false) is never a deadlock.
bool Machine::State::deadlocked() const {
  const std::uint64_t before = backend->epoch();
  bool any_halted = false;
  for (const auto& v : vcpus) {
    if (v->finished()) continue;
    const pvlock::VcpuPvState pv = backend->vcpu_state(v->index());
    if (!pv.known || !pv.halted || pv.kick_pending) return false;
    any_halted = true;
  }
  return any_halted && backend->epoch() == before;
}

// Every wait ends when the run stops. The run stops (RunControl::end, whose
// stop hook is below) on the first of: a guest fault or failure, --timeout
// (the watchdog timer), a deadlock, SIGINT/SIGTERM/SIGHUP (StopScope), or
// every vCPU finishing. From then on, each thread leaves promptly:
//   - a vCPU in KVM_RUN: immediate_exit plus SIGUSR1 (not blocked in vCPU
//     threads, no SA_RESTART: KVM_RUN returns EINTR), repeated by the ticker
//     below every deadlock_check_ms until every vCPU thread has left;
//   - a vCPU halted on its kick latch (futex sleep or halt polling): the
//     backend's stop() sets kStop and wakes it; kStop is sticky, so no later
//     halt blocks either;
//   - a vCPU delaying a kick (--kick-delay-us): sleeps on the backend's
//     StopFlag, which stop() sets;
//   - this thread's event loop runs only timers and posted handlers, and
//     returns once every vCPU thread has reported its end (on_finished); the
//     joins after it therefore wait for threads that are already leaving.
// Whatever does not end this way (a host call that ignores EINTR) is ended by
// StopSignals' backstop on a signal (kStopGrace), never by waiting for it.
RunResult Machine::run() {
  State& s = *state_;
  namespace asio = boost::asio;
  asio::io_context io;

  s.control.set_stop_hook([&s] {
    s.backend->stop();
    for (auto& v : s.vcpus) {
      v->stop_parking();
      v->interrupt();
    }
  });

  // SIGINT/SIGTERM/SIGHUP end the run through the event loop, like the
  // watchdog (StopSignals takes them on its own thread and calls us). The
  // scope ends before the joins below: the watcher never sees a joined thread.
  const auto stop_by_signal = [&s](int signal) {
    s.control.end(Outcome::kInterrupted, fmt::format("stopped by {}", signal_name(signal)), s.vcpu_state_lines());
  };
  std::optional<StopScope> on_signal;
  on_signal.emplace([&io, &stop_by_signal](int signal) {
    asio::post(io, [&stop_by_signal, signal] { stop_by_signal(signal); });
  });
  // A signal that came while the VM was being built: the guest never runs,
  // the report still comes.
  if (const int signal = stop_signal()) stop_by_signal(signal);

  // Services start before the first vCPU thread (run_service.h).
  RunContext context{io, s.control, *s.backend, s.vcpus, s.origin};
  for (auto& service : s.services) service->start(context);

  // vCPU threads inherit this thread's mask: they must never take
  // SIGINT/SIGTERM/SIGHUP (those belong to StopSignals, already blocked
  // process-wide when main() installed it) and must always take SIGUSR1, or
  // KVM_RUN would not return EINTR.
  const sigset_t stop_set = stop_signal_set();
  sigset_t kick_set, previous;
  sigemptyset(&kick_set);
  sigaddset(&kick_set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop_set, &previous);
  pthread_sigmask(SIG_UNBLOCK, &kick_set, nullptr);

  std::size_t finished = 0;
  const auto start = std::chrono::steady_clock::now();
  s.startup.run = s.since_origin();
  for (std::size_t i = 0; i < s.vcpus.size(); ++i) {
    auto& v = *s.vcpus[i];
    v.on_finished = [&io, &finished, &s] {
      asio::post(io, [&io, &finished, &s] {
        if (++finished == s.vcpus.size()) io.stop();
      });
    };
    std::vector<int> affinity;
    if (!s.config.pcpus.empty()) {
      if (s.config.pin == PinPolicy::kSpread)
        affinity = {s.config.pcpus[i % s.config.pcpus.size()]};
      else
        affinity = s.config.pcpus;
    }
    v.start(std::move(affinity));
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);

  asio::steady_timer watchdog(io);
  if (s.config.timeout_s > 0) {
    watchdog.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s.config.timeout_s)));
    watchdog.async_wait([&](const boost::system::error_code& ec) {
      if (!ec)
        s.control.end(Outcome::kTimeout, fmt::format("watchdog: the guest did not finish within {} s", s.config.timeout_s),
                      s.vcpu_state_lines());
    });
  }

  // Deadlock detector; after the outcome is decided it keeps re-interrupting
  // vCPUs until every thread has left, so no thread can be left in KVM_RUN.
  // A deadlock must be seen on two ticks in a row with no halt, wake or kick
  // in between (the epoch): a backend whose state is read from KVM (the kvm
  // backend's `blocking` statistic) may catch a woken vCPU an instant before
  // it leaves its halt, never for a whole tick.
  asio::steady_timer ticker(io);
  bool deadlock_seen = false;
  std::uint64_t deadlock_epoch = 0;
  std::function<void(const boost::system::error_code&)> tick = [&](const boost::system::error_code& ec) {
    if (ec) return;
    const std::uint64_t epoch_at_tick = s.backend->epoch();
    if (s.control.decided()) {
      for (auto& v : s.vcpus) v->interrupt();
    } else if (const bool now = s.deadlocked(); std::exchange(deadlock_seen, now) && now &&
                                                 s.backend->epoch() == deadlock_epoch) {
      auto lines = s.vcpu_state_lines();
      s.control.end(Outcome::kDeadlock,
                    "deadlock: every vCPU is halted with no kick pending, so none can ever be woken (a lost wakeup?)",
                    std::move(lines));
    }
    deadlock_epoch = epoch_at_tick;
    ticker.expires_after(std::chrono::milliseconds(s.config.deadlock_check_ms));
    ticker.async_wait(tick);
  };
  ticker.expires_after(std::chrono::milliseconds(s.config.deadlock_check_ms));
  ticker.async_wait(tick);

  io.run();
  on_signal.reset();
  for (auto& v : s.vcpus) v->join();
  for (auto& service : s.services) service->stop();
  if (s.trace) finish_trace();
  spdlog::debug("run ended: {}", s.control.decided() ? s.control.reason() : "every vCPU finished");
  s.serial.flush_all();
  if (auto error = s.serial.write_error()) s.control.end(Outcome::kHostError, std::move(*error));

  RunResult result;
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.seconds_to_first_entry = s.control.seconds_to_first_entry();
  result.seconds_to_first_exit = s.control.seconds_to_first_exit();
  result.startup = s.startup;
  result.backend = std::string(s.backend->name());
  result.unknown_kvm_hypercalls = s.control.hypercalls().unknown_calls(pvlock::Transport::kKvm);
  result.unknown_sbi_calls = s.control.hypercalls().unknown_calls(pvlock::Transport::kSbi);
  result.kvm_kind = s.kvm_kind;
  result.tsc_khz = s.tsc_khz;
  result.guest_usage = s.control.usage();
  result.runstate = s.runstate_kind;
  result.runstate_detail = s.runstate_detail;
  for (const auto& v : s.vcpus) result.vcpus.push_back(v->report());
  read_steal_time(s.vm.memory(), result.vcpus);
  for (auto& service : s.services) service->report(result);
  result.guest_prints = s.control.prints();
  result.serial_lines = s.serial.captured();
  if (s.control.decided()) {
    result.outcome = s.control.outcome();
    result.reason = s.control.reason();
    result.details = s.control.details();
  } else {
    result.outcome = Outcome::kCompleted;
    result.reason = "every vCPU finished its program";
  }
  return result;
}

}  // namespace lockvisor::machine
