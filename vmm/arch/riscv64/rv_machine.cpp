#include "vmm/arch/riscv64/rv_machine.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/sbi_lockvisor.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "vmm/arch/riscv64/rv_vcpu.h"
#include "vmm/arch/riscv64/sbi_exit.h"
#include "vmm/host/cpu_set.h"
#include "vmm/kvm/binary_stats.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/machine/report_channel.h"
#include "vmm/pvlock/hypercall_table.h"
#include "vmm/util/error.h"
#include "vmm/util/mapping.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::arch::riscv64 {

namespace {

using Clock = std::chrono::steady_clock;

// The signal that takes a vCPU thread out of KVM_RUN (a proposed kick, the
// run's end). Its handler does nothing: the point is the EINTR.
constexpr int kKickSignal = SIGUSR1;
void on_kick_signal(int) {}

std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted.store(true); }

// The SBI PVLOCK calls of the hypercall table, onto RvKicks. Only kick and
// kick_if_halted are reached from the SBI transport; the rest answers as a
// backend that never halts in the VMM (WFI blocks in KVM).
class RvPvBackend final : public pvlock::PvBackend {
 public:
  RvPvBackend(RvKicks& kicks, unsigned harts) : kicks_(kicks), counters_(harts) {}
  std::string_view name() const override { return "riscv-kvm"; }
  pvlock::VmSetup vm_setup() const override { return {}; }
  pvlock::KickResult kick(unsigned from, int target) override {
    if (target < 0) {
      counters_[from].kicks_invalid.fetch_add(1, std::memory_order_relaxed);
      return pvlock::KickResult::kNoSuchTarget;
    }
    kicks_.kick(from, static_cast<unsigned>(target));
    return pvlock::KickResult::kDelivered;
  }
  pvlock::KickResult kick_if_halted(unsigned from, int target) override { return kick(from, target); }
  pvlock::HaltOutcome halt(unsigned, std::uint64_t) override { return pvlock::HaltOutcome::kStopped; }
  void stop() override {}
  pvlock::VcpuPvState vcpu_state(unsigned vcpu) const override {
    return {.halted = false, .kick_pending = kicks_.latched(vcpu), .known = false};
  }
  std::uint64_t epoch() const override { return 0; }
  const pvlock::VcpuPvCounters& counters(unsigned vcpu) const override { return counters_[vcpu]; }
  std::vector<std::uint64_t> wake_latencies(unsigned) const override { return {}; }

 private:
  RvKicks& kicks_;
  std::vector<pvlock::VcpuPvCounters> counters_;
};

struct Hart {
  std::unique_ptr<RvVcpu> vcpu;
  kvm::BinaryStats stats;
  std::thread thread;
  std::atomic<bool> finished{false};
  std::string line;  // console output up to its newline
  std::uint64_t sbi_exits = 0;
  std::unique_ptr<machine::GuestReport> report;
  std::atomic<bool> done{false};  // reported DONE
  std::uint64_t exit_code = 0;
  std::vector<int> affinity;
};

class Run {
 public:
  explicit Run(const RvMachineConfig& config) : config_(config) {}
  RvRunResult go();

 private:
  void vcpu_loop(unsigned index);
  // Pins the calling vCPU thread as config_.pcpus says and records where it
  // may run; false (the run ended as a host error) when it cannot.
  bool pin(unsigned index);
  // One forwarded SBI call; false when the run must end.
  bool serve_sbi(unsigned index, const SbiCall& call);
  // One report-channel message; false when the run must end.
  bool serve_ucall(unsigned index, std::uint64_t gpa);
  void console(unsigned index, char c);
  void finish(machine::Outcome outcome, std::string reason);
  bool deadlocked();

  const RvMachineConfig& config_;
  std::vector<std::unique_ptr<Hart>> harts_;
  std::unique_ptr<RvKicks> kicks_;
  std::unique_ptr<RvPvBackend> backend_;
  std::unique_ptr<pvlock::HypercallTable> table_;
  machine::GuestLimits limits_;
  machine::GuestBudget budget_{limits_};
  std::span<const std::byte> ram_;
  std::mutex mutex_;  // the result's outcome and reason, the console
  bool ended_ = false;
  std::atomic<bool> stop_{false};
  // Set once every vCPU thread exists: a proposed kick signals its target's
  // thread, which must be there to be signalled.
  std::atomic<bool> started_{false};
  RvRunResult result_;
};

void Run::finish(machine::Outcome outcome, std::string reason) {
  const std::lock_guard lock(mutex_);
  if (ended_) return;
  ended_ = true;
  result_.outcome = outcome;
  result_.reason = std::move(reason);
  stop_.store(true);
}

