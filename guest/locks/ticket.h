// ticket.h: the classic FIFO ticket spinlock.
//
// ALGORITHM
//   One 32-bit word split in two 16-bit halves:
//     bits  0..15  owner  ("head": the ticket now being served)
//     bits 16..31  next   ("tail": the next ticket to hand out)
//   lock():   my = fetch_add(next, 1); spin until owner == my.
//   unlock(): owner += 1 (only the holder writes owner).
//   Free iff owner == next.  All-zero is unlocked.
//     (owner, next): (k, k) --lock--> (k, k+1) --lock--> (k, k+2)
//                    --unlock--> (k+1, k+2) ...
//
//   Both halves are updated with 32-bit atomic adds (one access size for the
//   word, see qspinlock_word.h).  The +1 on `next` carries out of bit 31 and
//   is lost, which is the wrap we want.  The +1 on `owner` must not carry
//   into `next` when owner wraps 0xffff -> 0: the holder knows owner (nobody
//   else writes it), so it adds 1 - 0x10000 in that one case.
//
// UNDER vCPU PREEMPTION
//   Strict FIFO is the worst case for overcommitted vCPUs: the lock is
//   granted to a specific ticket, so if that waiter's vCPU is preempted the
//   lock sits idle until it runs again, even though other vCPUs are spinning
//   (lock-waiter preemption), and a preempted holder blocks the whole line.
//   With more waiters than pCPUs almost every hand-off can hit a descheduled
//   waiter.  This is what PV ticketlocks (pv_ticket.h) and later pvqspinlock
//   were built to fix.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"

namespace lockvisor::locks {

template <class Env>
class TicketLock {
 public:
  static constexpr const char* kName = "ticket";
  // Traits for the registry (registry.h): a FIFO ticket lock.
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = true;
  static constexpr const char* kDescription = "fair FIFO ticket lock (next/owner halves)";

  static constexpr u32 kOwnerMask = 0xffffu;
  static constexpr u32 kNextShift = 16;
  static constexpr u32 kNextInc = 1u << kNextShift;

  void lock() {
    // Take a ticket.  Relaxed: the acquire is the load that sees our turn.
    const u32 old = fetch_add(&w_, kNextInc, Order::relaxed);
    const u32 my = old >> kNextShift;
    // Wait for our turn (also taken when uncontended: one extra load).
    // Acquire pairs with the release add in unlock().  Our turn at the first
    // look is the fast path; after waiting, the `queue` path (lock_events.h).
    if (__builtin_expect((load_acquire(&w_) & kOwnerMask) == my, 1)) return;
    do spin_relax<Env>();
    while ((load_acquire(&w_) & kOwnerMask) != my);
    lockevent_inc<Env>(LockEvent::lock_queue);
  }

  void unlock() {
    const u32 owner = load_relaxed(&w_) & kOwnerMask;  // stable: only we write it
    const u32 delta = owner == kOwnerMask ? 1u - kNextInc : 1u;
    fetch_add(&w_, delta, Order::release);  // pairs with lock()'s acquire load
  }

  bool try_lock() {
    u32 v = load_relaxed(&w_);
    if ((v & kOwnerMask) != (v >> kNextShift)) return false;
    return try_cmpxchg(&w_, &v, v + kNextInc, Order::acquire);
  }

  bool is_locked() const {
    const u32 v = load_relaxed(&w_);
    return (v & kOwnerMask) != (v >> kNextShift);
  }

  u32 value() const { return load_relaxed(&w_); }

 private:
  u32 w_;
};

}  // namespace lockvisor::locks
