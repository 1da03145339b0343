// pv_confer.h: paravirtual queued spinlock whose waiters confer their time
// slice to a preempted lock holder (pvconfer).
//
// ALGORITHM (the design of Pan Xinhui, "[PATCH v5 0/6] powerPC/pSeries use
//   pv-qspinlock as the default spinlock implementation", linuxppc-dev/LKML,
//   June 2016, on lockvisor's hypercalls: H_CONFER -> YIELD_TO, H_PROD -> KICK)
//   The pvqspinlock of pv_qspinlock.h (same word, MCS queue, hash table,
//   spin-then-halt, deferred kick at unlock, hybrid unfair trylock) plus two
//   things:
//
//   1. The holder is recorded.  The registry's locks are one 32-bit word and
//      pvqspinlock uses all of it (byte 1 is the head's pending bit), so the
//      holder is recorded per CPU instead: ConferCpu::held is the lock this
//      CPU took last and still holds, written by that CPU alone right after
//      each acquisition (fast path included: one store to its own cache line)
//      and cleared before its release.  "Who holds L" is the CPU whose record
//      names L, found by reading nr_cpus() records; only waiters look, and
//      only at their periodic checks.  A CPU holding nested locks records the
//      innermost one; releasing it clears the record, so the outer lock's
//      holder is then unknown until its next acquisition (a hint lost, never
//      a wrong one).
//   2. Conferring.  At each periodic check (every kPrevCheckMask+1 spins,
//      where pvqspinlock looks at its predecessor) a waiter, queue node or
//      head, looks up the holder; if that is another CPU and Env's hint says
//      its vCPU is preempted (the run-state page, else the steal-time record's
//      preempted byte: guest_lock_env.h), the waiter counts pv_confer, asks
//      the host to run the holder (yield_to_hint: YIELD_TO) and stops
//      spinning: it halts at once, as pvqspinlock does after its spin
//      threshold (a node on its state, the head with the lock hashed and
//      locked = _Q_SLOW_VAL).  The CPU it gives up is what the host can run
//      the holder on; it is woken by the kick (the pSeries prod) that
//      pvqspinlock's unlock and pv_kick_node already send.  A waiter whose
//      hint says "running" or "unknown" spins as in pvqspinlock.
//
//   States of the word: those of pv_qspinlock.h, unchanged.  Per CPU:
//     held:    nullptr -acquire L-> L -release L-> nullptr
//              (L -acquire M, nested-> M -release M-> nullptr)
//     waiting: the lock this CPU's innermost slow path is waiting for (the
//              queue node's lock, which the shared slow path does not pass to
//              the node's wait), saved and restored around nested waits.
//   Waiter at a check:  holder h of L known, h != me, h preempted
//                         -> pv_confer, YIELD_TO h, halt (woken by a kick)
//                       otherwise -> keep spinning (pvqspinlock rules)
//
// UNDER vCPU PREEMPTION
//   Lock-holder preemption is what pvqspinlock can only wait out: its waiters
//   spin for their threshold and then halt, and the host decides when the
//   holder runs again.  Here a waiter that sees the holder descheduled gives
//   its CPU away at once and names the vCPU to run with it, the pSeries
//   confer.  All hints: a wrong "preempted" costs one hypercall and an early
//   halt, a missed one is pvqspinlock's behaviour; the lock's correctness is
//   pvqspinlock's and depends on none of them.  The record costs every
//   acquisition a store to the CPU's own line and every release a load and
//   a store.
//
// All-zero is unlocked (trivially constructible); the records are static per
// Env.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/pv_qspinlock.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::locks {

namespace pvc {

using q::QNode;
using q::QSpinWord;

// One CPU's record, on its own cache line, written only by that CPU.
struct alignas(kCacheLine) ConferCpu {
  const QSpinWord* held;     // the lock this CPU holds (innermost), or nullptr
  const QSpinWord* waiting;  // the lock its innermost slow path waits for
};

template <class Env>
struct Records {
  static inline ConferCpu cpu[kMaxCpus];

  // The CPU recorded as holding `lock`, other than `me`; kMaxCpus if none.
  static unsigned holder_of(const QSpinWord* lock, unsigned me) {
    unsigned n = Env::nr_cpus();
    if (n > kMaxCpus) n = kMaxCpus;
    for (unsigned c = 0; c < n; c++)
      if (c != me && load_relaxed(&cpu[c].held) == lock) return c;
    return kMaxCpus;
  }

  // The confer rule: if `lock`'s holder is preempted, ask the host to run it
  // and tell the caller to halt now.
  static bool confer(const QSpinWord* lock) {
    if (lock == nullptr) return false;
    const unsigned h = holder_of(lock, Env::cpu());
    if (h == kMaxCpus || !vcpu_preempted_hint<Env>(h)) return false;
    lockevent_inc<Env>(LockEvent::pv_confer);
    yield_to_hint<Env>(h);
    return true;
  }
};

// The Confer policy of pv::PvHooks.
template <class Env>
struct HolderConfer {
  static bool node_confers(QNode* node) {
    return Records<Env>::confer(load_relaxed(&Records<Env>::cpu[load_relaxed(&node->cpu)].waiting));
  }
  static bool head_confers(const QSpinWord* lock) { return Records<Env>::confer(lock); }
};

}  // namespace pvc

template <class Env, u32 kSpinThreshold = pv::kDefaultSpinThreshold>
class PvConferLock {
 public:
  static constexpr const char* kName = "pvconfer";
  // Traits for the registry (registry.h): pvqspinlock's (halts with
  // Env::wait unconditionally; the hybrid trylock steals).
  static constexpr bool kNeedsPv = true;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "paravirt qspinlock whose waiters confer their time slice to a preempted holder (YIELD_TO), woken by kick";
  using Base = PvQSpinLock<Env, kSpinThreshold>;
  using Hooks = pv::PvHooks<Env, kSpinThreshold, pvc::HolderConfer<Env>>;

  void lock() {
    q::QSpinWord* const w = &w_;
    pvc::ConferCpu& me = pvc::Records<Env>::cpu[Env::cpu()];
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1.  Acquire pairs with unlock's release.
    if (__builtin_expect(!try_cmpxchg(&w->val, &v, q::kLockedVal, Order::acquire), 0)) {
      // Nested waits (an interrupt's lock on this CPU) restore the outer one.
      const q::QSpinWord* const outer = load_relaxed(&me.waiting);
      store_relaxed(&me.waiting, static_cast<const q::QSpinWord*>(w));
      Base::template slowpath_word<Hooks>(w, v);
      store_relaxed(&me.waiting, outer);
    }
    store_relaxed(&me.held, static_cast<const q::QSpinWord*>(w));
  }

  void unlock() {
    pvc::ConferCpu& me = pvc::Records<Env>::cpu[Env::cpu()];
    // Cleared before the release (the unlock's release orders it), so a
    // waiter never finds this CPU named after the lock has moved on.
    if (load_relaxed(&me.held) == &w_) store_relaxed(&me.held, static_cast<const q::QSpinWord*>(nullptr));
    Base::unlock_word(&w_);
  }

  bool try_lock() {
    if (!Base::trylock_word(&w_)) return false;
    store_relaxed(&pvc::Records<Env>::cpu[Env::cpu()].held, static_cast<const q::QSpinWord*>(&w_));
    return true;
  }
  bool is_locked() const { return q::read(&w_) != 0; }

  u32 value() const { return q::read(&w_); }
  q::QSpinWord* word() { return &w_; }

 private:
  q::QSpinWord w_;
};

static_assert(sizeof(PvConferLock<void>) == 4);

}  // namespace lockvisor::locks
