#include "vmm/machine/machine.h"

#include "vmm/machine/machine_state.h"

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
#include "vmm/devices/power_ports.h"
#include "vmm/devices/uart_8250.h"
#include "vmm/linux/kvm_entry.h"
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
  } else if (vcpus > abi::kRunStateMaxVcpus) {
    s.runstate_detail = fmt::format("the page describes at most {} vCPUs, this VM has {}", abi::kRunStateMaxVcpus, vcpus);
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
    if (s.config.vnuma) {
      affinity = vnuma_affinity(*s.config.vnuma, static_cast<unsigned>(i), s.config.pin == PinPolicy::kSpread);
    } else if (!s.config.pcpus.empty()) {
      if (s.config.pin == PinPolicy::kSpread)
        affinity = {s.config.pcpus[i % s.config.pcpus.size()]};
      else
        affinity = s.config.pcpus;
    }
    v.start(std::move(affinity));
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  // The run-state page's memslot and load, now that nothing more is on the
  // way to the first guest instruction: they overlap the vCPU threads' start
  // instead of the build (runstate_loader.h, map_runstate_slot()). The load
  // is already running when a service or --runstate on needed the page.
  try {
    s.map_runstate_slot();
  } catch (const Error& e) {
    s.control.end(Outcome::kHostError, e.what());  // the vCPU threads run: they must be stopped, not left
  }
  if (s.runstate && !s.control.decided()) s.runstate->start();

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
    } else if (s.linux_guest) {
      // A Linux guest whose every vCPU is halted is idle, not stuck: its
      // timers wake it. Only --timeout ends such a run.
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
  spdlog::debug("run ended: {}", s.control.decided() ? s.control.reason() : "every vCPU finished");
  if (s.linux_console) s.linux_console->flush();
  s.serial.flush_all();
  if (auto error = s.serial.write_error()) s.control.end(Outcome::kHostError, std::move(*error));

  RunResult result;
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.seconds_to_first_entry = s.control.seconds_to_first_entry();
  result.seconds_to_first_exit = s.control.seconds_to_first_exit();
  result.backend = std::string(s.backend->name());
  result.unknown_kvm_hypercalls = s.hypercalls->unknown_calls(pvlock::Transport::kKvm);
  result.unknown_sbi_calls = s.hypercalls->unknown_calls(pvlock::Transport::kSbi);
  result.kvm_kind = s.kvm_kind;
  result.tsc_khz = s.tsc_khz;
  result.guest_usage = s.control.usage();
  // A run that ended before its load began (a signal while the VM was being
  // built) does not start one now only to wait for it.
  if (s.runstate) s.runstate->cancel("the run ended before the page's load began");
  s.settle_runstate();
  result.startup = s.startup;
  result.runstate = s.runstate_kind;
  result.runstate_detail = s.runstate_detail;
  for (const auto& v : s.vcpus) {
    result.vcpus.push_back(v->report());
    if (s.report_channel != nullptr) s.report_channel->fill(v->index(), result.vcpus.back());
  }
  read_steal_time(s.vm.memory(), result.vcpus);
  for (auto& service : s.services) service->report(result);
  result.guest_prints = s.control.prints();
  result.linux_guest = s.linux_guest;
  if (s.linux_console) result.kernel_lines = s.linux_console->kept_lines();
  result.guest_status = s.control.guest_status();
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
