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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/pvlock/halt_poll.h"
#include "vmm/pvlock/pv_counters.h"
#include "vmm/pvlock/pv_types.h"
#include "vmm/util/unique_fd.h"
#include "vmm/pvlock/vcpu_boost.h"

namespace lockvisor::pvlock {

enum class KickResult { kDelivered, kCoalesced, kDropped, kNoSuchTarget, kDisabled };

// Per-vCPU counters (the list: pv_counters.h). Written by the vCPU's own
// thread (sent, halts), by a kicker (received) or by the boost reverter; all
// relaxed atomics, read once at the end of a run with snapshot().
struct VcpuPvCounters {
#define LOCKVISOR_X_FIELD_(name, desc) std::atomic<std::uint64_t> name{0};
  LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_FIELD_)
#undef LOCKVISOR_X_FIELD_

  PvCounts snapshot() const {
    PvCounts counts;
#define LOCKVISOR_X_LOAD_(name, desc) counts.name = name.load(std::memory_order_relaxed);
    LOCKVISOR_PV_COUNTERS(LOCKVISOR_X_LOAD_)
#undef LOCKVISOR_X_LOAD_
    return counts;
  }
};

// --backend.
enum class BackendKind { kUserspace, kKvm };
const char* backend_kind_name(BackendKind kind);

// The userspace backend's host knobs (--kick, --kick-delay-us, --halt-poll,
// --kick-yield, --kick-boost, --boost). One place turns them into the
// report's "settings": report/settings_json.cpp settings_json().
struct BackendOptions {
  KickMode mode = KickMode::kSticky;
  std::uint32_t kick_delay_us = 0;  // kicker waits this long before delivering
  HaltPollSetting halt_poll;        // how long a halter polls its latch before sleeping (halt_poll.h)
  bool kick_yield = false;          // kicker sched_yield()s after waking a vCPU that shares its host CPU
  bool kick_boost = false;          // a kick boosts the woken vCPU (vcpu_boost.h)
  BoostMechanism boost = BoostMechanism::kAuto;  // how YIELD_TO and --kick-boost boost
  std::uint32_t boost_bound_us = 4000;           // a boost ends after this long at the latest
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
  bool timed = false;         // the halt ends by itself at its limit (HALT_FOR)
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

// The timeline's view of kicks (--trace, vmm/trace/). Both calls come on
// vCPU threads, must not block or allocate, and pair by `flow`: on_kick on
// the kicker's thread for a delivered kick (`sent_ns`: CLOCK_MONOTONIC before
// delivery), on_kick_consumed on the kicked vCPU's thread when a halt of its
// returns because of that kick.
class KickObserver {
 public:
  virtual ~KickObserver() = default;
  virtual void on_kick(unsigned from, unsigned target, std::uint64_t flow, std::uint64_t sent_ns) noexcept = 0;
  virtual void on_kick_consumed(unsigned vcpu, std::uint64_t flow) noexcept = 0;
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
  // the current --kick mode.
  virtual KickResult kick(unsigned from, int target) = 0;
  // The --kick mode kick() uses now.
  virtual KickMode kick_mode() const { return KickMode::kSticky; }
  // Switches the --kick mode while the VM runs (the control socket); safe
  // from any thread. nullopt: switched (kicks from now on use `mode`); else
  // the one-line reason this backend cannot switch. Default: cannot.
  virtual std::optional<std::string> set_kick_mode(KickMode /*mode*/) {
    return std::string("this PV backend cannot switch --kick while the VM runs");
  }
  // Kick that is lost unless `target` is halted right now, whatever --kick
  // says: SBI PVLOCK "as proposed" (kvm_vcpu_kick + yield, nothing latched).
  virtual KickResult kick_if_halted(unsigned from, int target) = 0;
  // Halt vCPU `self` until kicked, or for at most limit_ns when nonzero
  // (HALT_FOR; kExpired).
  virtual HaltOutcome halt(unsigned self, std::uint64_t limit_ns) = 0;
  // YIELD_TO (hypercall 11): vCPU `from` asks that vCPU `target` (an index,
  // or -1 when the guest named no vCPU) run next on its host CPU. A backend
  // that cannot do that ignores it (KVM answers the call with 0 either way).
  virtual void yield_to(unsigned /*from*/, int /*target*/) {}
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
  // Reports every kick to `observer` from now on (set before the vCPUs
  // start; it must outlive the run). False: this backend never sees kicks
  // (KVM delivers them in the kernel).
  virtual bool observe_kicks(KickObserver* /*observer*/) { return false; }
};

// The backend a Machine runs with.
std::unique_ptr<PvBackend> make_backend(BackendKind kind, unsigned vcpu_count, BackendOptions options);
// What make_backend(kind, ..., options)->vm_setup() will say, without building
// a backend (validation before any VM exists: no threads, no privileges used).
VmSetup vm_setup_for(BackendKind kind, const BackendOptions& options);

}  // namespace lockvisor::pvlock
