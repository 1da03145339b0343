#include "vmm/machine/vcpu_runner.h"

#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lockvisor/abi/kvm_hypercall.h"
#include "vmm/host/cpu_set.h"
#include "vmm/kvm/vcpu_exit.h"
#include "vmm/util/monotonic_clock.h"
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

VcpuRunner::VcpuRunner(kvm::Vcpu vcpu, unsigned apic_id, const IoBus& bus, RunControl& control)
    : vcpu_(std::move(vcpu)), apic_id_(apic_id), bus_(bus), control_(control), stats_(vcpu_.stats_fd()) {
  vcpu_.request_sync_regs();
}

void VcpuRunner::start(std::vector<int> affinity) {
  thread_ = std::thread([this, affinity = std::move(affinity)]() mutable { thread_main(std::move(affinity)); });
  handle_ = thread_.native_handle();
  // kLeft may already be set by a thread that ended at once: never go back.
  Lifecycle created = Lifecycle::kCreated;
  lifecycle_.compare_exchange_strong(created, Lifecycle::kActive);
}

void VcpuRunner::join() {
  if (thread_.joinable()) thread_.join();
}

void VcpuRunner::interrupt() {
  // The caller's flag before immediate_exit, for the compiler too: pairs with
  // the fence in rearm_entry() (a request is seen, or its interrupt is not
  // yet cleared).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  vcpu_.run_state()->immediate_exit = 1;
  if (lifecycle_.load() == Lifecycle::kActive) pthread_kill(handle_, SIGUSR1);
}

bool VcpuRunner::inject_preemption(std::chrono::nanoseconds duration) {
  if (finished() || control_.stopping() || !park_.inject(duration)) return false;
  interrupt();
  return true;
}

bool VcpuRunner::pause() {
  if (finished() || control_.stopping() || !park_.pause()) return false;
  interrupt();
  return true;
}

void VcpuRunner::resume() { park_.resume(); }

