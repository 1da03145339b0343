// lock_env.h: the Env concept every lock in guest/locks/ is templated on.
//
// A lock never talks to hardware, a hypervisor or an OS directly.  Everything
// platform-specific (which CPU am I, how do I halt, how do I wake another CPU,
// am I virtualised, where are my counters) comes through a stateless Env type
// with static members:
//
//   struct Env {
//     static unsigned cpu();                       // this CPU's index, 0..nr_cpus()-1 (< kMaxCpus)
//     static unsigned nr_cpus();                   // CPUs taking part
//     static void wait(volatile u8* ptr, u8 val);  // pv_wait: suspend while *ptr == val
//     static void kick(unsigned cpu);              // pv_kick: wake cpu
//     static bool pv_available();                  // PV wait/kick advertised (KVM_FEATURE_PV_UNHALT)
//     static bool virtualized();                   // running under a hypervisor
//     static bool dedicated();                     // vCPUs are dedicated (KVM_HINTS_REALTIME)
//     static LockEvents& events();                 // this CPU's counters (lock_events.h)
//     [[noreturn]] static void bug(const char* what); // a lock invariant broke: report, stop
//   };
//
// bug() exists so that "cannot happen" paths say what happened where the
// platform can report it (the guest's report channel, stderr natively),
// rather than trapping with `ud2`, which guest CPL3 code must not contain.
//
// Optional: `static void relax();`, one spin-wait iteration (see spin_relax()).
// Optional: `static bool vcpu_is_preempted(unsigned cpu);`, a HINT that cpu's
// vCPU is descheduled right now (see vcpu_preempted_hint()); and
// `static abi::RunState vcpu_run_state(unsigned cpu);`, the same hint as
// unknown/running/preempted/sleeping (see vcpu_run_state_hint()).
// Optional: `static void yield_to(unsigned cpu);`, ask the host to run cpu's
// vCPU next (KVM_HC_SCHED_YIELD-like boost; see yield_to_hint()).
// Optional: `static unsigned numa_node(unsigned cpu);`, the (virtual) NUMA
// node of cpu (see numa_node_of()); without it every CPU is on node 0.
// Optional: `static bool bounded_wait();` and `static bool wait_for(volatile
// u8* ptr, u8 val, u64 timeout_ns);`, a wait() that also ends once
// timeout_ns have passed without a kick, where the platform can bound a
// halt this run (see wait_bounded()).
//
// The wait/kick contract (Linux pv_wait/pv_kick: kernel/locking/qspinlock_paravirt.h,
// arch/x86/kernel/kvm.c, and KVM's pv_unhalted in arch/x86/kvm/x86.c):
//   * wait(ptr, val) re-reads *ptr and returns at once if it no longer equals
//     val; otherwise it suspends the CPU.  The re-check and the suspend are
//     atomic with respect to kick() (on KVM: interrupts off, then HLT).
//   * wait() may return spuriously, at any time; every caller loops.
//   * kick(cpu) wakes cpu if it is suspended in wait().  If cpu is NOT
//     suspended the kick is STICKY: it is remembered and makes cpu's next
//     wait() return immediately, consuming it (KVM's pv_unhalted flag:
//     "sticky until the next halt").  Several kicks before a wait may
//     coalesce into one.  So a kick sent between a waiter's last check of
//     the lock and its suspend is never lost.
//   * wait() reads *ptr with (at least) an atomic byte load; `ptr` may point
//     into a lock word whose other bytes are concurrently updated with 32-bit
//     atomics (the qspinlock's locked byte).  It gives no ordering guarantee:
//     callers re-check their condition with their own acquire loads.
//
// cpu() must be stable while a lock operation is in progress (spinlocks run
// with preemption off) and unique among CPUs taking part concurrently.
#pragma once

#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/types.h"
#include "lockvisor/abi/vcpu_runstate.h"
#include "locks/atomic.h"
#include "locks/lock_events.h"

