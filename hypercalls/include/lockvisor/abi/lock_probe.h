// The lock probe: what the guest publishes about its lock operations for the
// targeted preemption injector (docs/preemption.md), and the seeded rule that
// picks which events become preemption points.
//
// Memory. The probe area is guest RAM at kLockProbeAddr (BootInfo::
// lock_probe_gpa), between the steal-time records and the TSS array: one 64-byte record per vCPU, written by
// that vCPU only, then one arrival counter per lock slot. The VMM reads a
// vCPU's record only while that vCPU is stopped in its preemption-point
// ucall, and treats every field as untrusted.
//
// Events (per vCPU, counted only for the targeted lock, kProbeAnyLock: all):
//   holder  the vCPU has just acquired the lock (state kHolding);
//   waiter  the vCPU arrived while one CPU was ahead of it (`ahead` == 1)
//           and now spins or halts inside lock() while another CPU holds the
//           lock (the slot's `holder`): it is queued right behind the holder,
//           next in line for a FIFO lock. The first such spin of an
//           acquisition is the event. Requiring a holder (not just an
//           arrival) matters for qspinlock: a CPU that arrives during the
//           pending->locked hand-over spins before it has claimed any place,
//           and parking it would stall nobody.
// Each event gets the next index of its kind's per-vCPU counter. The event
// is a preemption point when preempt_point_chosen(seed, vcpu, kind, index,
// target) says so; the guest then sends one kPreemptPoint ucall (ucall.h)
// and the VMM parks the vCPU for target.duration_ns. Both sides compute the
// same rule, so the VMM can refuse a point the schedule did not choose, and
// the same seed picks the same event indices on every run.
#pragma once
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

inline constexpr u64 kLockProbeAddr = 0x40000;
inline constexpr u32 kLockProbeSlots = 16;  // lock slots the probe tracks (= the workloads' kMaxLocks)
inline constexpr u32 kProbeAnyLock = 0xFFFF'FFFFu;

enum class PreemptKind : u32 { kHolder = 0, kWaiter = 1 };
inline constexpr u32 kPreemptKinds = 2;

// A vCPU's position in its current lock operation.
enum class ProbeState : u32 {
  kIdle = 0,     // not inside lock() or the critical section
  kWaiting = 1,  // arrived, lock() has not returned
  kHolding = 2,  // acquired, not yet released
};

struct LockProbeCpu {
  u32 state;         // ProbeState
  u32 lock;          // slot of the current operation
  u64 ahead;         // CPUs inside this lock's arrive..release span when it arrived (holder included)
  u32 decided;       // 1 once this acquisition's waiter event is decided (taken, or not eligible)
  u32 reserved;
  u64 events[kPreemptKinds];  // eligible events seen, by PreemptKind
  u64 points[kPreemptKinds];  // preemption points taken (ucalls sent), by PreemptKind
  u64 pad;
};
static_assert(sizeof(LockProbeCpu) == 64);

// Per lock slot, maintained only for the lock a waiter schedule targets.
struct LockProbeSlot {
  u64 inside;  // CPUs between arrival and release on this lock
  u64 holder;  // CPU index + 1 of the CPU that holds it (acquire to release), 0: none
  u64 pad[6];
};

struct LockProbeArea {
  LockProbeCpu cpus[kMaxVcpus];
  LockProbeSlot locks[kLockProbeSlots];
};
inline constexpr u64 kLockProbeBytes = sizeof(LockProbeArea);
static_assert(kLockProbeAddr >= kStealTimeAddr + kStealTimeStride * kMaxVcpus, "probe overlaps the steal-time records");
static_assert(kLockProbeAddr + kLockProbeBytes <= kTssAddr, "probe overlaps the TSS array");

// One targeted kind's schedule. Off when both every and chance_q32 are 0.
struct PreemptTarget {
  u32 every;        // 1 in `every` events, at a seeded per-vCPU phase
  u32 lock;         // lock slot, or kProbeAnyLock
  u64 chance_q32;   // else: each event with probability chance_q32 / 2^32
  u64 duration_ns;  // how long the VMM parks the vCPU
};

// BootInfo (version 4) carries this; flag kBootFlagLockProbe says it is armed.
struct LockProbeConfig {
  u64 seed;
  PreemptTarget targets[kPreemptKinds];  // by PreemptKind
};

// The guest reports its record's counts as results under these keys (by
// PreemptKind) when its lock workload ends: the VMM's counts must equal them.
inline constexpr const char* kProbeEventsKeys[kPreemptKinds] = {"probe.holder_events", "probe.waiter_events"};
inline constexpr const char* kProbePointsKeys[kPreemptKinds] = {"probe.holder_points", "probe.waiter_points"};

constexpr bool target_armed(const PreemptTarget& t) { return t.every != 0 || t.chance_q32 != 0; }

// SplitMix64's finaliser: a good 64-bit mix, the same on both sides.
constexpr u64 probe_mix(u64 x) {
  x += 0x9E37'79B9'7F4A'7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58'476D'1CE4'E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D0'49BB'1331'11EBull;
  return x ^ (x >> 31);
}

// Stateless, so any event can be checked alone: the VMM re-derives the
// guest's choice from (seed, vcpu, kind, index).
constexpr bool preempt_point_chosen(u64 seed, u32 vcpu, PreemptKind kind, u64 index, const PreemptTarget& t) {
  const u64 stream = probe_mix(seed ^ probe_mix((u64{vcpu} << 8) | static_cast<u64>(kind)));
  if (t.every != 0) return (index + stream % t.every) % t.every == 0;
  if (t.chance_q32 != 0) return (probe_mix(stream ^ index) >> 32) < t.chance_q32;
  return false;
}
static_assert(preempt_point_chosen(1, 0, PreemptKind::kHolder, 5, PreemptTarget{1, kProbeAnyLock, 0, 0}));
static_assert(!preempt_point_chosen(1, 0, PreemptKind::kHolder, 5, PreemptTarget{0, kProbeAnyLock, 0, 0}));
static_assert(preempt_point_chosen(1, 0, PreemptKind::kWaiter, 5, PreemptTarget{0, 0, u64{1} << 32, 0}));

}  // namespace lockvisor::abi