void Run::console(unsigned index, char c) {
  Hart& h = *harts_[index];
  if (c != '\n') {
    h.line.push_back(c);
    if (h.line.size() < 4096) return;
  }
  const std::lock_guard lock(mutex_);
  result_.console += h.line + "\n";
  std::fputs((h.line + "\n").c_str(), stdout);
  std::fflush(stdout);
  h.line.clear();
}

bool Run::serve_sbi(unsigned index, const SbiCall& call) {
  kvm_run& run = harts_[index]->vcpu->run_page();
  if (call.eid == abi::kSbiExtLegacyConsolePutchar) {
    console(index, static_cast<char>(call.args[0]));
    answer_sbi(run, abi::kSbiSuccess, 0);
    return true;
  }
  if (call.eid == abi::kSbiExtLockvisor) {
    switch (call.fid) {
      case abi::kLvSbiPutchar:
        console(index, static_cast<char>(call.args[0]));
        answer_sbi(run, abi::kSbiSuccess, 0);
        return true;
      case abi::kLvSbiKickAck:
        answer_sbi(run, abi::kSbiSuccess, kicks_->acknowledge(index) ? 1 : 0);
        return true;
      case abi::kLvSbiQueryHalted: {
        if (call.args[0] >= harts_.size()) {
          answer_sbi(run, abi::kSbiErrInvalidParam, 0);
          return true;
        }
        const auto blocking = harts_[call.args[0]]->stats.value("blocking");
        if (!blocking) {
          answer_sbi(run, abi::kSbiErrNotSupported, 0);
        } else {
          answer_sbi(run, abi::kSbiSuccess, *blocking != 0 ? 1 : 0);
        }
        return true;
      }
      case abi::kLvSbiUcall:
        answer_sbi(run, abi::kSbiSuccess, 0);
        return serve_ucall(index, call.args[0]);
      case abi::kLvSbiTrap:
        finish(machine::Outcome::kGuestFault,
               fmt::format("guest fault on hart {}: scause {:#x}, sepc {:#x}, stval {:#x}", index, call.args[0],
                           call.args[1], call.args[2]));
        return false;
      default:
        break;  // anything new: answered as unknown below
    }
  }
  const pvlock::HypercallResult answer = table_->dispatch(pvlock::Transport::kSbi, to_hypercall_input(call, index));
  const SbiRet ret = to_sbiret(answer.output);
  answer_sbi(run, ret.error, ret.value);
  return true;
}

bool Run::serve_ucall(unsigned index, std::uint64_t gpa) {
  Hart& h = *harts_[index];
  const machine::UcallAction action = h.report->handle(ram_, gpa);
  using Kind = machine::UcallAction::Kind;
  switch (action.kind) {
    case Kind::kPrint:
      for (char c : action.text) console(index, c);
      console(index, '\n');
      return true;
    case Kind::kAssertFailed:
      finish(machine::Outcome::kGuestFailed, fmt::format("hart {}: {}", index, action.text));
      return false;
    case Kind::kGuestError:
      finish(machine::Outcome::kGuestFault, fmt::format("hart {}: {}", index, action.text));
      return false;
    case Kind::kDone: {
      h.exit_code = action.exit_code;
      h.done.store(true);
      if (action.exit_code != 0) {
        finish(machine::Outcome::kGuestFailed,
               fmt::format("hart {}'s program exited with code {}", index, action.exit_code));
        return false;
      }
      bool all = true;
      for (const auto& other : harts_) all = all && other->done.load();
      if (all) finish(machine::Outcome::kCompleted, "");
      return true;  // a hart that is done spins (no WFI after DONE) until the others are
    }
    default:
      return true;
  }
}

bool Run::pin(unsigned index) {
  Hart& h = *harts_[index];
  try {
    const auto cpus = host::thread_cpus(config_.pcpus, index, /*spread=*/true);
    if (!cpus.empty()) host::set_thread_affinity(pthread_self(), cpus);
  } catch (const Error& e) {
    finish(machine::Outcome::kHostError, fmt::format("hart {}: {}", index, e.what()));
    return false;
  }
  h.affinity = host::thread_affinity(pthread_self());
  return true;
}

