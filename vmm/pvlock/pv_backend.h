// The host side of the PV-lock interface, as the vCPU exit loop sees it.
//
// The hypercall table (hypercall_table.h) decodes a hypercall and calls one
// of these; the exit loop calls halt(). How a kick reaches a halted vCPU is
// the backend's business, and so is how it keeps that state: callers see it
// only through the neutral VcpuPvState. A backend also decides how the VM is
// set up for it (VmSetup): the Machine applies that description and never
// branches on a backend's name. Two backends (--backend):
//   - userspace (UserspaceBackend): kick latches in the VMM, every KICK_CPU
//     and halt is a doorbell exit; works on every KVM, PVM included;
//   - kvm (KvmBackend): KVM's own in-kernel KICK_CPU (vmcall/vmmcall at CPL0,
//     in-kernel irqchip, sticky pv_unhalted, KVM's halt polling and directed
//     yield). It sees no kick and no halt at all; its counters and state come
//     from KVM's binary statistics.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "vmm/pvlock/pv_types.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::pvlock {

enum class KickResult { kDelivered, kCoalesced, kDropped, kNoSuchTarget, kDisabled };

// Per-vCPU counters. Written by the vCPU's own thread (sent, halts) or by a
// kicker (received); all relaxed atomics, read once at the end of a run.
struct VcpuPvCounters {
  std::atomic<std::uint64_t> halts{0};            // halt requests (hlt or HALT hypercall)
  std::atomic<std::uint64_t> halts_immediate{0};  // returned at once: a kick was pending
  std::atomic<std::uint64_t> halts_polled{0};     // kick arrived while polling
  std::atomic<std::uint64_t> halts_woken{0};      // slept, then woken by a kick
  std::atomic<std::uint64_t> kicks_sent{0};       // KICK_CPU calls made by this vCPU
  std::atomic<std::uint64_t> kicks_invalid{0};    // ... naming a target that does not exist
  std::atomic<std::uint64_t> kicks_received{0};   // kicks that set this vCPU's latch
  std::atomic<std::uint64_t> kicks_coalesced{0};  // kicks that found a kick already pending here
  std::atomic<std::uint64_t> kicks_dropped{0};    // kicks lost here (lossy mode, not halted)
  std::atomic<std::uint64_t> last_kick_ns{0};     // when the latest kick was delivered (steady clock)
};

// --backend.
enum class BackendKind { kUserspace, kKvm };
const char* backend_kind_name(BackendKind kind);

struct BackendOptions {
  KickMode mode = KickMode::kSticky;
  std::uint32_t kick_delay_us = 0;  // kicker waits this long before delivering
  std::uint32_t halt_poll_us = 0;   // halter spins this long before sleeping
  // With PV_UNHALT hidden (--no-pv): true (KVM_CAP_ENFORCE_PV_FEATURE_CPUID
  // on) refuses KICK_CPU with -KVM_ENOSYS; false performs the kick anyway,
  // as KVM does without enforcement (--enforce-pv-cpuid).
  bool enforce_pv_feature_cpuid = true;
};

// One vCPU's PV state as the deadlock detector and the reports see it, read
// in one consistent snapshot. `known` is false when the backend cannot see
// the state (e.g. KVM without the `blocking` statistic): then the two flags
// mean nothing and nobody may conclude a deadlock from them.
struct VcpuPvState {
  bool halted = false;        // blocked (or polling) in halt()
  bool kick_pending = false;  // a kick arrived that no halt has consumed yet
  bool known = true;
};

// How the VM must be built for a backend; the Machine applies it.
struct VmSetup {
  // KVM_CREATE_IRQCHIP before the vCPUs (APs then start UNINITIALIZED and
  // are made RUNNABLE with KVM_SET_MP_STATE); `hlt` then blocks in KVM.
  bool in_kernel_irqchip = false;
  // KVM_CAP_ENFORCE_PV_FEATURE_CPUID on every vCPU: KVM refuses PV calls
  // whose CPUID feature bit is hidden (KICK_CPU returns -KVM_ENOSYS).
  bool enforce_pv_feature_cpuid = false;
  // The guest makes KICK_CPU with vmcall/vmmcall at CPL0 and halts with
  // `hlt` at CPL0 (BootInfo kBootFlagKvmHypercalls) instead of doorbells.
  bool guest_uses_kvm_hypercalls = false;
};

class PvBackend {
 public:
  virtual ~PvBackend() = default;
  virtual std::string_view name() const = 0;
  virtual VmSetup vm_setup() const = 0;
  // Called once per vCPU while the VM is built, with a fresh
  // KVM_GET_STATS_FD of that vCPU (may be invalid): for backends that read
  // KVM's own statistics. Default: not needed.
  virtual void attach_vcpu(unsigned /*vcpu*/, UniqueFd /*stats_fd*/) {}
  // Kick vCPU `target` (an index, or -1 when the guest named no vCPU), in
  // the configured --kick mode.
  virtual KickResult kick(unsigned from, int target) = 0;
  // Kick that is lost unless `target` is halted right now, whatever --kick
  // says: SBI PVLOCK "as proposed" (kvm_vcpu_kick + yield, nothing latched).
  virtual KickResult kick_if_halted(unsigned from, int target) = 0;
  // Halt vCPU `self` until kicked.
  virtual HaltOutcome halt(unsigned self) = 0;
  // Wake every halted vCPU for good: the run is ending.
  virtual void stop() = 0;
  // For the deadlock detector and reports.
  virtual VcpuPvState vcpu_state(unsigned vcpu) const = 0;
  bool is_halted(unsigned vcpu) const {
    const VcpuPvState s = vcpu_state(vcpu);
    return s.known && s.halted;
  }
  bool kick_pending(unsigned vcpu) const { return vcpu_state(vcpu).kick_pending; }
  // Changes whenever any vCPU's state does: two equal reads around a scan of
  // vcpu_state() mean the scan saw one stable picture.
  virtual std::uint64_t epoch() const = 0;
  virtual const VcpuPvCounters& counters(unsigned vcpu) const = 0;
  // Kick-to-wake latencies (ns) observed by vCPU `vcpu`'s woken halts.
  virtual std::vector<std::uint64_t> wake_latencies(unsigned vcpu) const = 0;
};

// The backend a Machine runs with.
std::unique_ptr<PvBackend> make_backend(BackendKind kind, unsigned vcpu_count, BackendOptions options);

}  // namespace lockvisor::pvlock
