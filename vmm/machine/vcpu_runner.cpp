#include "vmm/machine/vcpu_runner.h"

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/ucall.h"
#include "vmm/host/cpu_set.h"
#include "vmm/machine/guest_text.h"
#include "vmm/trace/trace_clock.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;

namespace {
using metrics::runqueue_wait_ns;
// This thread's run-state record and its involuntary context switches, taken
// between two equal, even seq reads of the record: both cover exactly the same
// switches (docs/runstate.md). Gives up after a few tries (the thread keeps
// being switched): then the counts may differ by the switches in between.
VcpuRunStateCounts sample_runstate(const runstate::RunStatePage& page, unsigned vcpu) {
  const abi::VcpuRunState& record = page.records()[vcpu];
  VcpuRunStateCounts counts;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint32_t before = __atomic_load_n(&record.seq, __ATOMIC_ACQUIRE);
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    const abi::VcpuRunState snapshot = runstate::read_record(record);
    counts = {snapshot.preemptions, snapshot.sleeps, snapshot.runs, snapshot.anomalies,
              static_cast<std::uint64_t>(usage.ru_nivcsw)};
    if ((before & 1) == 0 && snapshot.seq == before) break;
  }
  return counts;
}

}  // namespace

// ---------------------------------------------------------------- RunControl

RunControl::RunControl(const MachineConfig& config, pvlock::PvBackend& backend, SerialConsole& serial,
                       std::chrono::steady_clock::time_point origin)
    : config_(config),
      backend_(backend),
      serial_(serial),
      budget_(config.limits),
      origin_(origin),
      hypercalls_(pvlock::make_pv_hypercall_table(
          backend,
          {config.pv_unhalt, config.sbi_pvlock, config.sbi_experimental_eid, config.backend.enforce_pv_feature_cpuid,
           config.sbi_kick_proposed},
          [this](std::uint64_t apic_id) { return apic_to_index(apic_id); })) {}

GuestUsage RunControl::usage() const {
  return {budget_.messages(), budget_.report_bytes(), budget_.serial_bytes()};
}

void RunControl::end(Outcome outcome, std::string reason, std::vector<std::string> details) {
  {
    std::lock_guard lock(mutex_);
    if (decided_) return;
    decided_ = true;
    outcome_ = outcome;
    reason_ = std::move(reason);
    details_ = std::move(details);
  }
  stopping_.store(true);
  if (stop_hook_) stop_hook_();
}

Outcome RunControl::outcome() const {
  std::lock_guard lock(mutex_);
  return outcome_;
}
std::string RunControl::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}
std::vector<std::string> RunControl::details() const {
  std::lock_guard lock(mutex_);
  return details_;
}
bool RunControl::decided() const {
  std::lock_guard lock(mutex_);
  return decided_;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
}
void note_first(std::atomic<double>& slot, std::chrono::steady_clock::time_point origin) {
  if (slot.load(std::memory_order_relaxed) != 0) return;
  double expected = 0;
  slot.compare_exchange_strong(expected, seconds_since(origin));
}
}  // namespace

void RunControl::note_entry() { note_first(first_entry_s_, origin_); }
void RunControl::note_exit() { note_first(first_exit_s_, origin_); }

int RunControl::apic_to_index(std::uint64_t apic_id) const {
  return apic_id < apic_map_.size() ? apic_map_[apic_id] : -1;
}
void RunControl::map_apic(unsigned apic_id, unsigned index) { apic_map_.at(apic_id) = static_cast<int>(index); }

void RunControl::add_print(std::string line) {
  std::lock_guard lock(mutex_);
  prints_.push_back(std::move(line));
}
std::vector<std::string> RunControl::prints() const {
  std::lock_guard lock(mutex_);
  return prints_;
}

// ---------------------------------------------------------------- VcpuRunner

void install_vcpu_interrupt_signal() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_handler = [](int) {};
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: KVM_RUN must return EINTR
    sigaction(SIGUSR1, &action, nullptr);
    return true;
  }();
  (void)installed;
}