void Run::vcpu_loop(unsigned index) {
  Hart& h = *harts_[index];
  if (!pin(index)) {
    h.finished.store(true);
    return;
  }
  while (!started_.load()) std::this_thread::yield();
  while (!stop_.load()) {
    const int err = h.vcpu->run();
    if (err == EINTR || err == EAGAIN) continue;
    if (err == EFAULT) {
      // RISC-V KVM 6.1 delegates only some exceptions to the guest
      // (breakpoint, misaligned fetch, ecall, page faults); any other trap
      // in VS-mode, an illegal instruction first of all, fails KVM_RUN
      // with EFAULT instead of reaching the guest's trap vector.
      finish(machine::Outcome::kGuestFault,
             fmt::format("guest fault on hart {}: a trap RISC-V KVM does not pass to the guest (an illegal "
                         "instruction?) at pc {:#x}",
                         index, h.vcpu->pc()));
      break;
    }
    if (err != 0) {
      finish(machine::Outcome::kHostError, fmt::format("KVM_RUN on vCPU {}: {}", index, std::strerror(err)));
      break;
    }
    const RvExit exit = decode_rv_exit(h.vcpu->run_page(), h.vcpu->run_bytes());
    if (exit.is_sbi) {
      ++h.sbi_exits;
      if (!serve_sbi(index, exit.sbi)) break;
      continue;
    }
    using Kind = kvm::VcpuExit::Kind;
    switch (exit.common.kind) {
      case Kind::kIntr:
        continue;
      case Kind::kSystemEvent: {
        // SBI SRST: the guest powered the machine off. RISC-V KVM passes
        // SRST's reason as the event's first datum; a reset, or the reason
        // "system failure", is a failed run.
        const auto& event = h.vcpu->run_page().system_event;
        const std::uint64_t reason = event.ndata >= 1 ? event.data[0] : abi::kSbiSrstReasonNone;
        const bool ok = exit.common.system_event == KVM_SYSTEM_EVENT_SHUTDOWN && reason == abi::kSbiSrstReasonNone;
        finish(ok ? machine::Outcome::kCompleted : machine::Outcome::kGuestFailed,
               fmt::format("hart {} ended the run with SBI SRST (system event {}, reason {})", index,
                           exit.common.system_event, reason));
        break;
      }
      case Kind::kMmio:
        finish(machine::Outcome::kGuestFault,
               fmt::format("hart {}: access to GPA {:#x}, which is no RAM and no device", index, exit.common.mmio.gpa));
        break;
      case Kind::kMalformed:
        finish(machine::Outcome::kGuestFault, fmt::format("hart {}: {}", index, exit.common.what));
        break;
      default:
        finish(machine::Outcome::kGuestFault,
               fmt::format("hart {}: KVM exit reason {} the RISC-V VMM does not serve", index, exit.common.reason));
        break;
    }
    break;
  }
  h.finished.store(true);
}

// Every vCPU that has not reported DONE is blocked in WFI inside KVM with no
// sticky kick latched: nobody is left to kick anyone. A proposed kick that
// was lost leaves exactly this.
bool Run::deadlocked() {
  bool any_waiting = false;
  for (unsigned i = 0; i < harts_.size(); ++i) {
    if (harts_[i]->done.load()) continue;
    const auto blocking = harts_[i]->stats.value("blocking");
    if (!blocking || *blocking == 0 || kicks_->latched(i)) return false;
    any_waiting = true;
  }
  return any_waiting;
}

