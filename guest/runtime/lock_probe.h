// The guest half of the lock probe (lockvisor/abi/lock_probe.h): each vCPU
// publishes where it is in its lock operation into the probe area the VMM
// provides, and stops at the events the seeded targeted schedule chooses
// (one kPreemptPoint ucall each) so the VMM parks it exactly there.
//
// Cost. With the probe off (no kBootFlagLockProbe) every hook is one
// predictable branch on g_lock_probe_on. With it on: plain stores to this
// vCPU's own record, plus, for waiter targeting, one atomic add on the
// targeted lock's arrival counter at arrival and one at release (a shared
// cache line: it perturbs the lock a little, documented in
// docs/preemption.md). No exit except at a chosen event.
#pragma once
#include "lockvisor/abi/types.h"

namespace guest {

// Set by lock_probe_init() when the VMM armed a targeted schedule.
extern bool g_lock_probe_on;

// Every vCPU, before its lock workload starts: reads BootInfo (version 4) and
// clears this vCPU's record.
void lock_probe_init();

// The hooks (call only when g_lock_probe_on): a CPU arrives at lock slot
// `lock` (before lock()), has acquired it, has released it; and one spin
// iteration or halt inside lock() (the Env's relax() and wait()).
void lock_probe_arrive(unsigned lock);
void lock_probe_acquired(unsigned lock);
void lock_probe_release(unsigned lock);
void lock_probe_spin();

// Reports this vCPU's events and preemption points as results
// (abi::kProbeEventsKeys / kProbePointsKeys), for the VMM to compare.
void lock_probe_report();

}  // namespace guest