VcpuRunner::VcpuRunner(kvm::Vcpu vcpu, unsigned apic_id, kvm::GuestMemory& memory, RunControl& control)
    : vcpu_(std::move(vcpu)),
      apic_id_(apic_id),
      memory_(memory),
      control_(control),
      stats_(vcpu_.stats_fd()),
      guest_report_(control.budget()) {
  vcpu_.request_sync_regs();
}

void VcpuRunner::start(std::vector<int> affinity) {
  thread_ = std::thread([this, affinity = std::move(affinity)]() mutable { thread_main(std::move(affinity)); });
  handle_ = thread_.native_handle();
  started_.store(true);
}

void VcpuRunner::join() {
  if (thread_.joinable()) thread_.join();
}

void VcpuRunner::interrupt() {
  vcpu_.run_state()->immediate_exit = 1;
  if (started_.load() && !finished_.load()) pthread_kill(handle_, SIGUSR1);
}

void VcpuRunner::kick_out() {
  vcpu_.run_state()->immediate_exit = 1;
  if (started_.load() && !finished_.load()) pthread_kill(handle_, SIGUSR1);
}

bool VcpuRunner::inject_preemption(std::chrono::nanoseconds duration) {
  if (finished_.load() || control_.stopping() || !park_.inject(duration)) return false;
  kick_out();
  return true;
}

bool VcpuRunner::pause() {
  if (finished_.load() || control_.stopping() || !park_.pause()) return false;
  kick_out();
  return true;
}

void VcpuRunner::resume() { park_.resume(); }

// The park requested by inject_preemption()/pause() (vcpu_park.h). The
// request set immediate_exit to get us here; it is cleared only after the
// park and before the stop check, so a stop that comes at any point still
// keeps this thread out of KVM_RUN (stop sets `stopping` before it sets
// immediate_exit again).
bool VcpuRunner::serve_park() {
  while (park_.pending()) {
    const auto interval = park_.wait_while_parked();
    if (!interval) break;
    if (trace_) {
      // steady_clock is CLOCK_MONOTONIC, the trace's clock.
      const auto ns = [](VcpuPark::Clock::time_point t) {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
      };
      trace_->add({ns(interval->begin), ns(interval->end), 0, static_cast<std::uint32_t>(interval->cause),
                   trace::EventKind::kParked});
    }
    if (on_parked) on_parked(index(), *interval);
  }
  vcpu_.run_state()->immediate_exit = 0;
  return !control_.stopping();
}

void VcpuRunner::thread_main(std::vector<int> affinity) {
  thread_id_.store(static_cast<pid_t>(::gettid()), std::memory_order_release);
  const auto wait_at_start = runqueue_wait_ns();
  // Nothing may leave this thread by an exception: std::terminate would end
  // the process without a report. An allocation that fails although every
  // guest limit held (the host is short of memory) ends the run as a host
  // error, and the thread still reports below.
  try {
    // Before anything else, and before the first KVM_RUN: the page publishes
    // this thread's switches as this vCPU's from now on.
    if (auto* page = control_.runstate_page()) {
      page->register_thread(static_cast<pid_t>(::gettid()), index());
      runstate_at_start_ = sample_runstate(*page, index());
      // A record reads "unknown" until the thread's next switch: give the CPU
      // away once (if anything else wants it), so a vCPU sharing its CPU reads
      // "running" from its first guest instruction. The kernel counts a yield
      // as involuntary and the page as a preemption, so the counts still agree.
      sched_yield();
    }
    try {
      if (!affinity.empty()) host::set_thread_affinity(pthread_self(), affinity);
    } catch (const Error& e) {
      control_.end(Outcome::kHostError, e.what());
    }
    affinity_ = host::thread_affinity(pthread_self());
    spdlog::debug("vCPU {} (APIC ID {}) starts on host CPUs {}", index(), apic_id_, host::format_cpu_list(affinity_));
    run_loop();
  } catch (const std::bad_alloc&) {
    host_error("out of host memory while handling the guest (std::bad_alloc)");
  } catch (const Error& e) {
    try {
      e.kind() == ErrorKind::kGuest ? guest_error(e.what()) : host_error(e.what());
    } catch (...) {
      control_.end(e.kind() == ErrorKind::kGuest ? Outcome::kGuestFault : Outcome::kHostError, std::string());
    }
  } catch (const std::exception& e) {
    host_error("internal error: ", e.what());
  } catch (...) {
    host_error("internal error: unknown exception");
  }
  const VcpuState left = state_.load();
  if (left == VcpuState::kRunning || left == VcpuState::kStarting) state_.store(VcpuState::kStopped);
  timespec cpu{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  cpu_seconds_ = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) == 0) {
    voluntary_switches_ = static_cast<std::uint64_t>(usage.ru_nvcsw);
    involuntary_switches_ = static_cast<std::uint64_t>(usage.ru_nivcsw);
  }
  if (auto* page = control_.runstate_page(); page != nullptr && runstate_at_start_) {
    const auto end = sample_runstate(*page, index());
    const auto& start = *runstate_at_start_;
    runstate_ = VcpuRunStateCounts{end.preemptions - start.preemptions, end.sleeps - start.sleeps, end.runs - start.runs,
                                   end.anomalies - start.anomalies, end.involuntary_switches - start.involuntary_switches};
  }
  kvm_stats_ = stats_.snapshot();
  if (const auto wait_at_end = runqueue_wait_ns(); wait_at_start && wait_at_end)
    runqueue_wait_ns_ = *wait_at_end - *wait_at_start;
  spdlog::debug("vCPU {} leaves its loop: {}, {:.3f} s CPU, last RIP {:#x}", index(), vcpu_state_name(state_.load()),
                cpu_seconds_, rip());
  finished_.store(true);
  if (on_finished) on_finished();
}

