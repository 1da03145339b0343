// native_env.h: the lock Env (guest/locks/lock_env.h) on Linux host threads.
//
// Used by the native benchmark runner (native_runner.h, Env = BenchEnv) and,
// through tests/native/native_env.h, by the native lock tests.
//
// * cpu(): a thread-local index bound by the runner/harness (bind_cpu()).
// * wait()/kick(): a per-CPU futex word gives KVM's sticky-kick semantics:
//     kick(c):  word[c] = 1; FUTEX_WAKE(word[c])           (a pending kick stays set)
//     wait(p,v): if *p != v return;                        (kvm_wait's re-check)
//                if xchg(word[me], 0) return;              (pending kick: "halt" returns at once)
//                FUTEX_WAIT(word[me], 0, timeout);         (sleeps only while word == 0)
//                xchg(word[me], 0)                         (consume the kick that woke us)
//   A kick between the re-check and FUTEX_WAIT makes FUTEX_WAIT return
//   EAGAIN, so it is never lost.  Kicks to a CPU with a kick already pending
//   coalesce (counted).  The FUTEX_WAIT has a long timeout: hitting it means
//   a lost wake-up, which is counted (tests assert zero) instead of hanging.
//   wait_for() (lock_env.h's bounded wait) is the same sleep with the
//   caller's own limit; its expiries are counted apart (`expired`).
// * vcpu_is_preempted(): true while the thread sleeps in an injected park
//   (--inject, thread_parks.h), false otherwise.
// * spin_hook: when set, called at every spin iteration and halt inside
//   lock() (the lock probe of --inject holder/waiter schedules).
// * relax(): kPleWindow == 0: a plain `pause` (the benchmark Env: the native
//   baseline must show what spinning really costs on the host).  kPleWindow
//   > 0: `pause` plus a sched_yield() every kPleWindow pauses, a model of
//   KVM's pause-loop exiting (the test Env; see relax()).
// * Counters: kicks sent (by kicker), kicks received/consumed, kicks
//   coalesced, wait() calls, real sleeps, timeouts; so tests can check
//     sent == received + coalesced + still-pending
//   and compare `sent` with the locks' own pv_kick counters.
//
// Config flags (pv_available / virtualized / dedicated) are template
// parameters so the auto policy can be tested per configuration; kTag makes
// otherwise-identical Envs distinct (separate static state).  All state is
// static: one run at a time per Env type.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "locks/lock_env.h"
#include "locks/lock_events.h"
#include "locks/pv_qspinlock.h"
#include "locks/pvbounded_tuning.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::native {

using lockvisor::locks::kLockEventCount;
using lockvisor::locks::kMaxCpus;
using lockvisor::locks::LockEvent;
using lockvisor::locks::LockEvents;
using lockvisor::locks::u32;
using lockvisor::locks::u64;
using lockvisor::locks::u8;

struct EnvStats {
  u64 kicks_sent = 0;
  u64 kicks_received = 0;
  u64 kicks_coalesced = 0;
  u64 kicks_pending = 0;
  u64 waits = 0;
  u64 sleeps = 0;
  u64 timeouts = 0;  // untimed waits that hit kLostWakeupSeconds: lost wake-ups
  u64 expired = 0;   // wait_for() calls that ended by their own limit
};

template <int kTag, bool kPv = true, bool kVirt = false, bool kDedicated = false, unsigned kPleWindowT = 0>
struct NativeEnvT {
  struct alignas(64) PerCpu {
    u32 futex;  // the sticky kick: 1 = kick pending
    u64 kicks_sent;
    u64 kicks_received;
    u64 kicks_coalesced;
    u64 waits;
    u64 sleeps;
    u64 timeouts;
    u64 expired;
  };

  static inline thread_local int tls_cpu = -1;
  static inline unsigned nr = 8;
  static inline PerCpu percpu[kMaxCpus];
  static inline LockEvents ev[kMaxCpus];

