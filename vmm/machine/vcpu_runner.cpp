#include "vmm/machine/vcpu_runner.h"

#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "lockvisor/abi/ucall.h"
#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;

namespace {
// Second field of /proc/thread-self/schedstat: ns this thread spent runnable
// but waiting for a CPU. For a vCPU thread that is its steal time.
std::optional<std::uint64_t> runqueue_wait_ns() {
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (f == nullptr) return std::nullopt;
  unsigned long long running = 0, waiting = 0;
  const int fields = std::fscanf(f, "%llu %llu", &running, &waiting);
  std::fclose(f);
  if (fields != 2) return std::nullopt;
  return waiting;
}
}  // namespace

// ---------------------------------------------------------------- RunControl

RunControl::RunControl(const MachineConfig& config, pvlock::PvBackend& backend, SerialConsole& serial,
                       std::chrono::steady_clock::time_point origin)
    : config_(config), backend_(backend), serial_(serial), origin_(origin) {}

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
    : vcpu_(std::move(vcpu)), apic_id_(apic_id), memory_(memory), control_(control), stats_(vcpu_.stats_fd()) {
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

void VcpuRunner::thread_main(std::vector<int> affinity) {
  try {
    if (!affinity.empty()) host::set_thread_affinity(pthread_self(), affinity);
  } catch (const Error& e) {
    control_.end(Outcome::kHostError, e.what());
  }
  affinity_ = host::thread_affinity(pthread_self());
  spdlog::debug("vCPU {} (APIC ID {}) starts on host CPUs {}", index(), apic_id_, host::format_cpu_list(affinity_));
  const auto wait_at_start = runqueue_wait_ns();
  state_.store(VcpuState::kRunning);
  control_.note_entry();
  while (!control_.stopping()) {
    const int rc = vcpu_.run();
    if (rc == -EINTR || rc == -EAGAIN) {
      count(ExitKind::kSignal);
      continue;
    }
    if (rc != 0) {
      control_.end(Outcome::kHostError, fmt::format("vCPU {}: KVM_RUN failed: {}", index(), std::strerror(-rc)));
      break;
    }
    control_.note_exit();
    rip_.store(vcpu_.sync_regs().rip, std::memory_order_relaxed);
    if (!handle_exit()) break;
  }
  timespec cpu{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  cpu_seconds_ = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) == 0) {
    voluntary_switches_ = static_cast<std::uint64_t>(usage.ru_nvcsw);
    involuntary_switches_ = static_cast<std::uint64_t>(usage.ru_nivcsw);
  }
  kvm_stats_ = stats_.snapshot();
  if (const auto wait_at_end = runqueue_wait_ns(); wait_at_start && wait_at_end)
    runqueue_wait_ns_ = *wait_at_end - *wait_at_start;
  spdlog::debug("vCPU {} leaves its loop: {}, {:.3f} s CPU, last RIP {:#x}", index(), vcpu_state_name(state_.load()),
                cpu_seconds_, rip());
  finished_.store(true);
  if (on_finished) on_finished();
}

std::string VcpuRunner::where() const { return fmt::format("vCPU {} at RIP {:#x}", index(), rip()); }

bool VcpuRunner::guest_error(std::string what) {
  spdlog::debug("{}: {}", where(), what);
  state_.store(VcpuState::kFaulted);
  control_.end(Outcome::kGuestFault, fmt::format("{}: {}", where(), what));
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
      return guest_error(fmt::format("MMIO {} of {} bytes at GPA {:#x}, outside guest memory",
                                     run->mmio.is_write ? "write" : "read", run->mmio.len, run->mmio.phys_addr));
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
  const auto outcome = control_.backend().halt(index());
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

  switch (io.port) {
    case abi::kPortKvmHypercall:
      count(ExitKind::kHypercall);
      return out ? handle_kvm_hypercall(regs) : true;
    case abi::kPortSbiCall:
      count(ExitKind::kSbi);
      return out ? handle_sbi_call(regs) : true;
    case abi::kPortUcall:
      count(ExitKind::kUcall);
      return out ? handle_ucall(regs.rbx) : true;
    case abi::kPortFault:
      return handle_fault(regs);
    case abi::kPortNop:
      count(ExitKind::kNop);
      return true;
    default:
      break;
  }
  if (io.port >= abi::kPortCom1 && io.port < abi::kPortCom1 + 8) {
    count(ExitKind::kSerial);
    if (out && io.port == abi::kPortCom1) {
      for (std::uint32_t i = 0; i < io.count; ++i) control_.serial().put(index(), static_cast<char>(data[i * io.size]));
    } else if (!out) {
      std::memset(data, io.port == abi::kPortCom1Lsr ? 0x60 : 0, std::size_t{io.size} * io.count);
    }
    return true;
  }
  // Unclaimed port: reads float high, writes are dropped, as on real hardware.
  count(ExitKind::kOtherIo);
  if (!out) std::memset(data, 0xFF, std::size_t{io.size} * io.count);
  return true;
}