void VcpuRunner::run_loop() {
  state_.store(VcpuState::kRunning);
  control_.note_entry();
  while (!control_.stopping()) {
    if (park_.pending() && !serve_park()) break;
    // --trace: two clock reads and two stores per exit, nothing without it.
    const std::uint64_t entered = trace_ ? trace::now_ns() : 0;
    const int rc = vcpu_.run();
    const std::uint64_t left = trace_ ? trace::now_ns() : 0;
    if (trace_) {
      trace_->add({entered, left, 0, 0, trace::EventKind::kGuest});
      trace_preemptions();
    }
    if (rc == -EINTR || rc == -EAGAIN) {
      count(ExitKind::kSignal);
      if (trace_) trace_exit(left);
      continue;
    }
    if (rc != 0) {
      control_.end(Outcome::kHostError, fmt::format("vCPU {}: KVM_RUN failed: {}", index(), std::strerror(-rc)));
      break;
    }
    control_.note_exit();
    rip_.store(vcpu_.sync_regs().rip, std::memory_order_relaxed);
    exited_.store(true, std::memory_order_relaxed);
    const bool go_on = handle_exit();
    if (trace_) trace_exit(left);
    if (!go_on) break;
  }
}

void VcpuRunner::trace_preemptions() {
  if (trace_preemptions_ == nullptr) return;
  const runstate::RunStatePage* page = control_.runstate_page();
  trace_preemptions_->observe(runstate::read_record(page->records()[index()]), *trace_host_);
}

void VcpuRunner::trace_exit(std::uint64_t left) {
  trace_->add({left, trace::now_ns(), 0, static_cast<std::uint32_t>(last_exit_), trace::EventKind::kExit});
}

std::string VcpuRunner::where() const {
  return exited() ? fmt::format("vCPU {} at RIP {:#x}", index(), rip()) : fmt::format("vCPU {} (no exit yet)", index());
}

std::string VcpuRunner::state_line() const {
  const pvlock::VcpuPvState pv = control_.backend().vcpu_state(index());
  const VcpuState state = state_.load();
  const char* name = finished() || state == VcpuState::kStarting ? vcpu_state_name(state)
                     : !pv.known                                  ? "running or halted (unknown)"
                     : pv.halted                                  ? "halted"
                                                                  : "running";
  return fmt::format("vCPU {}: {}, kick {}, last hypercall {:#x}, {}", index(), name,
                     !pv.known ? "unknown" : pv.kick_pending ? "pending" : "not pending", last_hypercall(),
                     exited() ? fmt::format("RIP {:#x}", rip()) : std::string("no exit yet"));
}