  // Lock Env interface ---------------------------------------------------
  static unsigned cpu() {
    assert(tls_cpu >= 0 && "thread not bound to a CPU index");
    return static_cast<unsigned>(tls_cpu);
  }
  static unsigned nr_cpus() { return __atomic_load_n(&nr, __ATOMIC_RELAXED); }
  // NUMA nodes of the host threads, for NUMA-aware locks: CPU c is on node
  // c % numa_nodes (interleaved, so that every queue mixes nodes; 1 unless
  // a test sets it), or, after set_numa_map(), node_map[c] (the native
  // runner's --vnuma topology).  Set while no lock user thread runs (thread
  // creation orders it before their reads).
  static inline unsigned numa_nodes = 1;
  static inline bool numa_mapped = false;
  static inline unsigned node_map[kMaxCpus] = {};
  static unsigned numa_node(unsigned c) {
    if (__atomic_load_n(&numa_mapped, __ATOMIC_RELAXED)) return __atomic_load_n(&node_map[c], __ATOMIC_RELAXED);
    return c % __atomic_load_n(&numa_nodes, __ATOMIC_RELAXED);
  }
  static void set_numa_nodes(unsigned n) {
    __atomic_store_n(&numa_mapped, false, __ATOMIC_RELAXED);
    __atomic_store_n(&numa_nodes, n == 0 ? 1u : n, __ATOMIC_RELAXED);
  }
  // nodes[c]: the node of CPU c (CPUs past the end: node 0); empty: one node.
  static void set_numa_map(const std::vector<unsigned>& nodes) {
    for (unsigned c = 0; c < kMaxCpus; c++)
      __atomic_store_n(&node_map[c], c < nodes.size() ? nodes[c] : 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&numa_mapped, !nodes.empty(), __ATOMIC_RELAXED);
    __atomic_store_n(&numa_nodes, 1u, __ATOMIC_RELAXED);
  }
  // The preemption hint (lock_env.h vcpu_preempted_hint()): up while the
  // thread sleeps in an injected park (thread_parks.h), as a parked vCPU's
  // steal-time flag is. A host preemption the scheduler makes on its own is
  // not seen: natively there is no run-state page.
  static inline u8 preempted[kMaxCpus] = {};
  static bool vcpu_is_preempted(unsigned c) { return __atomic_load_n(&preempted[c], __ATOMIC_RELAXED) != 0; }
  // Async-signal-safe (the park's signal handler calls it).
  static void set_preempted(unsigned c, bool on) { __atomic_store_n(&preempted[c], static_cast<u8>(on), __ATOMIC_RELAXED); }
  static bool pv_available() { return kPv; }
  static bool virtualized() { return kVirt; }
  static bool dedicated() { return kDedicated; }
  static LockEvents& events() { return ev[cpu()]; }
  [[noreturn]] static void bug(const char* what) {
    std::fprintf(stderr, "lockvisor: lock bug on CPU %d: %s\n", tls_cpu, what);
    std::abort();
  }

  static void wait(volatile u8* ptr, u8 val) {
    const struct timespec timeout = {kLostWakeupSeconds, 0};
    if (sleep_unless_kicked(ptr, val, timeout)) bump(&percpu[cpu()].timeouts);
  }
  // The bounded wait (lock_env.h wait_bounded()): the same futex sleep with
  // the caller's limit; its expiries are counted apart from `timeouts`,
  // which stay lost wake-ups.
  static bool bounded_wait() { return kPv && __atomic_load_n(&bounded, __ATOMIC_RELAXED); }
  static bool wait_for(volatile u8* ptr, u8 val, u64 timeout_ns) {
    const struct timespec timeout = {static_cast<time_t>(timeout_ns / 1000000000u),
                                     static_cast<long>(timeout_ns % 1000000000u)};
    const bool expired = sleep_unless_kicked(ptr, val, timeout);
    if (expired) bump(&percpu[cpu()].expired);
    return expired;
  }

