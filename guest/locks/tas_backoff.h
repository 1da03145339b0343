// tas_backoff.h: test-and-test-and-set with bounded exponential backoff.
//
// ALGORITHM (Anderson 1990; CK's ck_spinlock_cas_lock_eb / libslock TTAS)
//   As tas.h, but after every failed attempt (lock seen held, or cmpxchg lost)
//   the CPU pauses `backoff` times before looking again, doubling backoff from
//   kMinPause up to kMaxPause.  States: 0 = free, 1 = held.
//
// UNDER vCPU PREEMPTION
//   Like TAS there is no waiter order, so no lock-waiter preemption.  Backoff
//   cuts the cache-line traffic of many spinners, and spinners that pause
//   longer issue fewer `pause`s per unit time, which also delays PLE exits.
//   The cost is latency: the lock can sit free while every waiter is backing
//   off, and a long-waiting vCPU (at kMaxPause) loses races against newcomers
//   (starting at kMinPause), so it is even less fair than TAS.
//
// All-zero is unlocked (trivially constructible).
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"

namespace lockvisor::locks {

template <class Env, u32 kMinPause = 4, u32 kMaxPause = 1024>
class TasBackoffLock {
  static_assert(kMinPause >= 1 && kMinPause <= kMaxPause, "bad backoff bounds");

 public:
  static constexpr const char* kName = "tas-backoff";
  // Traits for the registry (registry.h): no order among waiters.
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "test-and-test-and-set with bounded exponential backoff";
  static constexpr u32 kMin = kMinPause;
  static constexpr u32 kMax = kMaxPause;

  void lock() {
    // Acquire (both cmpxchgs) pairs with the store-release in unlock().
    u32 v = load_relaxed(&w_);
    if (__builtin_expect(v == 0 && try_cmpxchg(&w_, &v, u32{1}, Order::acquire), 1)) return;  // the fast path
    lock_backing_off();
  }
  void unlock() { store_release(&w_, u32{0}); }
  bool try_lock() {
    u32 v = load_relaxed(&w_);
    return v == 0 && try_cmpxchg(&w_, &v, u32{1}, Order::acquire);
  }
  bool is_locked() const { return load_relaxed(&w_) != 0; }

 private:
  // Out of line and cold (as tas.h's), so that the fast path is the same
  // instructions as without the path count (lock_events.h): won after backing
  // off is `spin`.
  [[gnu::noinline, gnu::cold]] void lock_backing_off() {
    u32 backoff = kMinPause;
    for (;;) {
      for (u32 i = 0; i < backoff; i++) spin_relax<Env>();
      backoff = backoff >= kMaxPause / 2 ? kMaxPause : backoff * 2;
      u32 v = load_relaxed(&w_);
      if (v == 0 && try_cmpxchg(&w_, &v, u32{1}, Order::acquire)) break;
    }
    lockevent_inc<Env>(LockEvent::lock_spin);
  }

  u32 w_;
};

}  // namespace lockvisor::locks