bool VcpuRunner::guest_error(std::string what) {
  spdlog::debug("{}: {}", where(), what);
  state_.store(VcpuState::kFaulted);
  control_.end(Outcome::kGuestFault, fmt::format("{}: {}", where(), what));
  return false;
}

// Also used on the way out of a failed allocation: if even the reason line
// cannot be built, the run still ends (an empty reason allocates nothing).
bool VcpuRunner::host_error(const char* what, const char* detail) noexcept {
  try {
    control_.end(Outcome::kHostError, fmt::format("vCPU {}: {}{}", index(), what, detail));
  } catch (...) {
    control_.end(Outcome::kHostError, std::string());
  }
  return false;
}

bool VcpuRunner::handle_exit() {
  kvm_run* run = vcpu_.run_state();
  switch (run->exit_reason) {
    case KVM_EXIT_IO:
      return handle_io();
    case KVM_EXIT_HLT:
      count(ExitKind::kHlt);
      last_hypercall_.store(0, std::memory_order_relaxed);
      return halt();
    case KVM_EXIT_MMIO:
      count(ExitKind::kMmio);
      // The run-state page is a read-only memslot: KVM drops a guest write to
      // it and exits here. Never legitimate (the guest maps it read-only, so
      // only a guest that rewrote its own page tables gets here): a guest
      // error naming the page.
      return guest_error(fmt::format("MMIO {} of {} bytes at GPA {:#x}{}", run->mmio.is_write ? "write" : "read",
                                     run->mmio.len, run->mmio.phys_addr,
                                     control_.in_runstate_page(run->mmio.phys_addr)
                                         ? ": the vCPU run-state page is read-only"
                                         : ", outside guest memory"));
    case KVM_EXIT_SHUTDOWN:
      return guest_error("triple fault (KVM_EXIT_SHUTDOWN)");
    case KVM_EXIT_INTERNAL_ERROR:
      return guest_error(fmt::format("KVM internal error, suberror {}", run->internal.suberror));
    case KVM_EXIT_FAIL_ENTRY:
      return guest_error(fmt::format("VM entry failed, hardware reason {:#x}",
                                     run->fail_entry.hardware_entry_failure_reason));
    case KVM_EXIT_INTR:
      count(ExitKind::kIntr);
      return true;
    default:
      return guest_error(fmt::format("unexpected KVM exit reason {}", run->exit_reason));
  }
}

bool VcpuRunner::halt() {
  state_.store(VcpuState::kHalted);
  // The record is read on both sides of the halt: a sleep in between
  // (a blocked halt) must not be mistaken for the end of a preemption.
  if (trace_) trace_preemptions();
  const std::uint64_t halted = trace_ ? trace::now_ns() : 0;
  const auto outcome = control_.backend().halt(index());
  if (trace_) {
    trace_->add({halted, trace::now_ns(), 0, 0, trace::EventKind::kHalt});
    trace_preemptions();
  }
  if (outcome == pvlock::HaltOutcome::kStopped) return false;  // stays "halted" in the report
  state_.store(VcpuState::kRunning);
  return true;
}

