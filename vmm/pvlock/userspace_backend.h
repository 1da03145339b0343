// The userspace PV-lock backend: halts block the vCPU thread on its kick
// latch (futex) instead of in KVM; kicks set the target's latch. Works on
// every KVM flavour, including PVM where `vmcall` never reaches anyone.
//
// No call blocks past stop(): halt() sleeps on the vCPU's kick latch, whose
// kStop bit stop() sets (and wakes); the --kick-delay-us wait in kick() sleeps
// on a StopFlag that stop() sets. The Machine calls stop() whenever the run
// ends (its stop hook), so the watchdog and SIGINT/SIGTERM/SIGHUP bound both.
//
// Host knobs (BackendOptions): per-vCPU halt polling with a fixed or KVM-style
// adaptive window (halt_poll.h); directed yield on kick (the kicker gives its
// host CPU away after waking a vCPU that last ran there); boosts (YIELD_TO and
// --kick-boost, vcpu_boost.h), released by the boosted vCPU's next halt, kick
// or YIELD_TO.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "vmm/pvlock/kick_latch.h"
#include "vmm/pvlock/pv_backend.h"

namespace lockvisor::pvlock {

class UserspaceBackend final : public PvBackend {
 public:
  UserspaceBackend(unsigned vcpu_count, BackendOptions options);

  std::string_view name() const override { return "userspace"; }
  static VmSetup setup() { return {}; }  // doorbells only: no irqchip, nothing enforced
  VmSetup vm_setup() const override { return setup(); }
  // One relaxed load per kick: the mode may change while the VM runs.
  KickResult kick(unsigned from, int target) override {
    return deliver(from, target, mode_.load(std::memory_order_relaxed));
  }
  KickMode kick_mode() const override { return mode_.load(std::memory_order_relaxed); }
  std::optional<std::string> set_kick_mode(KickMode mode) override {
    mode_.store(mode, std::memory_order_relaxed);
    return std::nullopt;
  }
  KickResult kick_if_halted(unsigned from, int target) override { return deliver(from, target, KickMode::kLossy); }
  HaltOutcome halt(unsigned self, std::uint64_t limit_ns) override;
  void yield_to(unsigned from, int target) override;
  void stop() override;
  VcpuPvState vcpu_state(unsigned vcpu) const override {
    const std::uint32_t word = latch_state(vcpu);
    return {.halted = (word & KickLatch::kHalted) != 0,
            .kick_pending = (word & KickLatch::kPending) != 0,
            .timed = (word & KickLatch::kTimed) != 0};
  }
  // The raw latch word (KickLatch::kPending | kHalted | kStop): for this
  // backend's own tests only; everyone else reads vcpu_state().
  std::uint32_t latch_state(unsigned vcpu) const { return slots_[vcpu]->latch.state(); }
  std::uint64_t epoch() const override { return epoch_.load(); }
  const VcpuPvCounters& counters(unsigned vcpu) const override { return slots_[vcpu]->counters; }
  std::vector<std::uint64_t> wake_latencies(unsigned vcpu) const override;
  bool observe_kicks(KickObserver* observer) override {
    kick_observer_ = observer;
    return true;
  }

 private:
  KickResult deliver(unsigned from, int target, KickMode mode);
  static constexpr std::size_t kMaxLatencySamples = 1u << 20;
  struct Slot {
    Slot(std::atomic<std::uint64_t>& epoch, HaltPollSetting poll) : latch(epoch), poll(poll) {}
    alignas(64) KickLatch latch;
    KickStamp kick_stamp;                 // when the kick the next consume takes was sent
    std::atomic<int> last_cpu{-1};        // host CPU this vCPU's thread last entered the backend on
    VcpuPvCounters counters;
    HaltPollWindow poll;                          // this vCPU's thread only
    std::vector<std::uint64_t> wake_latency_ns;  // written by this vCPU's thread only
    // --trace: the flow id of the kick the next consume takes (0: none);
    // set by a kicker only when empty, taken by this vCPU's halt.
    std::atomic<std::uint64_t> trace_flow{0};
    std::uint64_t flows_sent = 0;  // this vCPU's kicks that got a flow id (its thread only)
  };
  // --trace: the flow of a kick from `from` to `target`, reported once the
  // kick's fate is known (trace_kick_sent) and when a halt consumes it.
  std::uint64_t trace_kick_begin(unsigned from, Slot& target);
  void trace_kick_sent(unsigned from, unsigned target, Slot& slot, std::uint64_t flow, std::uint64_t sent,
                       bool delivered);
  void trace_kick_consumed(unsigned self, Slot& slot);
  // Called on vCPU `vcpu`'s own thread whenever it enters the backend.
  void on_entry(unsigned vcpu);
  // Whether the calling thread runs on the host CPU vCPU `vcpu` last ran on.
  bool shares_cpu_with(unsigned vcpu) const;
  BackendOptions options_;  // options_.mode: the mode at start; mode_ is the live one
  std::atomic<KickMode> mode_;
  std::atomic<std::uint64_t> epoch_{0};
  StopFlag stopping_;  // set by stop(): ends every --kick-delay-us wait at once
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<VcpuBooster> booster_;  // after slots_: its observer writes their counters
  KickObserver* kick_observer_ = nullptr;  // --trace; set before the vCPUs start
};

}  // namespace lockvisor::pvlock
