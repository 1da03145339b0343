// lock_probe_rules.h: which lock operations are eligible events of a
// targeted --inject schedule, and which of them are preemption points
// (lockvisor/abi/lock_probe.h, docs/preemption.md).
//
// Shared by the guest (runtime/lock_probe.cpp: its records live in the
// probe area the VMM reads, and it stops at a chosen point with a ucall for
// the VMM to park it) and native runs (vmm/native/native_probe.h: the thread
// parks itself), so that one seed picks the same points in both.
//
// Each CPU's record is written only by that CPU. The rules:
//   arrive    state = waiting; for a lock a waiter schedule targets, `ahead`
//             = the CPUs inside its arrive..release span before this one
//             (one atomic add on the slot's `inside`).
//   spin      (each spin iteration or halt inside lock()) a waiter that had
//             exactly one CPU ahead becomes a waiter event the first time it
//             finds another CPU holding the lock: it is queued next in line.
//             While the lock is being handed over (no holder yet) it keeps
//             looking; any other waiter is decided "not eligible" at once.
//             At most one waiter event per acquisition.
//   acquired  state = holding; the slot's `holder` = this CPU; every
//             acquisition of a lock a holder schedule targets is an event.
//   release   state = idle; `holder` cleared only if still ours (the next
//             holder may have written itself already); `inside` decremented.
// An event's index is the CPU's count of that kind's events so far; it is a
// point when abi::preempt_point_chosen(seed, cpu, kind, index) says so.
#pragma once

#include "locks/atomic.h"
#include "lockvisor/abi/lock_probe.h"

namespace lockvisor::workloads::probe {

using abi::LockProbeArea;
using abi::LockProbeConfig;
using abi::LockProbeCpu;
using abi::PreemptKind;
using abi::ProbeState;
using abi::u32;
using abi::u64;

// A chosen event: where the CPU must be preempted now.
struct Point {
  bool chosen = false;
  PreemptKind kind = PreemptKind::kHolder;
  u32 lock = 0;
  u64 index = 0;
};

inline bool targets_lock(const LockProbeConfig& config, PreemptKind kind, unsigned lock) {
  const abi::PreemptTarget& t = config.targets[static_cast<u32>(kind)];
  return abi::target_armed(t) && (t.lock == abi::kProbeAnyLock || t.lock == lock);
}

// An eligible event of `kind`: counted, and a point when the seeded rule
// chooses it (counted too; the record is complete before the caller stops).
inline Point event(const LockProbeConfig& config, LockProbeCpu& rec, u32 cpu, PreemptKind kind, unsigned lock) {
  const u32 k = static_cast<u32>(kind);
  const u64 index = rec.events[k]++;
  if (!abi::preempt_point_chosen(config.seed, cpu, kind, index, config.targets[k])) return {};
  rec.points[k]++;
  return {true, kind, lock, index};
}

inline void arrive(const LockProbeConfig& config, LockProbeArea& area, u32 cpu, unsigned lock) {
  LockProbeCpu& rec = area.cpus[cpu];
  rec.lock = lock;
  rec.decided = 0;
  rec.ahead = 0;
  if (lock < abi::kLockProbeSlots && targets_lock(config, PreemptKind::kWaiter, lock))
    rec.ahead = locks::fetch_add(&area.locks[lock].inside, u64{1}, locks::Order::acq_rel);
  rec.state = static_cast<u32>(ProbeState::kWaiting);
}

inline Point spin(const LockProbeConfig& config, LockProbeArea& area, u32 cpu) {
  LockProbeCpu& rec = area.cpus[cpu];
  if (rec.state != static_cast<u32>(ProbeState::kWaiting) || rec.decided != 0) return {};
  if (rec.ahead != 1 || rec.lock >= abi::kLockProbeSlots || !targets_lock(config, PreemptKind::kWaiter, rec.lock)) {
    rec.decided = 1;
    return {};
  }
  const u64 holder = locks::load_relaxed(&area.locks[rec.lock].holder);
  if (holder == 0 || holder == u64{cpu} + 1) return {};
  rec.decided = 1;
  return event(config, rec, cpu, PreemptKind::kWaiter, rec.lock);
}

inline Point acquired(const LockProbeConfig& config, LockProbeArea& area, u32 cpu, unsigned lock) {
  LockProbeCpu& rec = area.cpus[cpu];
  rec.state = static_cast<u32>(ProbeState::kHolding);
  if (lock < abi::kLockProbeSlots && targets_lock(config, PreemptKind::kWaiter, lock))
    locks::store_relaxed(&area.locks[lock].holder, u64{cpu} + 1);
  if (targets_lock(config, PreemptKind::kHolder, lock)) return event(config, rec, cpu, PreemptKind::kHolder, lock);
  return {};
}

inline void release(const LockProbeConfig& config, LockProbeArea& area, u32 cpu, unsigned lock) {
  area.cpus[cpu].state = static_cast<u32>(ProbeState::kIdle);
  if (lock < abi::kLockProbeSlots && targets_lock(config, PreemptKind::kWaiter, lock)) {
    locks::cmpxchg(&area.locks[lock].holder, u64{cpu} + 1, u64{0}, locks::Order::relaxed);
    locks::fetch_add(&area.locks[lock].inside, ~u64{0}, locks::Order::acq_rel);
  }
}

}  // namespace lockvisor::workloads::probe
