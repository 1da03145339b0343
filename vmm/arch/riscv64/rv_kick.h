// SBI PVLOCK KICK_CPU on RISC-V KVM: the host half of the guest's WFI wait,
// in both semantics (sbi_lockvisor.h, kRiscvKickInterrupt).
//
// RISC-V KVM handles WFI in the kernel: the vCPU blocks until an interrupt
// that the guest enabled in `sie` is pending (Linux 6.1,
// kvm_arch_vcpu_runnable), whatever sstatus.SIE says. So:
//   * sticky (lockvisor's default, like KVM's pv_unhalted on x86): a kick sets
//     the target's latch and raises its supervisor external interrupt
//     (KVM_INTERRUPT_SET, an asynchronous vCPU ioctl). A WFI after it returns
//     at once, a blocked one wakes; the level stays up until the guest
//     acknowledges (kLvSbiKickAck), which clears the latch and lowers it. A
//     kick is never lost, and once consumed it makes no WFI return early.
//     Kick and acknowledgement hold the target's mutex, so a kick cannot fall
//     between the clear and the lowering (which would lower the line of a
//     latched kick: the lost wakeup sticky kicks exist to prevent).
//   * proposed (the RISC-V series' KVM side: kvm_vcpu_kick and nothing
//     latched): the kick takes the target out of KVM_RUN (a signal to its
//     thread). A target blocked in WFI leaves it; one that was running only
//     takes an exit, and its next WFI blocks until some later interrupt: the
//     kick is lost, counted as dropped, and the deadlock detector must end
//     the run.
//
// The KVM side is behind Hooks, so the logic is unit-tested without /dev/kvm.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "vmm/pvlock/pv_counters.h"

namespace lockvisor::arch::riscv64 {

enum class KickMode { kSticky, kProposed };

class RvKicks {
 public:
  struct Hooks {
    std::function<void(unsigned hart, bool raised)> set_line;  // KVM_INTERRUPT set / unset
    std::function<void(unsigned hart)> interrupt_run;           // take the hart out of KVM_RUN
    std::function<bool(unsigned hart)> blocking;                 // blocked in WFI inside KVM now
  };

  RvKicks(unsigned harts, KickMode mode, Hooks hooks);

  // KICK_CPU from `from` to `target` (both valid hart ids: the hypercall
  // table answers invalid targets itself).
  void kick(unsigned from, unsigned target);
  // kLvSbiKickAck from `hart`, after each of its WFIs: clears its latch and
  // lowers its line. True if a kick was latched (it ended that wait).
  bool acknowledge(unsigned hart);

  bool latched(unsigned hart) const;
  KickMode mode() const { return mode_; }
  // The hart's kick counters so far: kicks_sent, kicks_received,
  // kicks_coalesced, kicks_dropped (proposed only). Acknowledgements that
  // found a kick latched are counted apart: the halts a kick ended (acks).
  pvlock::PvCounts counts(unsigned hart) const;
  std::uint64_t acks(unsigned hart) const;

 private:
  struct Hart {
    mutable std::mutex mutex;
    bool latched = false;
    pvlock::PvCounts counts;
    std::uint64_t acks = 0;
  };
  KickMode mode_;
  Hooks hooks_;
  std::vector<std::unique_ptr<Hart>> harts_;
};

}  // namespace lockvisor::arch::riscv64
