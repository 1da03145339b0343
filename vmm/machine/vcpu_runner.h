// The per-vCPU exit loop and everything it shares with the monitor thread.
#pragma once
#include <pthread.h>

#include <array>
#include <atomic>
#include <iterator>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "vmm/kvm/binary_stats.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/report_channel.h"
#include "vmm/machine/run_result.h"
#include "vmm/machine/serial_console.h"
#include "vmm/machine/vcpu_park.h"
#include "vmm/pvlock/hypercall_table.h"
#include "vmm/pvlock/pv_backend.h"
#include "vmm/runstate/runstate_page.h"
#include "vmm/trace/preemption_tracker.h"
#include "vmm/trace/trace_buffer.h"

namespace lockvisor::machine {

// How lockvisor classifies exits (counted per vCPU, reported by name).
enum class ExitKind : unsigned {
  kSignal, kHlt, kMmio, kIntr, kHypercall, kSbi, kUcall, kNop, kSerial, kOtherIo, kFault, kCount
};
inline constexpr const char* kExitKindNames[] = {"signal", "hlt",  "mmio", "intr",   "hypercall", "sbi",
                                                 "ucall",  "nop",  "serial", "other_io", "fault"};
static_assert(std::size(kExitKindNames) == static_cast<std::size_t>(ExitKind::kCount));

// State shared by all vCPU threads of one run.
class RunControl {
 public:
  RunControl(const MachineConfig& config, pvlock::PvBackend& backend, SerialConsole& serial,
             std::chrono::steady_clock::time_point origin);

  const MachineConfig& config() const { return config_; }
  pvlock::PvBackend& backend() { return backend_; }
  // Decodes and answers the PV hypercalls (ports 0xE4 and 0xE5).
  const pvlock::HypercallTable& hypercalls() const { return *hypercalls_; }
  SerialConsole& serial() { return serial_; }
  // The VM-wide counters config().limits apply to.
  GuestBudget& budget() { return budget_; }
  GuestUsage usage() const;
  bool stopping() const { return stopping_.load(); }

  // Ends the run with `outcome` unless an earlier call already decided it.
  void end(Outcome outcome, std::string reason, std::vector<std::string> details = {});
  Outcome outcome() const;
  std::string reason() const;
  std::vector<std::string> details() const;
  bool decided() const;

  // Registered by the Machine: takes every vCPU out of KVM_RUN and its halts.
  void set_stop_hook(std::function<void()> hook) { stop_hook_ = std::move(hook); }

  void note_entry();
  void note_exit();
  double seconds_to_first_entry() const { return first_entry_s_.load(); }
  double seconds_to_first_exit() const { return first_exit_s_.load(); }

  int apic_to_index(std::uint64_t apic_id) const;
  void map_apic(unsigned apic_id, unsigned index);

  void add_print(std::string line);
  std::vector<std::string> prints() const;

  // The vCPU run-state page: the live one (nullptr: a zero page) and where
  // the guest sees it. Set once by the Machine before any vCPU starts.
  void set_runstate_page(runstate::RunStatePage* page, std::uint64_t gpa, std::uint64_t bytes) {
    runstate_page_ = page;
    runstate_gpa_ = gpa;
    runstate_bytes_ = bytes;
  }
  runstate::RunStatePage* runstate_page() const { return runstate_page_; }
  bool in_runstate_page(std::uint64_t gpa) const { return gpa >= runstate_gpa_ && gpa - runstate_gpa_ < runstate_bytes_; }

 private:
  const MachineConfig& config_;
  pvlock::PvBackend& backend_;
  SerialConsole& serial_;
  GuestBudget budget_;
  std::chrono::steady_clock::time_point origin_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  bool decided_ = false;
  Outcome outcome_ = Outcome::kCompleted;
  std::string reason_;
  std::vector<std::string> details_;
  std::vector<std::string> prints_;
  std::function<void()> stop_hook_;
  std::atomic<double> first_entry_s_{0};
  std::atomic<double> first_exit_s_{0};
  std::vector<int> apic_map_ = std::vector<int>(256, -1);
  std::unique_ptr<pvlock::HypercallTable> hypercalls_;  // reads apic_map_ through apic_to_index()
  runstate::RunStatePage* runstate_page_ = nullptr;
  std::uint64_t runstate_gpa_ = 0;
  std::uint64_t runstate_bytes_ = 0;
};

// One vCPU: its KVM object and what its thread observed.
class VcpuRunner {
 public:
  VcpuRunner(kvm::Vcpu vcpu, unsigned apic_id, kvm::GuestMemory& memory, RunControl& control);

  void start(std::vector<int> affinity);
  void join();
  // Kicks the thread out of KVM_RUN (immediate_exit + SIGUSR1).
  void interrupt();

  // Deschedules this vCPU for `duration` as the host scheduler would
  // (vcpu_park.h): false once the run is stopping or the vCPU has finished.
  bool inject_preemption(std::chrono::nanoseconds duration);
  // Holds the vCPU out of the guest until resume(). False once stopping.
  bool pause();
  void resume();
  bool paused() const { return park_.paused(); }
  // Host CPU time the vCPU thread has used so far (guest and VMM), seconds;
  // nullopt before it starts or once it has left its loop. Callable from the
  // monitor thread while the run lasts (the thread is joined only after).
  std::optional<double> cpu_seconds_now() const;
  // Exits so far, by kind (kExitKindNames order); callable from any thread.
  std::array<std::uint64_t, static_cast<std::size_t>(ExitKind::kCount)> exit_counts() const;
  ParkCounts park_counts() const { return park_.counts(); }
  // Ends every park for good (the run is stopping).
  void stop_parking() { park_.stop(); }
  // Invoked on the vCPU thread for every interval it spent parked (the
  // timeline); set before start().
  std::function<void(unsigned vcpu, const ParkInterval&)> on_parked;
  // A targeted preemption point (abi::UcallType::kPreemptPoint), called on
  // this vCPU's thread while the guest waits in the ucall (its probe record
  // is stable): how long to park the vCPU, or a one-line reason to refuse the
  // point (a guest error). Unset, every preemption point is a guest error: a
  // guest cannot park itself without an armed --inject schedule. Set before start().
  struct PreemptVerdict {
    std::chrono::nanoseconds park{0};
    std::string refused;
  };
  std::function<PreemptVerdict(unsigned vcpu, std::span<const std::byte> memory, const std::uint64_t (&args)[3])>
      on_preempt_point;