// Clears immediate_exit before this thread checks again what could have
// asked for it. Every requester sets its flag (the park's pending, the
// run-state page's due, the run's stopping) before immediate_exit; the fence
// keeps the clear ahead of those reads, so a request whose immediate_exit
// the clear overwrote is still seen by them. The reverse order happens too:
// the thread can find a flag and serve it before its requester has written
// immediate_exit, which then arrives with nothing left to ask. KVM_RUN
// returns EINTR at once for as long as immediate_exit stays set, so the run
// loop clears it after every EINTR (an interrupt costs at most one exit),
// not only after serving a request.
void VcpuRunner::rearm_entry() {
  vcpu_.run_state()->immediate_exit = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// The park requested by inject_preemption()/pause() (vcpu_park.h). The
// request set immediate_exit to get us here; it is cleared only after the
// park, and a request that came meanwhile is served before the guest runs
// again (its interrupt was the one just cleared). Then the stop check: a
// stop that comes at any point still keeps this thread out of KVM_RUN.
// Bit 0 only (KVM_VCPU_PREEMPTED): the record's other bits are KVM's and
// the guest's. The vCPU is out of KVM_RUN, so KVM does not write it now; a
// KVM that keeps the record clears it again at the next entry too.
void VcpuRunner::show_parked(bool parked) {
  if (park_flag_ == nullptr) return;
  std::atomic_ref<std::uint8_t> flag(*park_flag_);
  if (parked)
    flag.fetch_or(abi::kStealPreempted, std::memory_order_release);
  else
    flag.fetch_and(static_cast<std::uint8_t>(~abi::kStealPreempted), std::memory_order_release);
}

bool VcpuRunner::serve_park() {
  show_parked(true);
  do {
    while (park_.pending()) {
      const auto interval = park_.wait_while_parked();
      if (!interval) break;
      if (observer_) observer_->parked(*interval);
      if (on_parked) on_parked(index(), *interval);
    }
    rearm_entry();
  } while (park_.pending() && !control_.stopping());
  show_parked(false);
  return !control_.stopping();
}

void VcpuRunner::thread_main(std::vector<int> affinity) {
  thread_id_.store(static_cast<pid_t>(::gettid()), std::memory_order_release);
  // Nothing may leave this thread by an exception: std::terminate would end
  // the process without a report. An allocation that fails although every
  // guest limit held (the host is short of memory) ends the run as a host
  // error, and the thread still reports below.
  try {
    // Before anything else, and before the first KVM_RUN when the page is
    // already there; else at the first exit after it is published (the
    // loader then interrupts this thread: join_late_runstate()).
    if (auto* loader = control_.runstate_loader()) {
      if (auto* page = loader->page_or_notify(index(), [this] {
            runstate_due_.store(true, std::memory_order_release);
            interrupt();
          }))
        join_runstate(*page);
    }
    try {
      if (!affinity.empty()) host::set_thread_affinity(pthread_self(), affinity);
    } catch (const Error& e) {
      control_.end(Outcome::kHostError, e.what());
    }
    // Nothing that allocates before the first KVM_RUN: a thread's first
    // allocation sets up its malloc arena (tens of microseconds here).
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("vCPU {} (APIC ID {}) starts on host CPUs {}", index(), apic_id_,
                    host::format_cpu_list(host::thread_affinity(pthread_self())));
    run_loop();
  } catch (const std::bad_alloc&) {
    host_error_noexcept("out of host memory while handling the guest (std::bad_alloc)");
  } catch (const Error& e) {
    try {
      e.kind() == ErrorKind::kGuest ? guest_error(e.what()) : host_error_noexcept(e.what());
    } catch (...) {
      control_.end(e.kind() == ErrorKind::kGuest ? Outcome::kGuestFault : Outcome::kHostError, std::string());
    }
  } catch (const std::exception& e) {
    host_error_noexcept("internal error: ", e.what());
  } catch (...) {
    host_error_noexcept("internal error: unknown exception");
  }
  // From here on the loader never interrupts this thread.
  if (auto* loader = control_.runstate_loader()) loader->cancel_notify(index());
  // Set at the start only (above): what the thread ran on.
  affinity_ = host::thread_affinity(pthread_self());
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
                                   end.anomalies - start.anomalies, end.involuntary_switches - start.involuntary_switches,
                                   end.preemptions};
  }
  kvm_stats_ = stats_.snapshot();
  // The thread's whole life: it was created for this run, with a run delay
  // of 0 (no read at its start, a procfs open on the way to the guest).
  runqueue_wait_ns_ = runqueue_wait_ns();
  spdlog::debug("vCPU {} leaves its loop: {}, {:.3f} s CPU, last RIP {:#x}", index(), vcpu_state_name(state_.load()),
                cpu_seconds_, rip());
  lifecycle_.store(Lifecycle::kLeft);
  if (on_finished) on_finished();
}

// The page publishes this thread's switches as this vCPU's from now on. Its
// record reads "unknown" until the thread's next switch. No yield forces one:
// with nothing else runnable it would not switch, and with something else
// runnable it would hand the CPU away for up to a time slice before the first
// guest instruction; the guest's locks treat "unknown" as "not preempted",
// exactly as they treat "running".
void VcpuRunner::join_runstate(runstate::RunStatePage& page) {
  page.register_thread(static_cast<pid_t>(::gettid()), index());
  runstate_at_start_ = sample_runstate(page, index());
}

// The page came after this thread entered the guest: the loader set
// runstate_due_ and interrupted KVM_RUN. The interrupt's immediate_exit is
// cleared here, before the park check and the stop check that follow it, so
// a park or stop requested meanwhile is still served.
bool VcpuRunner::join_late_runstate() {
  runstate_due_.store(false, std::memory_order_relaxed);
  if (auto* page = control_.runstate_page(); page != nullptr && !runstate_at_start_) join_runstate(*page);
  rearm_entry();
  return !control_.stopping();
}