bool VcpuRunner::handle_io() {
  kvm_run* run = vcpu_.run_state();
  const auto& io = run->io;
  // KVM fills these, but a corrupt offset must not send us outside kvm_run.
  const std::uint64_t data_end = std::uint64_t{io.data_offset} + std::uint64_t{io.size} * io.count;
  if (io.size == 0 || data_end > 4096 * 4)
    return guest_error(fmt::format("malformed port I/O exit (port {:#x}, size {}, count {})", io.port, io.size, io.count));
  auto* data = reinterpret_cast<std::uint8_t*>(run) + io.data_offset;
  const bool out = io.direction == KVM_EXIT_IO_OUT;
  kvm_regs& regs = vcpu_.sync_regs();

  // Reads float high on every port nothing answers, the doorbells included
  // (they are write-only): as on real hardware.
  const auto float_high = [&] {
    if (!out) std::memset(data, 0xFF, std::size_t{io.size} * io.count);
    return true;
  };
  switch (io.port) {
    case abi::kPortKvmHypercall:
      count(ExitKind::kHypercall);
      return out ? handle_hypercall(pvlock::Transport::kKvm, regs) : float_high();
    case abi::kPortSbiCall:
      count(ExitKind::kSbi);
      return out ? handle_hypercall(pvlock::Transport::kSbi, regs) : float_high();
    case abi::kPortUcall:
      count(ExitKind::kUcall);
      return out ? handle_ucall(regs.rbx) : float_high();
    case abi::kPortFault:
      count(ExitKind::kFault);
      return out ? handle_fault(regs) : float_high();  // only a write reports an exception
    case abi::kPortNop:
      count(ExitKind::kNop);
      return float_high();
    default:
      break;
  }
  if (io.port >= abi::kPortCom1 && io.port < abi::kPortCom1 + 8) {
    count(ExitKind::kSerial);
    if (out && io.port == abi::kPortCom1) {
      return handle_serial_out(data, io.size, io.count);
    } else if (!out) {
      std::memset(data, io.port == abi::kPortCom1Lsr ? 0x60 : 0, std::size_t{io.size} * io.count);
    }
    return true;
  }
  // Unclaimed port: reads float high, writes are dropped, as on real hardware.
  count(ExitKind::kOtherIo);
  return float_high();
}

bool VcpuRunner::handle_serial_out(const std::uint8_t* data, std::uint32_t size, std::uint32_t count) {
  // Charged before anything is written: the limit bounds what a guest makes
  // the VMM write to the console or the --serial file.
  if (auto over = control_.budget().charge_serial_bytes(count)) return guest_error(std::move(*over));
  for (std::uint32_t i = 0; i < count; ++i) {
    if (!control_.serial().put(index(), static_cast<char>(data[std::size_t{i} * size]))) {
      const auto why = control_.serial().write_error();
      return host_error(why ? why->c_str() : "serial output: write failed");
    }
  }
  return true;
}

bool VcpuRunner::handle_hypercall(pvlock::Transport transport, kvm_regs& regs) {
  const pvlock::HypercallInput in{regs.rax, regs.rbx, regs.rcx, regs.rdx, regs.rsi, index()};
  const pvlock::HypercallResult result = control_.hypercalls().dispatch(transport, in);
  last_hypercall_.store(result.number, std::memory_order_relaxed);
  regs.rax = result.output.rax;
  if (result.output.rbx) regs.rbx = *result.output.rbx;
  vcpu_.commit_sync_regs();
  return result.output.halt ? halt() : true;
}

namespace {
std::string exception_name(std::uint64_t vector) {
  // Intel SDM vol. 3, table 6-1, and AMD's #HV, #VC, #SX.
  static constexpr const char* kNames[32] = {"#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM",
                                             "#DF", "CSO", "#TS", "#NP", "#SS", "#GP", "#PF", nullptr,
                                             "#MF", "#AC", "#MC", "#XM", "#VE", "#CP", nullptr, nullptr,
                                             nullptr, nullptr, nullptr, nullptr, "#HV", "#VC", "#SX", nullptr};
  if (vector < 32 && kNames[vector] != nullptr) return fmt::format("{} (vector {})", kNames[vector], vector);
  if (vector < 32) return fmt::format("vector {} (reserved)", vector);
  if (vector < 256) return fmt::format("vector {} (not an exception: an interrupt vector)", vector);
  return fmt::format("vector {} (no such vector)", vector);
}
}  // namespace

bool VcpuRunner::handle_fault(const kvm_regs& regs) {
  const std::uint64_t vector = regs.rbx;
  rip_.store(regs.rdx, std::memory_order_relaxed);
  std::string what = fmt::format("guest exception {}, error code {:#x}, CPL{}", exception_name(vector), regs.rcx,
                                 regs.rdi & 3);
  if (vector == 14) what += fmt::format(", CR2 {:#x}", regs.rsi);
  return guest_error(std::move(what));
}

