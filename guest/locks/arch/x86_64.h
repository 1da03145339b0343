// x86_64.h: the lock runtime's CPU primitives on x86-64 (the guest at CPL3
// and the host tests alike).  Selected by locks/arch/primitives.h.
#pragma once

namespace lockvisor::locks {

// Spin-wait hint.  `pause` de-pipelines the spin loop (saves power, avoids
// the memory-order machine clear on exit) and is what KVM's pause-loop
// exiting (PLE) counts to detect a spinning vCPU.
[[gnu::always_inline]] inline void cpu_relax() { __builtin_ia32_pause(); }

// The lock clock: the time-stamp counter, for locks that bound a wait by time
// (pvbounded.h, cna.h, hq.h).  `rdtsc` is allowed at guest CPL3 (PVM runs it
// natively; `rdtscp` is not used because it may be intercepted).  Not
// serialising: a lock only compares ages against a bound of a millisecond or
// so, where a few cycles of skew do not matter.  The TSC is invariant and
// synchronised across CPUs on every host lockvisor supports; natively it is
// the host's TSC.  Its rate is the TSC's (BootInfo::tsc_khz in the guest).
[[gnu::always_inline]] inline unsigned long long read_lock_clock() { return __builtin_ia32_rdtsc(); }

// The lock clock's rate assumed until the run's real rate is known (a 2.5 GHz
// TSC): only the default time bounds before set_tuning() use it.
inline constexpr unsigned long long kAssumedLockClockKhz = 2500000;

}  // namespace lockvisor::locks
