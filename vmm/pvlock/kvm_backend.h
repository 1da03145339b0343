// The kvm PV-lock backend (--backend kvm): KVM's own in-kernel KICK_CPU.
//
// The guest kicks with vmcall/vmmcall at CPL0 (KVM_HC_KICK_CPU) and halts
// with `hlt` at CPL0 with IF=0; the in-kernel irqchip makes KVM block the
// halted vCPU itself and wake it on its sticky `pv_unhalted` flag, with KVM's
// halt polling and directed yield. None of that reaches the VMM: this backend
// only describes the VM set-up and reads KVM's binary statistics for the
// report and the deadlock detector:
//   halts         = halt_exits             kicks_sent = hypercalls (+ doorbell kicks)
//   halts_woken   = halt_wakeup            halts_polled = halt_successful_poll
//   halts_immediate = halts - woken - polled (a halt that found the kick pending,
//                     or was woken by something else)
//   halted        = the `blocking` statistic (1 while KVM blocks the vCPU; a
//                   blocked vCPU has no pending kick, or KVM would not block it)
// KVM also counts as halt_wakeup the signal that takes a vCPU out of its
// halt when the run ends (measured: a vCPU never kicked shows 1).
// kicks_received/coalesced have no KVM statistic and stay 0. Without the
// `blocking` statistic (kernels before 5.16) the state is "unknown" and the
// deadlock detector never fires.
//
// A KICK_CPU rung on the doorbell port reaches this backend, but userspace
// cannot set KVM's pv_unhalted: such a kick is counted as dropped.
#pragma once
#include <memory>
#include <vector>

#include "vmm/kvm/binary_stats.h"
#include "vmm/pvlock/pv_backend.h"

namespace lockvisor::pvlock {

class KvmBackend final : public PvBackend {
 public:
  KvmBackend(unsigned vcpu_count, BackendOptions options);

  std::string_view name() const override { return "kvm"; }
  // In-kernel irqchip; PV feature CPUID enforced as --enforce-pv-cpuid says; the guest uses vmcall/hlt.
  static VmSetup setup(const BackendOptions& options) { return {true, options.enforce_pv_feature_cpuid, true}; }
  VmSetup vm_setup() const override { return setup(options_); }
  void attach_vcpu(unsigned vcpu, UniqueFd stats_fd) override;
  KickResult kick(unsigned from, int target) override;
  KickResult kick_if_halted(unsigned from, int target) override { return kick(from, target); }
  KickMode kick_mode() const override { return KickMode::kSticky; }
  std::optional<std::string> set_kick_mode(KickMode mode) override;
  HaltOutcome halt(unsigned self, std::uint64_t limit_ns) override;
  void stop() override {}  // the Machine's signal takes vCPUs out of KVM's halt (KVM_RUN returns EINTR)
  VcpuPvState vcpu_state(unsigned vcpu) const override;
  std::uint64_t epoch() const override;
  const VcpuPvCounters& counters(unsigned vcpu) const override;
  std::vector<std::uint64_t> wake_latencies(unsigned) const override { return {}; }

 private:
  struct Slot {
    kvm::BinaryStats stats;
    std::atomic<std::uint64_t> doorbell_kicks{0};
    std::atomic<std::uint64_t> doorbell_kicks_invalid{0};
    std::atomic<std::uint64_t> unexpected_halts{0};  // KVM_EXIT_HLT: should not happen with the irqchip
    mutable VcpuPvCounters counters;  // refreshed from `stats` by counters()
  };
  BackendOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace lockvisor::pvlock