bool VcpuRunner::handle_ucall(std::uint64_t gpa) {
  auto action = guest_report_.handle(memory_.all(), gpa);
  switch (action.kind) {
    case UcallAction::Kind::kContinue:
      return true;
    case UcallAction::Kind::kPrint:
      // Shown escaped and prefixed, so that a guest line cannot pass for one
      // of the VMM's own (no VMM line starts with "guest ").
      if (control_.config().echo_guest_prints) fmt::print("guest vCPU {}| {}\n", index(), console_escape(action.text));
      control_.add_print(fmt::format("vCPU {}: {}", index(), action.text));
      return true;
    case UcallAction::Kind::kAssertFailed:
      state_.store(VcpuState::kFaulted);
      control_.end(Outcome::kGuestFailed, fmt::format("vCPU {}: {}", index(), action.text));
      return false;
    case UcallAction::Kind::kDone:
      guest_exit_code_ = action.exit_code;
      state_.store(VcpuState::kDone);
      if (action.exit_code != 0)
        control_.end(Outcome::kGuestFailed, fmt::format("vCPU {}: program exited with code {}", index(), action.exit_code));
      return false;
    case UcallAction::Kind::kWindowMark:
      (action.exit_code == abi::kWindowStart ? window_start_ : window_end_) = metrics::sample_thread_usage();
      return true;
    case UcallAction::Kind::kPreemptPoint: {
      if (!on_preempt_point)
        return guest_error("preemption point (ucall 9) but no targeted --inject schedule is armed");
      auto verdict = on_preempt_point(index(), memory_.all(), action.args);
      if (!verdict.refused.empty()) return guest_error(std::move(verdict.refused));
      // On this thread: the park is served before the next KVM_RUN, so the
      // vCPU stops exactly at its preemption point.
      park_.inject(verdict.park);
      return true;
    }
    case UcallAction::Kind::kGuestError:
      break;
  }
  return guest_error(std::move(action.text));
}

std::optional<double> VcpuRunner::cpu_seconds_now() const {
  if (!started_.load() || finished_.load()) return std::nullopt;
  clockid_t clock{};
  timespec used{};
  if (pthread_getcpuclockid(handle_, &clock) != 0 || clock_gettime(clock, &used) != 0) return std::nullopt;
  return static_cast<double>(used.tv_sec) + static_cast<double>(used.tv_nsec) * 1e-9;
}

std::array<std::uint64_t, static_cast<std::size_t>(ExitKind::kCount)> VcpuRunner::exit_counts() const {
  std::array<std::uint64_t, static_cast<std::size_t>(ExitKind::kCount)> counts{};
  for (std::size_t k = 0; k < counts.size(); ++k) counts[k] = exits_[k].load(std::memory_order_relaxed);
  return counts;
}

VcpuReport VcpuRunner::report() {
  VcpuReport report;
  report.index = index();
  report.apic_id = apic_id_;
  report.final_state = state_.load();
  const pvlock::VcpuPvState pv = control_.backend().vcpu_state(index());
  report.kick_pending = pv.known && pv.kick_pending;
  if (pv.known && pv.halted && report.final_state == VcpuState::kRunning)
    report.final_state = VcpuState::kHalted;
  report.last_hypercall = last_hypercall();
  report.rip = rip();
  report.exited = exited();
  report.guest_exit_code = guest_exit_code_;
  report.pv = control_.backend().counters(index()).snapshot();
  report.wake_latency_ns = control_.backend().wake_latencies(index());
  report.kvm = kvm_stats_;
  const auto exits = exit_counts();
  for (std::size_t k = 0; k < exits.size(); ++k)
    if (exits[k] != 0) report.exits[kExitKindNames[k]] = exits[k];
  report.cpu_seconds = cpu_seconds_;
  report.runqueue_wait_ns = runqueue_wait_ns_;
  report.voluntary_switches = voluntary_switches_;
  report.involuntary_switches = involuntary_switches_;
  report.runstate = runstate_;
  report.park = park_.counts();
  report.window_start = window_start_;
  report.window_end = window_end_;
  report.affinity = affinity_;
  report.results = std::move(guest_report_.results());
  report.cases = std::move(guest_report_.cases());
  report.guest_text_replaced = guest_report_.replaced_strings();
  return report;
}

}  // namespace lockvisor::machine
