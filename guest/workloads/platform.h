// platform.h: the Platform concept the workloads are templated on (next to
// the lock Env of locks/lock_env.h).
//
// The Env answers lock questions (which CPU, how to halt and kick); the
// Platform answers measurement questions: what time is it, in what unit.
// Both the guest and the native runner provide one (stateless, static
// members):
//
//   struct Platform {
//     static u64 now();                // lock-clock ticks; synchronised across CPUs
//     static u64 ns_to_cycles(u64 ns); // ns -> lock-clock ticks (see ns_to_cycles() below)
//     static u64 tsc_khz();            // the lock clock's rate, reported in WorkloadStats::tsc_khz
//   };
//
// The lock clock is locks::read_lock_clock() (locks/arch/primitives.h): the
// TSC on x86-64, whence the names "cycles" and "tsc_khz", which the report
// ABI keeps; the `time` CSR on RISC-V, whose ticks are not CPU cycles.
//
// Optional members (detected with `requires`, defaults in brackets):
//   static void barrier_relax();          one iteration of a start/end barrier
//                                         spin [cpu_relax()].  The native
//                                         runner yields the host thread now
//                                         and then so that barrier waiters do
//                                         not steal an overcommitted core.
//   static constexpr bool kAtomicCsData;  access the data protected by the
//                                         lock (acquisition counters, data
//                                         lines) with relaxed atomic loads and
//                                         stores instead of plain ones [false].
//                                         Same x86 code; only for running a
//                                         deliberately broken lock under TSan
//                                         (a plain counter would be a C++ data
//                                         race, reported and fatal).  Leave it
//                                         false otherwise: plain accesses let
//                                         TSan check the locks' acquire/release.
//   static void on_lock_arrive(unsigned lock, u64 t0);
//   static void on_lock_acquired(unsigned lock, u64 t0, u64 t1);
//   static void on_lock_releasing(unsigned lock, u64 t1);
//   static void on_lock_release(unsigned lock);
//                                         lock-operation observers [none]: a CPU
//                                         is about to call lock() on slot
//                                         `lock` (t0 = its arrival time), has
//                                         acquired it (t1), is about to call
//                                         unlock() (still holding it: where a
//                                         trace reads the release time, so a
//                                         preemption right after the release
//                                         is not drawn as a hold; it reads the
//                                         TSC itself, only when it records: no
//                                         rdtsc on the loop when nobody looks),
//                                         has released it.  The guest publishes holder
//                                         and queue position for the
//                                         preemption injector and records
//                                         acquisitions for the timeline here,
//                                         without exits.  Outside the lock's
//                                         own code: a hook sees when a CPU
//                                         waits and holds, not how the lock
//                                         queues it.
//   static u32 numa_node(unsigned cpu);   the virtual NUMA node of cpu [0 for
//                                         all]: the critical section records
//                                         the releaser's node per lock.
//   static u64 numa_remote_cycles();      the MODELLED cost of a remote
//                                         handoff [0]: a CPU acquiring a lock
//                                         whose last releaser was on another
//                                         node busy-waits this long at the
//                                         start of its critical section (the
//                                         data it is about to touch "comes
//                                         from the other node").
#pragma once

#include "lockvisor/abi/types.h"
#include "locks/atomic.h"

namespace lockvisor::workloads {

using lockvisor::abi::u32;
using lockvisor::abi::u64;

namespace detail {
template <class A, class B> inline constexpr bool same_v = false;
template <class A> inline constexpr bool same_v<A, A> = true;
}  // namespace detail

template <class P>
concept Platform = requires(u64 ns) {
  requires detail::same_v<decltype(P::now()), u64>;
  requires detail::same_v<decltype(P::ns_to_cycles(ns)), u64>;
  requires detail::same_v<decltype(P::tsc_khz()), u64>;
};

// ns * khz / 10^6, exact (floor) for any realistic khz (< 2^44), saturating
// instead of wrapping.  No 128-bit division: the guest links without libgcc
// (__udivti3).
constexpr u64 ns_to_cycles(u64 ns, u64 tsc_khz) {
  const u64 q = ns / 1000000u, r = ns % 1000000u;
  u64 hi = 0;
  if (__builtin_mul_overflow(q, tsc_khz, &hi)) return ~u64{0};
  const u64 lo = r * tsc_khz / 1000000u;  // r < 10^6: no overflow below khz < 2^44
  return hi + lo < hi ? ~u64{0} : hi + lo;
}
static_assert(ns_to_cycles(1000, 3000000) == 3000);
static_assert(ns_to_cycles(1, 2500000) == 2);
static_assert(ns_to_cycles(1999999, 1000) == 1999);
static_assert(ns_to_cycles(~u64{0}, 1000000) == ~u64{0});
static_assert(ns_to_cycles(~u64{0}, 1000) == ~u64{0} / 1000);

// One iteration of a barrier wait (see the optional hook above).
template <class P>
[[gnu::always_inline]] inline void barrier_relax() {
  if constexpr (requires { P::barrier_relax(); }) {
    P::barrier_relax();
  } else {
    locks::cpu_relax();
  }
}

template <class P>
[[gnu::always_inline]] inline void on_lock_arrive(unsigned lock, u64 t0) {
  if constexpr (requires { P::on_lock_arrive(lock, t0); }) P::on_lock_arrive(lock, t0);
}
template <class P>
[[gnu::always_inline]] inline void on_lock_acquired(unsigned lock, u64 t0, u64 t1) {
  if constexpr (requires { P::on_lock_acquired(lock, t0, t1); }) P::on_lock_acquired(lock, t0, t1);
}
template <class P>
[[gnu::always_inline]] inline void on_lock_releasing(unsigned lock, u64 t1) {
  if constexpr (requires { P::on_lock_releasing(lock, t1); }) P::on_lock_releasing(lock, t1);
}
template <class P>
[[gnu::always_inline]] inline void on_lock_release(unsigned lock) {
  if constexpr (requires { P::on_lock_release(lock); }) P::on_lock_release(lock);
}

template <class P>
constexpr bool atomic_cs_data() {
  if constexpr (requires { P::kAtomicCsData; }) {
    return P::kAtomicCsData;
  } else {
    return false;
  }
}

}  // namespace lockvisor::workloads
