// pv_cna.h: the paravirtual compact NUMA-aware lock (pvcna).
//
// ALGORITHM
//   cna.h's lock (main queue, secondary queue of remote waiters, same-node
//   handoffs up to a threshold) run with pvqspinlock's hooks
//   (pv_qspinlock.h, pv::PvHooks), the combination Waiman Long's review of
//   the HQ RFC (LKML, 2025) says CNA allows ("can coexist with
//   pvspinlock"):
//     * a queue member, main or secondary, spins kSpinThreshold iterations
//       on its node and then halts (Env::wait on its node state); the lock
//       holder that makes it head marks it hashed and its unlock kicks it
//       (the deferred kick of pv_kick_node);
//     * the queue head spins with the pending bit set, then hashes itself
//       and halts on the locked byte (_Q_SLOW_VAL); the unlocker finds it in
//       the hash table and kicks it;
//     * the hybrid unfair trylock lets a running contender steal the lock
//       while the head is halted (no pending bit).
//   Which node becomes head is CNA's choice; how it waits and is woken is
//   pvqspinlock's.  The one hook that reads the MCS predecessor,
//   wait_node's early-halt check of prev->state, sees the node this waiter
//   queued behind, even after CNA moved one of them to the other queue: a
//   hint, never needed for correctness.
//
//   States of the word: pvqspinlock's, (tail, pending, locked) with locked
//   in {0, 1, 3 = _Q_SLOW_VAL}; the secondary queue as in cna.h.
//
// BOUND
//   cna.h's (cna_threshold handoffs or cna_threshold_us, whichever comes
//   first), plus per handoff the wake-up of a head that halted: its kick is
//   deferred to the unlock (pv_kick_node), so it costs a kick and a VM entry
//   but never waits for anything but that unlock.  Steals by the hybrid
//   trylock are outside the count: they happen only while the queue head
//   has halted (no pending bit), and each is one holder more before it.
//
// UNDER vCPU PREEMPTION
//   Waiters of both queues give their host CPU back instead of spinning
//   behind a preempted holder or head; same-node handoffs keep the lock on
//   the node's host CPUs, where (with --vnuma) its waiters' vCPUs compete
//   for the same CPUs as the holder.
#pragma once

#include "locks/cna.h"
#include "locks/pv_qspinlock.h"

namespace lockvisor::locks {

template <class Env, u32 kSpinThreshold = pv::kDefaultSpinThreshold>
class PvCnaLock {
 public:
  static constexpr const char* kName = "pvcna";
  // Traits for the registry (registry.h): halts with Env::wait; steals and bypasses remote waiters.
  static constexpr bool kNeedsPv = true;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "paravirt CNA: cna's queues and handoffs with pvqspinlock's spin-then-halt waiters and deferred kicks";
  using Hooks = pv::PvHooks<Env, kSpinThreshold>;

  void lock() {
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1; acquire pairs with the release in unlock_word().
    if (__builtin_expect(try_cmpxchg(&w_.val, &v, q::kLockedVal, Order::acquire), 1)) return;
    cna::cna_lock_slowpath<Env, Hooks, false>(&w_, v);
  }
  // pvqspinlock's unlock: 1 -> 0 (release; pairs with the next owner's
  // acquire), or find the hashed head and kick it (its ordering with the
  // hashing head's xchg is described in pv_qspinlock.h).
  void unlock() { PvQSpinLock<Env, kSpinThreshold>::unlock_word(&w_); }
  bool try_lock() { return q::trylock_word(&w_); }
  bool is_locked() const { return q::read(&w_) != 0; }

  u32 value() const { return q::read(&w_); }

 private:
  q::QSpinWord w_;
};

static_assert(sizeof(PvCnaLock<void>) == 4);

}  // namespace lockvisor::locks
