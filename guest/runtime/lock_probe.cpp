#include "runtime/lock_probe.h"

#include "locks/atomic.h"
#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/lock_probe.h"
#include "lockvisor/abi/ucall.h"
#include "runtime/boot.h"
#include "runtime/cpu.h"
#include "runtime/doorbell.h"
#include "runtime/ucall_report.h"

namespace guest {

bool g_lock_probe_on;

namespace {

using lockvisor::abi::LockProbeArea;
using lockvisor::abi::LockProbeConfig;
using lockvisor::abi::LockProbeCpu;
using lockvisor::abi::PreemptKind;
using lockvisor::abi::ProbeState;

LockProbeConfig g_config;
LockProbeArea* const g_area = reinterpret_cast<LockProbeArea*>(lockvisor::abi::kLockProbeAddr);
Ucall g_points[kMaxVcpus];  // each vCPU's preemption-point message

const lockvisor::abi::PreemptTarget& target(PreemptKind kind) { return g_config.targets[static_cast<u32>(kind)]; }

bool targets_lock(PreemptKind kind, unsigned lock) {
  const auto& t = target(kind);
  return lockvisor::abi::target_armed(t) && (t.lock == lockvisor::abi::kProbeAnyLock || t.lock == lock);
}

// An eligible event of `kind` on this vCPU: count it and, when the seeded
// rule chooses it, stop here for the VMM to park us. The record is complete
// before the ucall (the VMM checks it).
void event(LockProbeCpu& rec, u32 cpu, PreemptKind kind, unsigned lock) {
  const u32 k = static_cast<u32>(kind);
  const u64 index = rec.events[k]++;
  if (!lockvisor::abi::preempt_point_chosen(g_config.seed, cpu, kind, index, target(kind))) return;
  rec.points[k]++;
  Ucall& u = g_points[cpu];
  u.magic = kUcallMagic;
  u.type = UcallType::kPreemptPoint;
  u.args[0] = k;
  u.args[1] = lock;
  u.args[2] = index;
  ucall_doorbell(&u);
}

}  // namespace

void lock_probe_init() {
  const BootInfo& info = boot();
  const bool armed = info.version >= 4 && (info.flags & kBootFlagLockProbe) != 0 &&
                     info.lock_probe_gpa == lockvisor::abi::kLockProbeAddr;
  // Every vCPU writes the same values; the workload's start barrier orders
  // them before any hook runs.
  if (armed) g_config = info.lock_probe;
  g_lock_probe_on = armed;
  if (armed) g_area->cpus[this_cpu()] = LockProbeCpu{};
}

void lock_probe_arrive(unsigned lock) {
  LockProbeCpu& rec = g_area->cpus[this_cpu()];
  rec.lock = lock;
  rec.decided = 0;
  rec.ahead = 0;
  if (lock < lockvisor::abi::kLockProbeSlots && targets_lock(PreemptKind::kWaiter, lock))
    rec.ahead = lockvisor::locks::fetch_add(&g_area->locks[lock].inside, u64{1}, lockvisor::locks::Order::acq_rel);
  rec.state = static_cast<u32>(ProbeState::kWaiting);
}

void lock_probe_spin() {
  const u32 cpu = this_cpu();
  LockProbeCpu& rec = g_area->cpus[cpu];
  if (rec.state != static_cast<u32>(ProbeState::kWaiting) || rec.decided != 0) return;
  // Only one CPU was ahead at arrival, or never the first waiter this time.
  if (rec.ahead != 1 || rec.lock >= lockvisor::abi::kLockProbeSlots || !targets_lock(PreemptKind::kWaiter, rec.lock)) {
    rec.decided = 1;
    return;
  }
  // ... and it is spinning behind a CPU that holds the lock now: queued next
  // in line. Until then (the lock is being handed over) keep looking.
  const u64 holder = lockvisor::locks::load_relaxed(&g_area->locks[rec.lock].holder);
  if (holder == 0 || holder == u64{cpu} + 1) return;
  rec.decided = 1;
  event(rec, cpu, PreemptKind::kWaiter, rec.lock);
}

void lock_probe_acquired(unsigned lock) {
  const u32 cpu = this_cpu();
  LockProbeCpu& rec = g_area->cpus[cpu];
  rec.state = static_cast<u32>(ProbeState::kHolding);
  if (lock < lockvisor::abi::kLockProbeSlots && targets_lock(PreemptKind::kWaiter, lock))
    lockvisor::locks::store_relaxed(&g_area->locks[lock].holder, u64{cpu} + 1);
  if (targets_lock(PreemptKind::kHolder, lock)) event(rec, cpu, PreemptKind::kHolder, lock);
}

void lock_probe_release(unsigned lock) {
  const u32 cpu = this_cpu();
  LockProbeCpu& rec = g_area->cpus[cpu];
  rec.state = static_cast<u32>(ProbeState::kIdle);
  if (lock < lockvisor::abi::kLockProbeSlots && targets_lock(PreemptKind::kWaiter, lock)) {
    // Only if still ours: the next holder may have written itself already.
    lockvisor::locks::cmpxchg(&g_area->locks[lock].holder, u64{cpu} + 1, u64{0}, lockvisor::locks::Order::relaxed);
    lockvisor::locks::fetch_add(&g_area->locks[lock].inside, ~u64{0}, lockvisor::locks::Order::acq_rel);
  }
}

void lock_probe_report() {
  const LockProbeCpu& rec = g_area->cpus[this_cpu()];
  for (u32 k = 0; k < lockvisor::abi::kPreemptKinds; ++k) {
    if (!lockvisor::abi::target_armed(g_config.targets[k])) continue;
    report_result(lockvisor::abi::kProbeEventsKeys[k], rec.events[k]);
    report_result(lockvisor::abi::kProbePointsKeys[k], rec.points[k]);
  }
}

}  // namespace guest