RvRunResult Run::go() {
  const auto start = Clock::now();
  const unsigned n = config_.boot.harts;
  UniqueFd kvm_fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm_fd.valid()) fail_host("cannot open /dev/kvm: {}", std::strerror(errno));
  UniqueFd vm(::ioctl(kvm_fd.get(), KVM_CREATE_VM, 0));
  if (!vm.valid()) fail_host("KVM_CREATE_VM: {}", std::strerror(errno));
  const int run_bytes = ::ioctl(kvm_fd.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  if (run_bytes <= 0) fail_host("KVM_GET_VCPU_MMAP_SIZE: {}", std::strerror(errno));

  const std::uint64_t ram_bytes = config_.memory_mib << 20;
  void* ram = ::mmap(nullptr, ram_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ram == MAP_FAILED) fail_host("cannot map {} MiB of guest RAM: {}", config_.memory_mib, std::strerror(errno));
  const Mapping ram_mapping(ram, ram_bytes);
  ram_ = ram_mapping.bytes();
  const kvm_userspace_memory_region region{.slot = 0,
                                           .flags = 0,
                                           .guest_phys_addr = abi::kRiscvRamBase,
                                           .memory_size = ram_bytes,
                                           .userspace_addr = reinterpret_cast<std::uint64_t>(ram)};
  if (::ioctl(vm.get(), KVM_SET_USER_MEMORY_REGION, &region) != 0)
    fail_host("KVM_SET_USER_MEMORY_REGION: {}", std::strerror(errno));

  for (unsigned i = 0; i < n; ++i) {
    auto h = std::make_unique<Hart>();
    h->vcpu = std::make_unique<RvVcpu>(vm.get(), i, static_cast<std::size_t>(run_bytes));
    h->stats = kvm::BinaryStats(h->vcpu->stats_fd());
    h->report = std::make_unique<machine::GuestReport>(budget_, abi::kRiscvRamBase);
    harts_.push_back(std::move(h));
  }
  RvBootSettings boot = config_.boot;
  boot.timebase_hz = static_cast<std::uint32_t>(harts_[0]->vcpu->timer_frequency());
  result_.timebase_hz = boot.timebase_hz;
  const RvEntry entry = prepare_rv_boot(ram_mapping.bytes(), config_.image, boot);
  harts_[0]->vcpu->set_pc(entry.pc);
  harts_[0]->vcpu->set_a0(entry.a0);
  harts_[0]->vcpu->set_a1(entry.a1);

  kicks_ = std::make_unique<RvKicks>(
      n, config_.kick,
      RvKicks::Hooks{.set_line = [this](unsigned h, bool up) { harts_[h]->vcpu->set_external_interrupt(up); },
                     .interrupt_run = [this](unsigned h) { ::pthread_kill(harts_[h]->thread.native_handle(), kKickSignal); },
                     .blocking = [this](unsigned h) { return harts_[h]->stats.value("blocking").value_or(0) != 0; }});
  backend_ = std::make_unique<RvPvBackend>(*kicks_, n);
  pvlock::HypercallConfig hc;
  hc.sbi_pvlock = (boot.flags & abi::kBootFlagSbiPvlock) != 0;
  hc.sbi_experimental_eid = boot.sbi_experimental_eid;
  hc.sbi_kick_proposed = config_.kick == KickMode::kProposed;
  table_ = pvlock::make_pv_hypercall_table(*backend_, hc, [n](std::uint64_t hart) {
    return hart < n ? static_cast<int>(hart) : -1;
  });

  struct sigaction sa {};
  sa.sa_handler = on_kick_signal;  // no SA_RESTART: KVM_RUN returns EINTR
  ::sigaction(kKickSignal, &sa, nullptr);
  struct sigaction si {};
  si.sa_handler = on_sigint;
  ::sigaction(SIGINT, &si, nullptr);

  for (unsigned i = 0; i < n; ++i) harts_[i]->thread = std::thread([this, i] { vcpu_loop(i); });
  started_.store(true);

  int deadlock_samples = 0;
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (g_interrupted.load()) finish(machine::Outcome::kInterrupted, "interrupted (SIGINT)");
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (config_.timeout_seconds > 0 && elapsed > config_.timeout_seconds)
      finish(machine::Outcome::kTimeout, fmt::format("--timeout {} s expired", config_.timeout_seconds));
    // Two samples 100 ms apart: a WFI that a kick is about to end is not a
    // deadlock; one that nothing ends stays.
    deadlock_samples = deadlocked() ? deadlock_samples + 1 : 0;
    if (deadlock_samples >= 2)
      finish(machine::Outcome::kDeadlock, "deadlock: every vCPU still running is blocked in WFI and no kick is latched");
  }
  for (auto& h : harts_) {
    while (!h->finished.load()) {
      ::pthread_kill(h->thread.native_handle(), kKickSignal);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    h->thread.join();
  }
  for (unsigned i = 0; i < n; ++i) {
    Hart& h = *harts_[i];
    if (!h.line.empty()) result_.console += h.line + "\n";
    RvHartReport r;
    r.pv = kicks_->counts(i);
    r.pv.kicks_invalid = backend_->counters(i).kicks_invalid.load();
    r.acks = kicks_->acks(i);
    r.wfi_exits = h.stats.value("wfi_exit_stat").value_or(0);
    r.sbi_exits = h.sbi_exits;
    r.done = h.done.load();
    r.exit_code = h.exit_code;
    r.affinity = h.affinity;
    r.results = h.report->results();
    r.cases = h.report->cases();
    result_.harts.push_back(r);
  }
  result_.unknown_sbi_calls = table_->unknown_calls(pvlock::Transport::kSbi);
  result_.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result_;
}

}  // namespace

RvRunResult run_rv_machine(const RvMachineConfig& config) { return Run(config).go(); }

}  // namespace lockvisor::arch::riscv64
