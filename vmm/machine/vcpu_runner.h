// One vCPU's host thread: its life cycle, its exit loop, parks and trace
// hooks, and what it observed for the report.
//
// The loop enters the guest, decodes each exit (vcpu_exit.h) and hands port
// and MMIO exits to the devices of the VM's I/O bus (io_bus.h), which act on
// the vCPU through the VcpuContext this class implements.
//
// The vCPU's state, as the report and the state lines show it (VcpuState,
// run_result.h); only this vCPU's thread changes it:
//
//   from       event                                   to
//   kStarting  the thread enters the loop               kRunning
//   kRunning   a VMM-side halt begins (backend halt)    kHalted
//   kHalted    the halt ends with a wake-up             kRunning
//   kHalted    the run stops during the halt            kHalted   (final)
//   kRunning   the program reports done                 kDone     (final)
//   any        a guest fault or failed check            kFaulted  (final)
//   kStarting, kRunning  the loop ends otherwise        kStopped  (final)
//
// Independently, the thread itself is kCreated, then kActive once start()
// made it, then kLeft once it has left its loop (after which report() may be
// called). The RIP is known once the guest has exited at least once.
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
#include "vmm/devices/exit_kind.h"
#include "vmm/machine/freestanding_ports.h"
#include "vmm/devices/io_bus.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"
#include "vmm/machine/serial_console.h"
#include "vmm/machine/vcpu_observer.h"
#include "vmm/machine/vcpu_park.h"
#include "vmm/pvlock/pv_backend.h"
#include "vmm/runstate/runstate_page.h"

namespace lockvisor::machine {

// One vCPU: its KVM object and what its thread observed.
class VcpuRunner final : private GuestProgramContext {
 public:
  // `bus` (the VM's devices) and `control` outlive the runner.
  VcpuRunner(kvm::Vcpu vcpu, unsigned apic_id, const IoBus& bus, RunControl& control);

  void start(std::vector<int> affinity);
  void join();
  // Takes the thread out of KVM_RUN now (immediate_exit + SIGUSR1); the
  // loop then serves a pending park or sees the run stopping. One with no
  // request behind it costs the guest one exit and nothing else.
  void interrupt();

  // Deschedules this vCPU for `duration` as the host scheduler would
  // (vcpu_park.h): false once the run is stopping or the vCPU has finished.
  bool inject_preemption(std::chrono::nanoseconds duration);
  // Holds the vCPU out of the guest until resume(). False once stopping.
  bool pause();
  void resume();
  bool paused() const { return park_.paused(); }
  // Held out of the guest right now by a pause or an injected preemption.
  bool parked() const { return park_.held(); }
  // Host CPU time the vCPU thread has used so far (guest and VMM), seconds;
  // nullopt before it starts or once it has left its loop. Callable from the
  // monitor thread while the run lasts (the thread is joined only after).
  std::optional<double> cpu_seconds_now() const;
  // Exits so far, by kind (kExitKindNames order); callable from any thread.
  ExitCounts exit_counts() const;
  ParkCounts park_counts() const { return park_.counts(); }
  // Ends every park for good (the run is stopping).
  void stop_parking() { park_.stop(); }
  // The byte a park sets while it lasts: the `preempted` flag of this
  // vCPU's steal-time record in guest memory, so that the guest's
  // vcpu_is_preempted() sees an injected preemption as it sees a host one
  // on hardware KVM (which sets that flag whenever it descheduled a runnable
  // vCPU and clears it when the vCPU runs again). Null: parks are invisible
  // to the guest (a Linux guest, whose record is where it chose, or
  // --no-steal-time). Set before start().
  void set_park_flag(std::uint8_t* flag) { park_flag_ = flag; }
  // Invoked on the vCPU thread for every interval it spent parked (the
  // timeline); set before start().
  std::function<void(unsigned vcpu, const ParkInterval&)> on_parked;
  // A targeted preemption point (abi::UcallType::kPreemptPoint), called on
  // this vCPU's thread while the guest waits in the ucall (its probe record
  // is stable): how long to park the vCPU, or a one-line reason to refuse the
  // point (a guest error). Unset, every preemption point is a guest error: a
  // guest cannot park itself without an armed --inject schedule. Set before start().
  using PreemptVerdict = GuestProgramContext::PreemptVerdict;
  std::function<PreemptVerdict(unsigned vcpu, std::span<const std::byte> memory, const std::uint64_t (&args)[3])>
      on_preempt_point;

  // Who watches this vCPU's loop (vcpu_observer.h; the timeline); set
  // before start(). Null: nothing is watched, no clock is read.
  void set_observer(VcpuObserver* observer) { observer_ = observer; }
  // The vCPU's KVM fd, for reads while it is not in KVM_RUN (KVM_GET_MSRS).
  int vcpu_fd() const { return vcpu_.fd(); }
  // The vCPU thread's kernel thread id once it has started (0 before).
  pid_t thread_id() const { return thread_id_.load(std::memory_order_acquire); }