bool VcpuRunner::handle_kvm_hypercall(kvm_regs& regs) {
  const std::uint64_t nr = regs.rax;
  last_hypercall_.store(nr, std::memory_order_relaxed);
  std::int64_t result = abi::kKvmEnosys;
  bool keep_running = true;
  auto& backend = control_.backend();
  switch (nr) {
    case abi::kHcKickCpu:
      if (control_.config().pv_unhalt) {
        // a0 (RBX) is KVM's reserved flags word: ignored, as KVM does.
        backend.kick(index(), control_.apic_to_index(regs.rcx));
        result = abi::kKvmSuccess;  // KVM returns 0 even when no vCPU has that APIC ID
      }
      break;
    case abi::kHcHalt:
      keep_running = halt();
      result = abi::kKvmSuccess;
      break;
    case abi::kHcQueryHalted: {
      const int target = control_.apic_to_index(regs.rbx);
      result = target < 0 ? abi::kKvmEinval
                          : ((backend.latch_state(static_cast<unsigned>(target)) & pvlock::KickLatch::kHalted) ? 1 : 0);
      break;
    }
    default:
      break;
  }
  regs.rax = static_cast<std::uint64_t>(result);
  vcpu_.commit_sync_regs();
  return keep_running;
}

bool VcpuRunner::handle_sbi_call(kvm_regs& regs) {
  const auto eid = static_cast<std::uint32_t>(regs.rax);
  const auto fid = static_cast<std::uint32_t>(regs.rbx);
  const auto& config = control_.config();
  last_hypercall_.store((std::uint64_t{eid} << 32) | fid, std::memory_order_relaxed);
  auto is_pvlock = [&](std::uint64_t id) {
    return id == abi::kSbiExtPvlock || id == abi::kSbiExtPvlockLegacy || id == config.sbi_experimental_eid;
  };
  std::int64_t error = abi::kSbiErrNotSupported;
  std::int64_t value = 0;
  if (eid == abi::kSbiExtBase && fid == abi::kSbiBaseProbeExtension) {
    error = abi::kSbiSuccess;
    value = (is_pvlock(regs.rcx) && config.sbi_pvlock) ? 1 : 0;
  } else if (is_pvlock(eid) && config.sbi_pvlock && fid == abi::kSbiPvlockKickCpu) {
    const int target = control_.apic_to_index(regs.rcx);
    if (target < 0) {
      control_.backend().kick(index(), -1);  // counted as an invalid kick
      error = abi::kSbiErrInvalidParam;
    } else {
      control_.backend().kick(index(), target);
      error = abi::kSbiSuccess;
    }
  }
  regs.rax = static_cast<std::uint64_t>(error);
  regs.rbx = static_cast<std::uint64_t>(value);
  vcpu_.commit_sync_regs();
  return true;
}

bool VcpuRunner::handle_fault(const kvm_regs& regs) {
  static constexpr const char* kNames[32] = {"#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM",
                                             "#DF", "CSO", "#TS", "#NP", "#SS", "#GP", "#PF", "reserved",
                                             "#MF", "#AC", "#MC", "#XM", "#VE", "#CP"};
  const std::uint64_t vector = regs.rbx;
  const char* name = vector < 32 && kNames[vector] != nullptr ? kNames[vector] : "exception";
  rip_.store(regs.rdx, std::memory_order_relaxed);
  std::string what = fmt::format("guest exception {} (vector {}), error code {:#x}, CPL{}", name, vector, regs.rcx,
                                 regs.rdi & 3);
  if (vector == 14) what += fmt::format(", CR2 {:#x}", regs.rsi);
  return guest_error(std::move(what));
}

