// unfair_qspinlock.h: qspinlock with one lock-steal attempt (patch 05 of Waiman
// Long's "[PATCH v6 00/11] qspinlock with paravirt support", LKML, March 2014).
//
// ALGORITHM
//   Same word and queue as qspinlock.h.  Before queueing, a CPU makes ONE
//   attempt to steal the lock: a cmpxchg of the locked byte 0 -> 1 that
//   ignores pending and tail (Waiman Long: "A CPU has only one chance to steal
//   the lock. If it can't, it will be lined up in the queue just like the fair
//   version.").  If that fails it takes the ordinary MCS queue.
//
//     (n,0,0) --steal--> (n,0,1)        a newcomer overtakes queued waiters
//     (0,0,0) --fast---> (0,0,1)
//     otherwise          queue (no pending path; see below)
//
//   The pending path is disabled (that patch: slowpath(lock, -1)): a pending waiter
//   turns (*,1,0) into (*,0,1) with a single add that assumes nobody else can
//   set the locked byte, which a stealer would violate.  The queue head
//   acquires with a cmpxchg (q::head_acquire) and so tolerates stealers: it
//   simply retries.  try_lock() is also the byte cmpxchg: it succeeds whenever
//   the locked byte is 0, queue or not.
//
// UNDER vCPU PREEMPTION
//   The point of unfairness: when the lock is released while the queue head's
//   vCPU is preempted, a running vCPU can take it instead of waiting for the
//   preempted head to be scheduled (lock-waiter preemption is mostly
//   sidestepped).  Queued waiters still only get the lock in order, and a
//   preempted holder still stalls everyone.  The price is possible starvation
//   of queued waiters under heavy contention, limited by allowing each CPU
//   only one steal per acquisition.  Steals are counted as pv_lock_stealing
//   (only those that overtook a queue, not plain uncontended acquisitions).
//
// All-zero is unlocked (trivially constructible).
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::locks {

template <class Env>
class UnfairQSpinLock {
 public:
  static constexpr const char* kName = "unfair";
  // Traits for the registry (registry.h): newcomers steal past the queue.
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "qspinlock with one lock-steal attempt before queueing (Waiman Long's unfair qspinlock, LKML 2014)";

  void lock() {
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1.  Acquire pairs with unlock's release.
    if (__builtin_expect(try_cmpxchg(&w_.val, &v, q::kLockedVal, Order::acquire), 1)) return;
    // The one steal attempt:  n,0,0 -> n,0,1.
    if (steal(v)) return;
    q::queued_lock_slowpath<Env, q::NativeHooks<Env>, /*kUsePending=*/false>(&w_, v);
  }

  void unlock() { q::clear_locked_release(&w_); }  // *,*,1 -> *,*,0

  bool try_lock() {
    u32 v = q::read(&w_);
    return steal(v);
  }

  // True when the locked byte is set (try_lock() would fail).
  bool is_locked() const { return (q::read(&w_) & q::kLockedMask) != 0; }

  u32 value() const { return q::read(&w_); }
  q::QSpinWord* word() { return &w_; }

 private:
  // Byte cmpxchg locked 0 -> 1 emulated on the word (qspinlock_word.h):
  // retried only while the locked byte stays 0 (other bytes changing does not
  // make a byte cmpxchg fail).  Acquire pairs with unlock's release.
  bool steal(u32 v) {
    while (!(v & q::kLockedMask)) {
      if (try_cmpxchg(&w_.val, &v, v | q::kLockedVal, Order::acquire)) {
        lockevent_inc<Env>((v & q::kTailMask) ? LockEvent::pv_lock_stealing : LockEvent::lock_spin);
        return true;
      }
    }
    return false;
  }

  q::QSpinWord w_;
};

}  // namespace lockvisor::locks