  unsigned index() const override { return vcpu_.index(); }
  bool finished() const { return lifecycle_.load() == Lifecycle::kLeft; }
  VcpuState state() const { return state_.load(); }
  std::uint64_t last_hypercall() const { return last_hypercall_.load(std::memory_order_relaxed); }
  std::uint64_t rip() const { return exited() ? rip_.load(std::memory_order_relaxed) : 0; }
  // Whether the guest has exited to the VMM at least once (rip() is
  // meaningful only then).
  bool exited() const { return rip_.load(std::memory_order_relaxed) != kNoRip; }
  // "vCPU 1: halted, kick not pending, last hypercall 0x4c560001, RIP 0x10bb34,
  // KVM_RUN returns: 52, by a signal: 1" ("no exit yet" instead of a
  // RIP: no guest exit so far): the state lines of deadlock, timeout
  // and signal reports. Callable from any thread while the vCPU runs.
  std::string state_line() const;
  // Called by the monitor once the thread has ended; moves the results and
  // cases out (call once).
  VcpuReport report();

  // Invoked on the vCPU thread when it leaves its loop.
  std::function<void()> on_finished;

 private:
  enum class Lifecycle { kCreated, kActive, kLeft };
  static constexpr std::uint64_t kNoRip = ~std::uint64_t{0};

  void thread_main(std::vector<int> affinity);
  void run_loop();
  // Sleeps through a pending park; false when the run is stopping.
  bool serve_park();
  // Raises or clears the park flag (set_park_flag), if there is one.
  void show_parked(bool parked);
  // Clears immediate_exit after an interrupt or a served request (see the .cpp).
  void rearm_entry();
  // Registers this thread with the run-state page and takes the first sample.
  void join_runstate(runstate::RunStatePage& page);
  // The same for a page published while the thread ran; false when the run
  // is stopping.
  bool join_late_runstate();
  // Each returns false when this vCPU must leave its loop.
  bool handle_exit();
  bool handle_port_io(const VcpuExit::PortIo& io);
  bool handle_mmio(const VcpuExit::Mmio& mmio);
  std::string where() const;

  // VcpuContext and GuestProgramContext: what the bus's devices may do.
  kvm_regs& regs() override { return vcpu_.sync_regs(); }
  void commit_regs() override { vcpu_.commit_sync_regs(); }
  bool guest_error(std::string what) override;
  bool host_error(std::string what) override;
  bool halt(std::uint64_t limit_ns, bool* expired) override;
  bool end_run(std::uint64_t status, std::string why) override;
  void note_hypercall(std::uint64_t number) override { last_hypercall_.store(number, std::memory_order_relaxed); }
  void note_fault_rip(std::uint64_t rip) override { rip_.store(rip, std::memory_order_relaxed); }
  bool program_done(std::uint64_t exit_code) override;
  bool program_failed(std::string what) override;
  PreemptVerdict preempt_point(std::span<const std::byte> memory, const std::uint64_t (&args)[3]) override;
  void park(std::chrono::nanoseconds duration) override { park_.inject(duration); }
  // The last resort of a failed allocation: ends the run without building a
  // message when even that fails.
  bool host_error_noexcept(const char* what, const char* detail = "") noexcept;

  kvm::Vcpu vcpu_;
  unsigned apic_id_;
  const IoBus& bus_;
  RunControl& control_;
  kvm::BinaryStats stats_;
  std::thread thread_;
  pthread_t handle_{};
  std::atomic<Lifecycle> lifecycle_{Lifecycle::kCreated};
  std::atomic<pid_t> thread_id_{0};
  std::atomic<VcpuState> state_{VcpuState::kStarting};
  std::atomic<std::uint64_t> last_hypercall_{0};
  std::atomic<std::uint64_t> rip_{kNoRip};
  VcpuPark park_;
  std::uint8_t* park_flag_ = nullptr;

  // A load and a store, not a read-modify-write: this thread is the only
  // writer, so the increment costs what a plain one does and a reader on
  // another thread (the control socket's stats) still sees whole values.
  void count(ExitKind kind) {
    auto& counter = exits_[static_cast<std::size_t>(kind)];
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    last_exit_ = kind;
  }
  VcpuObserver* observer_ = nullptr;
  ExitKind last_exit_ = ExitKind::kSignal;

  // Written by the vCPU thread only; read live by exit_counts().
  std::array<std::atomic<std::uint64_t>, kExitKindCount> exits_{};
  double cpu_seconds_ = 0;
  std::optional<std::uint64_t> runqueue_wait_ns_;
  std::uint64_t voluntary_switches_ = 0;
  std::uint64_t involuntary_switches_ = 0;
  std::atomic<bool> runstate_due_{false};  // the page was published after this thread started
  std::optional<VcpuRunStateCounts> runstate_at_start_;  // registered: the first sample
  std::optional<VcpuRunStateCounts> runstate_;           // the counts while registered
  std::vector<int> affinity_;
  std::map<std::string, std::uint64_t> kvm_stats_;
};

// Installs the no-op SIGUSR1 handler (without SA_RESTART) used to interrupt
// KVM_RUN. Idempotent.
void install_vcpu_interrupt_signal();

}  // namespace lockvisor::machine