void VcpuRunner::run_loop() {
  state_.store(VcpuState::kRunning);
  control_.note_entry();
  while (!control_.stopping()) {
    if (runstate_due_.load(std::memory_order_acquire) && !join_late_runstate()) break;
    if (park_.pending() && !serve_park()) break;
    // Watched: two clock reads per exit and the observer's calls; nothing otherwise.
    const std::uint64_t entered = observer_ ? monotonic_ns() : 0;
    const int rc = vcpu_.run();
    const std::uint64_t left = observer_ ? monotonic_ns() : 0;
    if (observer_) observer_->guest_ran(entered, left);
    if (rc == -EINTR || rc == -EAGAIN) {
      count(ExitKind::kSignal);
      rearm_entry();  // the flags are checked at the top of the loop
      if (observer_) observer_->exit_handled(last_exit_, left, monotonic_ns());
      continue;
    }
    if (rc != 0) {
      control_.end(Outcome::kHostError, fmt::format("vCPU {}: KVM_RUN failed: {}", index(), std::strerror(-rc)));
      break;
    }
    control_.note_exit();
    // The guest's first exit: the start-up is over, the run-state load need
    // no longer stay below the vCPU threads.
    if (!exited()) {
      if (auto* loader = control_.runstate_loader()) loader->hurry();
    }
    rip_.store(vcpu_.sync_regs().rip, std::memory_order_relaxed);
    const bool go_on = handle_exit();
    if (observer_) observer_->exit_handled(last_exit_, left, monotonic_ns());
    if (!go_on) break;
  }
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
  // The signal exits too: a thread that keeps leaving KVM_RUN without the
  // guest running (a host-side loop) shows as a count that grows while the
  // RIP stays put.
  const auto exits = exit_counts();
  return fmt::format("vCPU {}: {}, kick {}, last hypercall {:#x}, {}, KVM_RUN returns: {}, by a signal: {}", index(),
                     name, !pv.known ? "unknown" : pv.kick_pending ? "pending" : "not pending", last_hypercall(),
                     exited() ? fmt::format("RIP {:#x}", rip()) : std::string("no exit yet"), exit_total(exits),
                     exits[static_cast<std::size_t>(ExitKind::kSignal)]);
}

bool VcpuRunner::guest_error(std::string what) {
  spdlog::debug("{}: {}", where(), what);
  state_.store(VcpuState::kFaulted);
  control_.end(Outcome::kGuestFault, fmt::format("{}: {}", where(), what));
  return false;
}

bool VcpuRunner::host_error(std::string what) {
  control_.end(Outcome::kHostError, fmt::format("vCPU {}: {}", index(), what));
  return false;
}

// Also used on the way out of a failed allocation: if even the reason line
// cannot be built, the run still ends (an empty reason allocates nothing).
bool VcpuRunner::host_error_noexcept(const char* what, const char* detail) noexcept {
  try {
    control_.end(Outcome::kHostError, fmt::format("vCPU {}: {}{}", index(), what, detail));
  } catch (...) {
    control_.end(Outcome::kHostError, std::string());
  }
  return false;
}

// A status the guest reported earlier (its console protocol) wins over the
// device's: a power-off says only that the guest ended, not how it fared.
bool VcpuRunner::end_run(std::uint64_t status, std::string why) {
  control_.set_guest_status(status);
  const std::uint64_t final_status = control_.guest_status().value_or(status);
  control_.end(final_status == 0 ? Outcome::kCompleted : Outcome::kGuestFailed,
               final_status == 0 ? why : fmt::format("{}; the guest reported exit status {}", why, final_status));
  return false;
}

bool VcpuRunner::program_done(std::uint64_t exit_code) {
  state_.store(VcpuState::kDone);
  if (exit_code != 0)
    control_.end(Outcome::kGuestFailed, fmt::format("vCPU {}: program exited with code {}", index(), exit_code));
  return false;
}

bool VcpuRunner::program_failed(std::string what) {
  state_.store(VcpuState::kFaulted);
  control_.end(Outcome::kGuestFailed, std::move(what));
  return false;
}

VcpuRunner::PreemptVerdict VcpuRunner::preempt_point(std::span<const std::byte> memory,
                                                     const std::uint64_t (&args)[3]) {
  if (!on_preempt_point) return {{}, "preemption point (ucall 9) but no targeted --inject schedule is armed"};
  return on_preempt_point(index(), memory, args);
}

