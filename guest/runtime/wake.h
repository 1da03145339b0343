// How a PV lock's waiter halts and its waker wakes it (--pv-wake,
// lockvisor/abi/pv_wake.h; docs/wake-mechanisms.md):
//   hypercall: KICK_CPU; the waiter halts with IF=0 and KVM's sticky
//              pv_unhalted ends the halt, even a kick sent before it.
//   ipi:       a fixed-vector IPI through the x2APIC ICR; the waiter re-checks
//              its condition with IF=0 and halts with `sti; hlt`: an IPI sent
//              after the re-check waits in the LAPIC's IRR and ends the halt
//              at once (sticky in hardware).
//   nmi:       an NMI (ICR delivery mode NMI); IF does not hold it back, so
//              the hardware keeps nothing for a later halt. The handler makes
//              it sticky: one that lands between the re-check and the `hlt`
//              skips the halt, one that lands outside the wait leaves a
//              pending flag the next wait consumes (arch/x86/entry.S).
// In every case the lock re-checks its lock word after any wake-up, so a
// spurious one costs a loop and a lost one cannot happen.
#pragma once
#include "lockvisor/abi/pv_wake.h"
#include "lockvisor/abi/types.h"

namespace guest {
using namespace lockvisor::abi;

// The run's mechanism (BootInfo flags).
PvWake pv_wake();

// Once per vCPU before any lock is used: with ipi or nmi, checks that the
// program runs at CPL0 in x2APIC mode (the entry code enabled it), else fails
// the run with the reason.
void init_pv_wake();

// Halts until woken if *ptr == val (re-checked last, with interrupts held
// back where the mechanism allows it); returns whether a `hlt` ran (false:
// the condition had changed, or a wake-up had already arrived).
bool pv_wake_wait(volatile u8* ptr, u8 val);

// Whether a wait can be bounded in time this run: the hypercall mechanism on
// the VMM's doorbells (HALT_FOR). KVM's own `hlt` (--backend kvm) and the
// IPI and NMI mechanisms have no limit.
bool pv_wake_bounded();

// The halt of pv_wake_wait(), after the caller's re-check, for at most `ns`
// (1 .. kHaltForMaxNs), where pv_wake_bounded(); returns whether the limit
// ended it (no kick consumed).
bool pv_wake_halt_for(u64 ns);

// Wakes the vCPU with this APIC ID by the run's mechanism.
void pv_wake_kick(u32 apic_id);

// This vCPU's handler counts for the run's mechanism (all 0 with the hypercall).
struct PvWakeCounts {
  u64 interrupts;      // handler entries
  u64 woken;           // ... that found the CPU in a PV wait
  u64 spurious;        // ... that did not
  u64 halts_skipped;   // NMI between the re-check and the `hlt`: the halt was skipped
  u64 handler_cycles;  // time in the handler, TSC cycles
  u64 handler_max_cycles;
};
PvWakeCounts pv_wake_counts(u32 cpu);

}  // namespace guest