  // --trace: this vCPU's timeline lane (guest, exits, halts, parks) and,
  // with a live run-state page, its host lane and record reader; written by
  // its thread only; set before start(). Null: no tracing, no cost.
  void set_trace(trace::TraceBuffer* lane, trace::TraceBuffer* host_lane, trace::PreemptionTracker* preemptions) {
    trace_ = lane;
    trace_host_ = host_lane;
    trace_preemptions_ = preemptions;
  }
  // The vCPU's KVM fd, for reads while it is not in KVM_RUN (KVM_GET_MSRS).
  int vcpu_fd() const { return vcpu_.fd(); }
  // The vCPU thread's kernel thread id once it has started (0 before).
  pid_t thread_id() const { return thread_id_.load(std::memory_order_acquire); }

  unsigned index() const { return vcpu_.index(); }
  bool finished() const { return finished_.load(); }
  VcpuState state() const { return state_.load(); }
  std::uint64_t last_hypercall() const { return last_hypercall_.load(std::memory_order_relaxed); }
  std::uint64_t rip() const { return rip_.load(std::memory_order_relaxed); }
  // Whether the guest has exited to the VMM at least once (rip() is
  // meaningful only then).
  bool exited() const { return exited_.load(std::memory_order_relaxed); }
  // "vCPU 1: halted, kick not pending, last hypercall 0x4c560001, RIP 0x10bb34"
  // ("no exit yet" instead of a RIP): the state lines of deadlock, timeout
  // and signal reports. Callable from any thread while the vCPU runs.
  std::string state_line() const;
  // Called by the monitor once the thread has ended; moves the results and
  // cases out (call once).
  VcpuReport report();

  // Invoked on the vCPU thread when it leaves its loop.
  std::function<void()> on_finished;

 private:
  void thread_main(std::vector<int> affinity);
  void run_loop();
  // Each returns false when this vCPU must leave its loop.
  // Out of KVM_RUN now (immediate_exit + SIGUSR1), for a park.
  void kick_out();
  // Sleeps through a pending park; false when the run is stopping.
  bool serve_park();
  bool handle_exit();
  bool handle_io();
  // Ports 0xE4 and 0xE5: the hypercall table decides, this applies.
  bool handle_hypercall(pvlock::Transport transport, kvm_regs& regs);
  bool handle_ucall(std::uint64_t gpa);
  bool handle_fault(const kvm_regs& regs);
  bool handle_serial_out(const std::uint8_t* data, std::uint32_t size, std::uint32_t count);
  bool halt();
  bool guest_error(std::string what);
  bool host_error(const char* what, const char* detail = "") noexcept;
  std::string where() const;

  kvm::Vcpu vcpu_;
  unsigned apic_id_;
  kvm::GuestMemory& memory_;
  RunControl& control_;
  kvm::BinaryStats stats_;
  std::thread thread_;
  pthread_t handle_{};
  std::atomic<bool> started_{false};
  std::atomic<pid_t> thread_id_{0};
  std::atomic<bool> finished_{false};
  std::atomic<VcpuState> state_{VcpuState::kStarting};
  std::atomic<std::uint64_t> last_hypercall_{0};
  std::atomic<std::uint64_t> rip_{0};
  std::atomic<bool> exited_{false};
  VcpuPark park_;

  // A load and a store, not a read-modify-write: this thread is the only
  // writer, so the increment costs what a plain one does and a reader on
  // another thread (the control socket's stats) still sees whole values.
  void count(ExitKind kind) {
    auto& counter = exits_[static_cast<std::size_t>(kind)];
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    last_exit_ = kind;
  }
  // The exit just handled, from `left` (KVM_RUN returned) to now.
  void trace_exit(std::uint64_t left);
  // Reads this vCPU's run-state record into its host lane (--trace, live page).
  void trace_preemptions();
  trace::TraceBuffer* trace_ = nullptr;
  trace::TraceBuffer* trace_host_ = nullptr;
  trace::PreemptionTracker* trace_preemptions_ = nullptr;
  ExitKind last_exit_ = ExitKind::kSignal;

  // Written by the vCPU thread only; read live by exit_counts().
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(ExitKind::kCount)> exits_{};
  GuestReport guest_report_;
  std::optional<std::uint64_t> guest_exit_code_;
  double cpu_seconds_ = 0;
  std::optional<std::uint64_t> runqueue_wait_ns_;
  std::uint64_t voluntary_switches_ = 0;
  std::uint64_t involuntary_switches_ = 0;
  std::optional<VcpuRunStateCounts> runstate_at_start_;  // registered: the first sample
  std::optional<VcpuRunStateCounts> runstate_;           // the counts while registered
  std::optional<metrics::ThreadUsage> window_start_, window_end_;  // at the guest's window marks
  std::vector<int> affinity_;
  std::map<std::string, std::uint64_t> kvm_stats_;
};

// Installs the no-op SIGUSR1 handler (without SA_RESTART) used to interrupt
// KVM_RUN. Idempotent.
void install_vcpu_interrupt_signal();

}  // namespace lockvisor::machine