  // Optional Env hook (lock_env.h spin_relax()).  With kPleWindow > 0 it
  // models KVM pause-loop exiting: without it, fair locks with more threads
  // than host cores wait a whole host time slice for every hand-off to a
  // descheduled waiter (ticket x4 on 2 cores: ~60 s for 16000 hand-offs);
  // a PLE-enabled host instead deschedules a vCPU that keeps executing
  // `pause`.  The benchmark Env (kPleWindow == 0) does not do this: the
  // native baseline shows the real cost.
  static constexpr unsigned kPleWindow = kPleWindowT;
  static inline thread_local unsigned tls_pauses = 0;
  static void relax() {
    if (const auto hook = __atomic_load_n(&spin_hook, __ATOMIC_RELAXED); hook != nullptr) [[unlikely]]
      hook();
    locks::cpu_relax();
    if constexpr (kPleWindow != 0) {
      if (++tls_pauses % kPleWindow == 0) sched_yield();
    }
  }

  static void kick(unsigned target) {
    PerCpu& me = percpu[cpu()];
    bump(&me.kicks_sent);
    if (__atomic_exchange_n(&percpu[target].futex, 1u, __ATOMIC_ACQ_REL) != 0) bump(&me.kicks_coalesced);
    syscall(SYS_futex, &percpu[target].futex, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

  // Harness ----------------------------------------------------------------
  static constexpr long kLostWakeupSeconds = 20;
  // Whether bounded_wait() offers wait_for() (tests turn it off to run a
  // lock as on a platform whose halts cannot be bounded).  Set while no
  // lock user thread runs.
  static inline bool bounded = true;
  static void set_bounded_wait(bool on) { __atomic_store_n(&bounded, on, __ATOMIC_RELAXED); }

  // Called at every spin iteration (relax()) and halt (wait(), wait_for())
  // inside lock() when set: the lock probe of a native run's holder and
  // waiter schedules (native_runner.h). Null: nothing, one predictable
  // branch. Set while no lock user thread runs.
  static inline void (*spin_hook)() = nullptr;
  static void set_spin_hook(void (*hook)()) { __atomic_store_n(&spin_hook, hook, __ATOMIC_RELAXED); }

  static void bind_cpu(int c) { tls_cpu = c; }
  static void set_nr_cpus(unsigned n) { __atomic_store_n(&nr, n, __ATOMIC_RELAXED); }

  // Only while no lock user thread runs.
  static void reset() {
    for (unsigned c = 0; c < kMaxCpus; c++) {
      PerCpu& p = percpu[c];
      __atomic_store_n(&p.futex, 0u, __ATOMIC_RELAXED);
      __atomic_store_n(&preempted[c], u8{0}, __ATOMIC_RELAXED);
      for (u64* f : {&p.kicks_sent, &p.kicks_received, &p.kicks_coalesced, &p.waits, &p.sleeps, &p.timeouts, &p.expired})
        __atomic_store_n(f, u64{0}, __ATOMIC_RELAXED);
      ev[c].reset();
      __atomic_store_n(locks::q::QNodePool<NativeEnvT>::nesting(c), 0u, __ATOMIC_RELAXED);
    }
  }

  static EnvStats stats() {
    EnvStats s;
    for (unsigned c = 0; c < kMaxCpus; c++) {
      const PerCpu& p = percpu[c];
      s.kicks_sent += ld(&p.kicks_sent);
      s.kicks_received += ld(&p.kicks_received);
      s.kicks_coalesced += ld(&p.kicks_coalesced);
      s.kicks_pending += __atomic_load_n(&p.futex, __ATOMIC_RELAXED);
      s.waits += ld(&p.waits);
      s.sleeps += ld(&p.sleeps);
      s.timeouts += ld(&p.timeouts);
      s.expired += ld(&p.expired);
    }
    return s;
  }

  // Sum of one lock event over all CPUs.
  static u64 event_total(LockEvent e) {
    u64 sum = 0;
    for (unsigned c = 0; c < kMaxCpus; c++) sum += ev[c].get(e);
    return sum;
  }

 private:
  // kvm_wait() on the futex: true when the sleep ended by `timeout` with no
  // kick consumed.
  static bool sleep_unless_kicked(volatile u8* ptr, u8 val, const struct timespec& timeout) {
    if (const auto hook = __atomic_load_n(&spin_hook, __ATOMIC_RELAXED); hook != nullptr) [[unlikely]]
      hook();
    PerCpu& me = percpu[cpu()];
    bump(&me.waits);
    // kvm_wait(): re-check with "interrupts off" before halting.
    if (__atomic_load_n(ptr, __ATOMIC_ACQUIRE) != val) return false;
    // HLT with a pending sticky kick returns at once and consumes it.
    if (__atomic_exchange_n(&me.futex, 0u, __ATOMIC_ACQ_REL) != 0) {
      bump(&me.kicks_received);
      return false;
    }
    bump(&me.sleeps);
    long rc = syscall(SYS_futex, &me.futex, FUTEX_WAIT_PRIVATE, 0u, &timeout, nullptr, 0);
    if (__atomic_exchange_n(&me.futex, 0u, __ATOMIC_ACQ_REL) != 0) {
      bump(&me.kicks_received);
      return false;
    }
    return rc != 0 && errno == ETIMEDOUT;
  }
  static void bump(u64* p) { __atomic_fetch_add(p, u64{1}, __ATOMIC_RELAXED); }
  static u64 ld(const u64* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
};

// The host's lock-clock rate in kHz (locks/arch/primitives.h: the TSC on
// x86-64), measured once (20 ms against CLOCK_MONOTONIC) and cached: what the
// guest reads from BootInfo, for time-based locks.
inline u64 lock_clock_khz() {
  static const u64 khz = [] {
    auto ns = [] {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      return static_cast<u64>(ts.tv_sec) * 1000000000ull + static_cast<u64>(ts.tv_nsec);
    };
    const u64 n0 = ns();
    const u64 c0 = locks::read_lock_clock();
    while (ns() - n0 < 20000000ull) {
    }
    const u64 c1 = locks::read_lock_clock();
    const u64 n1 = ns();
    return (c1 - c0) * 1000000ull / (n1 - n0);
  }();
  return khz;
}

// The native equivalent of guest/runtime/lock_tuning.cpp: applies
// "key=value" lock parameters (locks/pvbounded_tuning.h keys) to
// locks::pvb::g_tuning, converting T with the host's lock-clock rate; keys it does
// not know are left alone (they belong to someone else).  Always re-derives
// T's cycles from the current bound_us.  Returns nullptr, or the first
// "key=value" whose value is not a number (or one of the key's words, e.g.
// pvb_handoff=running), or the key whose value is out of range.
inline const char* apply_lock_tuning(const std::vector<std::string>& params) {
  namespace pvb = locks::pvb;
  for (const pvb::TuningKey& k : pvb::kTuningKeys) {
    u64 value = pvb::g_tuning.*k.field;
    for (const std::string& p : params) {
      const std::size_t eq = p.find('=');
      if (eq == std::string::npos || p.compare(0, eq, k.key) != 0 || eq != std::strlen(k.key)) continue;
      if (!pvb::parse_tuning_value(k, p.c_str() + eq + 1, &value)) return p.c_str();
    }
    if (!pvb::set_tuning(k, value, lock_clock_khz())) return k.key;
  }
  return nullptr;
}

// The Env of native benchmark runs: bare metal (not virtualised, so the auto
// policy picks qspinlock, as Linux does on bare metal), PV wait/kick
// available (so the pv* locks can be measured natively, with futex sleeps
// standing in for HLT + KICK_CPU), not dedicated, plain-pause relax().
using BenchEnv = NativeEnvT<0x1000, /*kPv=*/true, /*kVirt=*/false, /*kDedicated=*/false, /*kPleWindow=*/0>;
static_assert(locks::LockEnv<BenchEnv>);

}  // namespace lockvisor::native