namespace lockvisor::locks {

using lockvisor::abi::u16;
using lockvisor::abi::u32;
using lockvisor::abi::u64;
using lockvisor::abi::u8;

// Compile-time CPU limit for per-CPU lock state (queue nodes, waiter slots,
// the PV hash table size).  Equal to the VMM's vCPU limit: every lock
// serves every CPU a VM may have (a lock word that holds a CPU number
// static_asserts that its field is wide enough).
inline constexpr unsigned kMaxCpus = lockvisor::abi::kMaxVcpus;

// Assumed cache-line size for alignment of per-CPU and per-bucket data.
inline constexpr unsigned kCacheLine = 64;

namespace detail {
template <class A, class B> inline constexpr bool same_v = false;
template <class A> inline constexpr bool same_v<A, A> = true;
}  // namespace detail

template <class E>
concept LockEnv = requires(volatile u8* ptr, u8 val, unsigned cpu) {
  requires detail::same_v<decltype(E::cpu()), unsigned>;
  requires detail::same_v<decltype(E::nr_cpus()), unsigned>;
  requires detail::same_v<decltype(E::wait(ptr, val)), void>;
  requires detail::same_v<decltype(E::kick(cpu)), void>;
  requires detail::same_v<decltype(E::pv_available()), bool>;
  requires detail::same_v<decltype(E::virtualized()), bool>;
  requires detail::same_v<decltype(E::dedicated()), bool>;
  requires detail::same_v<decltype(E::events()), LockEvents&>;
  E::bug("");
};

// The uniform lock interface (CK style): every lock in the registry models it.
template <class L>
concept Lock = requires(L& l, const L& cl) {
  l.lock();
  l.unlock();
  requires detail::same_v<decltype(l.try_lock()), bool>;
  requires detail::same_v<decltype(cl.is_locked()), bool>;
  requires detail::same_v<decltype(L::kName), const char* const>;
  requires detail::same_v<decltype(L::kDescription), const char* const>;
};

// One iteration of a spin-wait loop.  Env may provide an optional
//   static void relax();
// hook; otherwise this is cpu_relax() (`pause`).  A hypervisor sees a vCPU's
// pause loop and may deschedule it (KVM pause-loop exiting, PLE); the native
// test Env models PLE with this hook by yielding the host thread after a run
// of pauses.  Guest Envs normally leave it out.
template <class Env>
[[gnu::always_inline]] inline void spin_relax() {
  if constexpr (requires { Env::relax(); }) {
    Env::relax();
  } else {
    cpu_relax();
  }
}

// Whether CPU `cpu` is known to be preempted (its vCPU descheduled by the
// host) right now.  Env may provide an optional
//   static bool vcpu_is_preempted(unsigned cpu);
// (the guest's comes from the run-state page, docs/runstate.md); otherwise
// this is false.  A HINT: false means "running or unknown", never a reason to
// skip a waiter, and a lock must stay correct whatever it returns.
template <class Env>
[[gnu::always_inline]] inline bool vcpu_preempted_hint(unsigned cpu) {
  if constexpr (requires { Env::vcpu_is_preempted(cpu); }) {
    return static_cast<bool>(Env::vcpu_is_preempted(cpu));
  } else {
    return false;
  }
}

// The tri-state (four-valued) form: Env::vcpu_run_state(cpu) when the Env
// has it, else RunState::kUnknown.
template <class Env>
[[gnu::always_inline]] inline lockvisor::abi::RunState vcpu_run_state_hint(unsigned cpu) {
  if constexpr (requires { Env::vcpu_run_state(cpu); }) {
    return Env::vcpu_run_state(cpu);
  } else {
    return lockvisor::abi::RunState::kUnknown;
  }
}

// Ask the host to run CPU `cpu` soon (a boost for a descheduled lock waiter
// that was just handed the lock).  Env may provide an optional
//   static void yield_to(unsigned cpu);
// (the guest's is the YIELD_TO hypercall); otherwise this does nothing.  A
// HINT too: the lock must not depend on it for progress.
template <class Env>
[[gnu::always_inline]] inline void yield_to_hint(unsigned cpu) {
  if constexpr (requires { Env::yield_to(cpu); }) {
    Env::yield_to(cpu);
  } else {
    (void)cpu;
  }
}

// The NUMA node of CPU `cpu`: Env::numa_node(cpu) when the Env has it (the
// guest's comes from BootInfo, --vnuma), else 0.  NUMA-aware locks (cna.h,
// hq.h) use it to prefer same-node successors; it is a placement fact, not
// a hint about run state, and a lock must stay correct whatever it returns.
template <class Env>
[[gnu::always_inline]] inline unsigned numa_node_of(unsigned cpu) {
  if constexpr (requires { Env::numa_node(cpu); }) {
    return static_cast<unsigned>(Env::numa_node(cpu));
  } else {
    (void)cpu;
    return 0;
  }
}

// Whether this run's wait() can be bounded in time: Env::bounded_wait()
// when the Env has it (the guest: lockvisor's HALT_FOR doorbell; natively: a
// futex timeout), else false.  Fixed for a run.
template <class Env>
[[gnu::always_inline]] inline bool bounded_wait_available() {
  if constexpr (requires { Env::bounded_wait(); }) {
    return static_cast<bool>(Env::bounded_wait());
  } else {
    return false;
  }
}

// wait(ptr, val) that also returns once timeout_ns have passed, where
// bounded_wait_available(); elsewhere it is wait() itself.  Returns true
// when it ended by the time limit (no kick consumed), false after a kick, a
// changed *ptr or a spurious return.  The wait/kick contract above holds
// unchanged: a lock may use the time limit only to recover from a kick it
// could not ask for reliably, never in place of one.
template <class Env>
[[gnu::always_inline]] inline bool wait_bounded(volatile u8* ptr, u8 val, u64 timeout_ns) {
  if constexpr (requires { Env::wait_for(ptr, val, timeout_ns); }) {
    if (bounded_wait_available<Env>()) return static_cast<bool>(Env::wait_for(ptr, val, timeout_ns));
  }
  Env::wait(ptr, val);
  return false;
}

// Count one lock event on the calling CPU.
template <class Env>
[[gnu::always_inline]] inline void lockevent_inc(LockEvent e, u64 n = 1) {
  Env::events().add(e, n);
}

}  // namespace lockvisor::locks
