// The lock runtime's Env in the guest (locks/lock_env.h): the PV primitives
// are the VMM's halt and KICK_CPU, exactly as a KVM guest's kvm_wait and
// kvm_kick_cpu use HLT and the hypercall, or with --pv-wake an IPI or an NMI
// (runtime/wake.h).
#pragma once
#include "locks/lock_events.h"
#include "locks/pvbounded_tuning.h"
#include "runtime/boot.h"
#include "runtime/cpu.h"
#include "runtime/numa.h"
#include "runtime/pv.h"
#include "runtime/ucall_report.h"
#include "runtime/wake.h"
#include "runtime/runstate.h"
#include "runtime/steal_time.h"
#include "runtime/yield_to.h"

namespace guest {

// Feature answers, read once from CPUID at boot (CPUID is an exit).
struct LockFeatures {
  bool pv_unhalt;
  bool dedicated;
  bool bounded_wait;  // pv_wake_bounded(): read on every pvbounded unlock, so cached
};
extern LockFeatures g_lock_features;
extern lockvisor::locks::LockEvents g_lock_events[kMaxVcpus];

struct GuestLockEnv {
  static unsigned cpu() { return this_cpu(); }
  static unsigned nr_cpus() { return guest::nr_cpus(); }
  // kvm_wait: re-check, then halt. A kick that lands between the check and
  // the halt is kept (sticky: runtime/wake.h says how for each mechanism),
  // so the halt returns at once.
  static void wait(volatile u8* ptr, u8 val) {
    if (*ptr == val) pv_wake_wait(ptr, val);
  }
  // The bounded wait (locks/lock_env.h wait_bounded()): HALT_FOR, where the
  // run's halts go to the VMM's doorbell. Every pvb_head_halt_us is a limit
  // HALT_FOR takes.
  static_assert(lockvisor::locks::pvb::kMaxHeadHaltUs * 1000 <= kHaltForMaxNs);
  static bool bounded_wait() { return g_lock_features.bounded_wait; }
  static bool wait_for(volatile u8* ptr, u8 val, u64 ns) { return *ptr == val && pv_wake_halt_for(ns); }
  static void kick(unsigned cpu) { pv_wake_kick(apic_id_of(cpu)); }
  static bool pv_available() { return g_lock_features.pv_unhalt; }
  static bool virtualized() { return true; }
  static bool dedicated() { return g_lock_features.dedicated; }
  // Whether vCPU `cpu` is descheduled, a hint from two sources: the run-state
  // page (runtime/runstate.h; the only one that works on PVM) and the
  // steal-time record's `preempted` byte (runtime/steal_time.h; hardware KVM).
  // Preempted if either says so. Optional members of the Env (locks/lock_env.h).
  static bool vcpu_is_preempted(unsigned cpu) { return guest::steal_time_preempted(cpu) || guest::vcpu_is_preempted(cpu); }
  // The four-valued form. The steal-time byte can only ever say "preempted"
  // (a clear byte also means "not enabled" or "PVM"), so it overrides the page
  // only in that direction: where neither source can tell, this is kUnknown,
  // never kRunning.
  static lockvisor::abi::RunState vcpu_run_state(unsigned cpu) {
    if (guest::steal_time_preempted(cpu)) return lockvisor::abi::RunState::kPreempted;
    return guest::vcpu_run_state(cpu);
  }
  // YIELD_TO (runtime/yield_to.h): let vCPU `cpu` run next on its host CPU.
  // Optional member of the Env.
  static void yield_to(unsigned cpu) { yield_to_apic(apic_id_of(cpu)); }
  // The virtual NUMA node (--vnuma; runtime/numa.h). Optional member.
  static unsigned numa_node(unsigned cpu) { return guest::numa_node_of(cpu); }
  static lockvisor::locks::LockEvents& events() { return g_lock_events[this_cpu()]; }
  [[noreturn]] static void bug(const char* what) { assert_fail(__FILE__, __LINE__, what); }
};

// Reads CPUID once; call on every vCPU before any lock is used.
void init_lock_features();

}  // namespace guest
