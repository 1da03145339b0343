// The host side of the PV-lock interface, as the vCPU exit loop sees it.
//
// The hypercall table (hypercall_table.h) decodes a hypercall and calls one
// of these; the exit loop calls halt(). How a kick reaches a halted vCPU is
// the backend's business, and so is how it keeps that state: callers see it
// only through the neutral VcpuPvState. Today there is one
// backend, UserspaceBackend (kick latches in the VMM, halts handled in
// userspace). KVM's in-kernel KICK_CPU (vmcall + in-kernel irqchip) on
// hardware hosts is the planned second one: it would never see these calls
// for KICK_CPU at all and would only have to answer prepare-time questions.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "vmm/pvlock/halt_poll.h"
#include "vmm/pvlock/pv_counters.h"
#include "vmm/pvlock/pv_types.h"
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

// The userspace backend's host knobs (--kick, --kick-delay-us, --halt-poll,
// --kick-yield, --kick-boost, --boost). One place turns them into the
// report's "settings": report/run_report.cpp backend_settings_json().
struct BackendOptions {
  KickMode mode = KickMode::kSticky;
  std::uint32_t kick_delay_us = 0;  // kicker waits this long before delivering
  HaltPollSetting halt_poll;        // how long a halter polls its latch before sleeping (halt_poll.h)
  bool kick_yield = false;          // kicker sched_yield()s after waking a vCPU that shares its host CPU
  bool kick_boost = false;          // a kick boosts the woken vCPU (vcpu_boost.h)
  BoostMechanism boost = BoostMechanism::kAuto;  // how YIELD_TO and --kick-boost boost
  std::uint32_t boost_bound_us = 4000;           // a boost ends after this long at the latest
};

// One vCPU's PV state as the deadlock detector and the reports see it, read
// in one consistent snapshot.
struct VcpuPvState {
  bool halted = false;        // blocked (or polling) in halt()
  bool kick_pending = false;  // a kick arrived that no halt has consumed yet
};

class PvBackend {
 public:
  virtual ~PvBackend() = default;
  virtual std::string_view name() const = 0;
  // Kick vCPU `target` (an index, or -1 when the guest named no vCPU).
  virtual KickResult kick(unsigned from, int target) = 0;
  // Halt vCPU `self` until kicked.
  virtual HaltOutcome halt(unsigned self) = 0;
  // YIELD_TO (hypercall 11): vCPU `from` asks that vCPU `target` (an index,
  // or -1 when the guest named no vCPU) run next on its host CPU. A backend
  // that cannot do that ignores it (KVM answers the call with 0 either way).
  virtual void yield_to(unsigned /*from*/, int /*target*/) {}
  // Wake every halted vCPU for good: the run is ending.
  virtual void stop() = 0;
  // For the deadlock detector and reports.
  virtual VcpuPvState vcpu_state(unsigned vcpu) const = 0;
  bool is_halted(unsigned vcpu) const { return vcpu_state(vcpu).halted; }
  bool kick_pending(unsigned vcpu) const { return vcpu_state(vcpu).kick_pending; }
  // Changes whenever any vCPU's state does: two equal reads around a scan of
  // vcpu_state() mean the scan saw one stable picture.
  virtual std::uint64_t epoch() const = 0;
  virtual const VcpuPvCounters& counters(unsigned vcpu) const = 0;
  // Kick-to-wake latencies (ns) observed by vCPU `vcpu`'s woken halts.
  virtual std::vector<std::uint64_t> wake_latencies(unsigned vcpu) const = 0;
};

// The backend a Machine runs with. Today always the userspace one.
std::unique_ptr<PvBackend> make_backend(unsigned vcpu_count, BackendOptions options);

}  // namespace lockvisor::pvlock