bool VcpuRunner::handle_ucall(std::uint64_t gpa) {
  const auto ucall = memory_.read<abi::Ucall>(gpa);
  if (!ucall) return guest_error(fmt::format("report channel: structure at GPA {:#x} lies outside guest memory", gpa));
  if (ucall->magic != abi::kUcallMagic) return guest_error("report channel: bad magic");
  // Fixed-capacity strings: never trust a terminator to be there.
  const std::string text(ucall->text, strnlen(ucall->text, sizeof ucall->text));
  switch (ucall->type) {
    case abi::UcallType::kPrint:
      if (control_.config().echo_guest_prints) fmt::print("guest vCPU {}: {}\n", index(), text);
      control_.add_print(fmt::format("vCPU {}: {}", index(), text));
      return true;
    case abi::UcallType::kAssertFail: {
      const std::string file(ucall->file, strnlen(ucall->file, sizeof ucall->file));
      state_.store(VcpuState::kFaulted);
      control_.end(Outcome::kGuestFailed,
                   fmt::format("vCPU {}: guest check failed at {}:{}: {}", index(), file, ucall->args[0], text));
      return false;
    }
    case abi::UcallType::kResult:
      results_.push_back({text, {ucall->args[0]}, ucall->args[1]});
      return true;
    case abi::UcallType::kResultArray: {
      const std::uint64_t count = ucall->args[1];
      if (count > abi::kUcallMaxArrayLength)
        return guest_error(fmt::format("report channel: array '{}' of {} values is too long", text, count));
      const auto bytes = memory_.range(ucall->args[0], count * sizeof(std::uint64_t));
      if (!bytes) return guest_error(fmt::format("report channel: array '{}' lies outside guest memory", text));
      ResultValue value{text, std::vector<std::uint64_t>(count), ucall->args[2]};
      std::memcpy(value.values.data(), bytes->data(), bytes->size());
      results_.push_back(std::move(value));
      return true;
    }
    case abi::UcallType::kCaseBegin:
      cases_.push_back({text, false, false});
      return true;
    case abi::UcallType::kCaseEnd:
      for (auto it = cases_.rbegin(); it != cases_.rend(); ++it) {
        if (it->name == text && !it->ended) {
          it->ended = true;
          it->passed = ucall->args[0] == 1;
          break;
        }
      }
      return true;
    case abi::UcallType::kDone:
      guest_exit_code_ = ucall->args[0];
      state_.store(VcpuState::kDone);
      if (ucall->args[0] != 0)
        control_.end(Outcome::kGuestFailed, fmt::format("vCPU {}: program exited with code {}", index(), ucall->args[0]));
      return false;
  }
  return guest_error(fmt::format("report channel: unknown type {}", static_cast<std::uint32_t>(ucall->type)));
}

VcpuReport VcpuRunner::report() const {
  VcpuReport report;
  report.index = index();
  report.apic_id = apic_id_;
  report.final_state = state_.load();
  const auto latch = control_.backend().latch_state(index());
  report.kick_pending = (latch & pvlock::KickLatch::kPending) != 0;
  if ((latch & pvlock::KickLatch::kHalted) && report.final_state == VcpuState::kRunning)
    report.final_state = VcpuState::kHalted;
  report.last_hypercall = last_hypercall();
  report.rip = rip();
  report.guest_exit_code = guest_exit_code_;
  const auto& c = control_.backend().counters(index());
  report.pv = {{"halts", c.halts.load()},
               {"halts_immediate", c.halts_immediate.load()},
               {"halts_polled", c.halts_polled.load()},
               {"halts_woken", c.halts_woken.load()},
               {"kicks_sent", c.kicks_sent.load()},
               {"kicks_invalid", c.kicks_invalid.load()},
               {"kicks_received", c.kicks_received.load()},
               {"kicks_coalesced", c.kicks_coalesced.load()},
               {"kicks_dropped", c.kicks_dropped.load()}};
  report.wake_latency_ns = control_.backend().wake_latencies(index());
  report.kvm = kvm_stats_;
  for (std::size_t k = 0; k < exits_.size(); ++k)
    if (exits_[k] != 0) report.exits[kExitKindNames[k]] = exits_[k];
  report.cpu_seconds = cpu_seconds_;
  report.runqueue_wait_ns = runqueue_wait_ns_;
  report.voluntary_switches = voluntary_switches_;
  report.involuntary_switches = involuntary_switches_;
  report.affinity = affinity_;
  report.results = results_;
  report.cases = cases_;
  return report;
}

}  // namespace lockvisor::machine
