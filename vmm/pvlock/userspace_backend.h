// The userspace PV-lock backend: halts block the vCPU thread on its kick
// latch (futex) instead of in KVM; kicks set the target's latch. Works on
// every KVM flavour, including PVM where `vmcall` never reaches anyone.
//
// No call blocks past stop(): halt() sleeps on the vCPU's kick latch, whose
// kStop bit stop() sets (and wakes); the --kick-delay-us wait in kick() sleeps
// on a StopFlag that stop() sets. The Machine calls stop() whenever the run
// ends (its stop hook), so the watchdog and SIGINT/SIGTERM/SIGHUP bound both.
#pragma once
#include <memory>
#include <vector>

#include "vmm/pvlock/kick_latch.h"
#include "vmm/pvlock/pv_backend.h"

namespace lockvisor::pvlock {

class UserspaceBackend final : public PvBackend {
 public:
  UserspaceBackend(unsigned vcpu_count, BackendOptions options);

  std::string_view name() const override { return "userspace"; }
  VmSetup vm_setup() const override { return {}; }  // doorbells only: no irqchip, nothing enforced
  KickResult kick(unsigned from, int target) override { return deliver(from, target, options_.mode); }
  KickResult kick_if_halted(unsigned from, int target) override { return deliver(from, target, KickMode::kLossy); }
  HaltOutcome halt(unsigned self) override;
  void stop() override;
  VcpuPvState vcpu_state(unsigned vcpu) const override {
    const std::uint32_t word = latch_state(vcpu);
    return {(word & KickLatch::kHalted) != 0, (word & KickLatch::kPending) != 0};
  }
  // The raw latch word (KickLatch::kPending | kHalted | kStop): for this
  // backend's own tests only; everyone else reads vcpu_state().
  std::uint32_t latch_state(unsigned vcpu) const { return slots_[vcpu]->latch.state(); }
  std::uint64_t epoch() const override { return epoch_.load(); }
  const VcpuPvCounters& counters(unsigned vcpu) const override { return slots_[vcpu]->counters; }
  std::vector<std::uint64_t> wake_latencies(unsigned vcpu) const override;

 private:
  KickResult deliver(unsigned from, int target, KickMode mode);
  static constexpr std::size_t kMaxLatencySamples = 1u << 20;
  struct Slot {
    explicit Slot(std::atomic<std::uint64_t>& epoch) : latch(epoch) {}
    alignas(64) KickLatch latch;
    VcpuPvCounters counters;
    std::vector<std::uint64_t> wake_latency_ns;  // written by this vCPU's thread only
  };
  BackendOptions options_;
  std::atomic<std::uint64_t> epoch_{0};
  StopFlag stopping_;  // set by stop(): ends every --kick-delay-us wait at once
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace lockvisor::pvlock
