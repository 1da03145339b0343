// tas.h: test-and-test-and-set spinlock (the virt_spin_lock() fallback).
//
// ALGORITHM (Linux arch/x86/include/asm/qspinlock.h, virt_spin_lock(); Peter
// Zijlstra's proposal in the thread of Waiman Long's "[PATCH v6 00/11]
// qspinlock with paravirt support", LKML, March 2014)
//   One 32-bit word, 0 = free, 1 = held.  lock(): read the word until it is
//   0 (spinning on a shared, read-only cache line), then cmpxchg 0 -> 1; on
//   failure go back to reading.  unlock(): store-release 0.
//     0 --cmpxchg--> 1 --store 0--> 0
//
// UNDER vCPU PREEMPTION
//   No order among waiters, so no lock-waiter preemption at all: whichever
//   vCPU is running when the lock is released takes it.  A preempted holder
//   still blocks everyone (they burn their time slices spinning, which is
//   what PLE exits mitigate).  Linux uses exactly this on hypervisors without
//   PV spinlock support, because "fair locks have horrible lock 'holder'
//   preemption issues".  The cost is unbounded unfairness and a cache-line
//   stampede on release.
//
// All-zero is unlocked (trivially constructible).
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"

namespace lockvisor::locks {

namespace tas_detail {
inline constexpr u32 kLocked = 1;

// virt_spin_lock's loop: read, and only if 0 try the cmpxchg.
// Acquire pairs with the store-release in unlock (or any release that
// cleared the word, e.g. q::clear_locked_release for AutoLock).
// The first attempt is the fast path; a win after spinning counts as the
// `spin` path (lock_events.h). The spinning is out of line and cold so that
// the fast path is the same instructions as without the count (`cold` keeps
// the call's frame set-up off it; the spinner loses nothing, it waits anyway).
template <class Env>
[[gnu::noinline, gnu::cold]] void acquire_spinning(u32* w) {
  for (;;) {
    spin_relax<Env>();
    u32 v = load_relaxed(w);
    if (v == 0 && try_cmpxchg(w, &v, kLocked, Order::acquire)) break;
  }
  lockevent_inc<Env>(LockEvent::lock_spin);
}
template <class Env>
[[gnu::always_inline]] inline void acquire(u32* w) {
  u32 v = load_relaxed(w);
  if (__builtin_expect(v == 0 && try_cmpxchg(w, &v, kLocked, Order::acquire), 1)) return;
  acquire_spinning<Env>(w);
}
[[gnu::always_inline]] inline bool try_acquire(u32* w) {
  u32 v = load_relaxed(w);
  return v == 0 && try_cmpxchg(w, &v, kLocked, Order::acquire);
}
}  // namespace tas_detail

template <class Env>
class TasLock {
 public:
  static constexpr const char* kName = "tas";
  // Traits for the registry (registry.h): no order among waiters.
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "test-and-test-and-set with pause (Linux virt_spin_lock fallback)";

  void lock() { tas_detail::acquire<Env>(&w_); }
  void unlock() { store_release(&w_, u32{0}); }  // pairs with acquire()'s cmpxchg
  bool try_lock() { return tas_detail::try_acquire(&w_); }
  bool is_locked() const { return load_relaxed(&w_) != 0; }

 private:
  u32 w_;
};

}  // namespace lockvisor::locks