bool VcpuRunner::handle_exit() {
  kvm_run* run = vcpu_.run_state();
  const VcpuExit exit = kvm::decode_exit(*run, vcpu_.run_bytes());
  switch (exit.kind) {
    case VcpuExit::Kind::kPortIo:
      return handle_port_io(exit.io);
    case VcpuExit::Kind::kMmio:
      return handle_mmio(exit.mmio);
    case VcpuExit::Kind::kHalt:
      count(ExitKind::kHlt);
      last_hypercall_.store(0, std::memory_order_relaxed);
      return halt(0, nullptr);
    case VcpuExit::Kind::kIntr:
      count(ExitKind::kIntr);
      return true;
    case VcpuExit::Kind::kShutdown:
      count(ExitKind::kSystemEvent);
      if (control_.shutdown_is_reset()) return end_run(0, std::string(RunControl::kShutdownResetReason));
      return guest_error("triple fault (KVM_EXIT_SHUTDOWN)");
    case VcpuExit::Kind::kSystemEvent:
      count(ExitKind::kSystemEvent);
      return guest_error(fmt::format("KVM system event {} (shutdown, reset or crash)", exit.system_event));
    case VcpuExit::Kind::kInternalError:
      return guest_error(fmt::format("KVM internal error, suberror {}", exit.suberror));
    case VcpuExit::Kind::kFailEntry:
      return guest_error(fmt::format("VM entry failed, hardware reason {:#x}", exit.hardware_reason));
    case VcpuExit::Kind::kMalformed:
      return guest_error(exit.what);
    case VcpuExit::Kind::kUnknown:
      break;
  }
  return guest_error(fmt::format("unexpected KVM exit reason {}", exit.reason));
}

bool VcpuRunner::handle_port_io(const VcpuExit::PortIo& io) {
  const IoBus::PortClaim claim = bus_.port(io.port);
  count(claim.kind);
  if (claim.device == nullptr) {
    // Nothing there: reads float high, writes are dropped, as on a PC.
    float_high(io);
    return true;
  }
  return claim.device->on_io(*this, io);
}

bool VcpuRunner::handle_mmio(const VcpuExit::Mmio& mmio) {
  const IoBus::MmioClaim claim = bus_.mmio(mmio.gpa, mmio.len);
  count(claim.kind);
  if (claim.device != nullptr) return claim.device->on_mmio(*this, mmio);
  // Before its memslot is added (Machine::State::map_runstate_slot) the
  // run-state page reads zeros, "unknown", like the view the slot shows.
  if (!mmio.write && control_.in_runstate_page(mmio.gpa)) {
    std::fill(mmio.data.begin(), mmio.data.end(), std::uint8_t{0});
    return true;
  }
  // The run-state page is a read-only memslot: KVM drops a guest write to
  // it and exits here. Never legitimate (the guest maps it read-only, so
  // only a guest that rewrote its own page tables gets here): a guest
  // error naming the page.
  return guest_error(fmt::format("MMIO {} of {} bytes at GPA {:#x}{}", mmio.write ? "write" : "read", mmio.len,
                                 mmio.gpa,
                                 control_.in_runstate_page(mmio.gpa) ? ": the vCPU run-state page is read-only"
                                                                     : ", outside guest memory"));
}

bool VcpuRunner::halt(std::uint64_t limit_ns, bool* expired) {
  state_.store(VcpuState::kHalted);
  if (observer_) observer_->halt_begins();
  const std::uint64_t halted = observer_ ? monotonic_ns() : 0;
  const auto outcome = control_.backend().halt(index(), limit_ns);
  if (observer_) observer_->halted(halted, monotonic_ns());
  if (outcome == pvlock::HaltOutcome::kStopped) return false;  // stays "halted" in the report
  if (expired) *expired = outcome == pvlock::HaltOutcome::kExpired;
  state_.store(VcpuState::kRunning);
  return true;
}

std::optional<double> VcpuRunner::cpu_seconds_now() const {
  if (lifecycle_.load() != Lifecycle::kActive) return std::nullopt;
  clockid_t clock{};
  timespec used{};
  if (pthread_getcpuclockid(handle_, &clock) != 0 || clock_gettime(clock, &used) != 0) return std::nullopt;
  return static_cast<double>(used.tv_sec) + static_cast<double>(used.tv_nsec) * 1e-9;
}

ExitCounts VcpuRunner::exit_counts() const {
  ExitCounts counts{};
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
  report.affinity = affinity_;
  return report;
}

}  // namespace lockvisor::machine
