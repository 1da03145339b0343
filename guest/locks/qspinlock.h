// qspinlock.h: the queued spinlock (qspinlock), and the slow path shared by
// the whole qspinlock family (unfair, pvqspinlock, auto).
//
// ALGORITHM (Linux kernel/locking/qspinlock.c; patches 01-04 of Waiman Long,
// "[PATCH v6 00/11] qspinlock with paravirt support", LKML, March 2014)
//   A 4-byte lock built from an MCS queue.  Spinlocks are held with preemption
//   off, so a CPU waits on at most one lock per nesting level (task, softirq,
//   hardirq, NMI): 4 per-CPU queue nodes suffice, and a node is named by
//   (cpu + 1, idx), which fits in the upper 16 bits of the word next to the
//   locked byte and the pending byte (layout: qspinlock_word.h).
//
//   Three ways in, cheapest first:
//     fast path   cmpxchg 0,0,0 -> 0,0,1
//     pending     the 2nd contender sets the pending bit and spins on the
//                 lock word itself (no node, no queue cache line):
//                   0,0,1 -> 0,1,1 ; wait ; 0,1,0 -> 0,0,1
//     queue       the 3rd and later contenders append a per-CPU node with
//                 xchg_tail and spin on their OWN node (local spinning); the
//                 queue head spins on the word until locked AND pending are
//                 clear, takes the lock, and passes headship to its successor.
//
//   State diagram, (tail, pending, locked):
//
//     fast path         pending path                 queue path
//     (0,0,0)           (0,0,1) --set pending-->     (n,*,*) --xchg_tail--> (m,*,*)
//       | cmpxchg         (0,1,1) --owner unlock-->    ... head waits for (n,0,0)
//       v                 (0,1,0) --clear_pending_     (n,0,0) -> (0,0,1) if n is ours
//     (0,0,1)                        set_locked-->     (n,0,0) -> (n,0,1) otherwise,
//       | unlock          (0,0,1)                                then mcs_pass(next)
//       v
//     (0,0,0)           unlock: (*,*,1) -> (*,*,0)
//
//   A pending waiter that sees a tail or another pending waiter undoes its
//   pending bit (if it set it) and queues.  One that sees (0,1,0) waits up to
//   kPendingLoops for that hand-over to finish before deciding.
//   Node exhaustion (a 5th nesting level) falls back to spinning on trylock
//   (lock_no_node): correct but unfair.
//
// UNDER vCPU PREEMPTION
//   The qspinlock is fair (FIFO through the queue, the pending waiter goes
//   next), which is exactly what hurts when vCPUs are overcommitted:
//   * lock-holder preemption: everyone spins until the holder's vCPU runs;
//   * lock-waiter preemption: the lock is handed to the queue head (or a
//     successor gets headship) while that vCPU is descheduled, so the lock
//     sits unused while runnable vCPUs spin behind it.  Each hand-off can
//     cost a whole host time slice.
//   This is why a KVM guest without PV support falls back to a TAS lock
//   (tas.h) and with PV support uses pvqspinlock (pv_qspinlock.h).  The native
//   qspinlock is the right choice on bare metal and on dedicated vCPUs.
//
// HOOKS
//   The slow path is written once and parameterised by a Hooks policy (the
//   C++ version of Linux compiling qspinlock.c twice).  NativeHooks has empty
//   inline functions, so the native instantiation carries no PV cost;
//   pv_qspinlock.h supplies PvHooks.
//
// The lock is trivially constructible: all-zero is unlocked.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/pvbounded_tuning.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::locks {

namespace q {

// Native (no-op) hooks.  kPv = false keeps the pending path and the plain
// whole-word trylock.
template <class Env>
struct NativeHooks {
  static constexpr bool kPv = false;
  static void init_node(QNode*) {}
  static void wait_node(QNode*, QNode*) {}
  static void kick_node(QSpinWord*, QNode*) {}
  // Pass queue headship (arch_mcs_spin_unlock_contended).
  static void pass(QNode* next) { mcs_pass(next); }
  // Returns non-zero (the current word, locked) if it acquired the lock.
  static u32 wait_head_or_lock(QSpinWord*, QNode*) { return 0; }
  // Only from (0,0,0): nobody is queued, so a win is the `spin` path.
  static bool trylock(QSpinWord* l) {
    if (!trylock_word(l)) return false;
    lockevent_inc<Env>(LockEvent::lock_spin);
    return true;
  }
};

// The pending-bit path for the 2nd contender.  Returns true if it acquired
// the lock; false means "go and queue".  `val` is the word the fast path saw.
template <class Env>
inline bool pending_path(QSpinWord* lock, u32 val) {
  // Wait for an in-progress pending -> locked hand-over:  0,1,0 -> 0,0,1.
  // Bounded; afterwards we queue rather than spin indefinitely.
  if (val == kPendingVal) {
    unsigned cnt = kPendingLoops;
    do {
      spin_relax<Env>();
      val = read(lock);
    } while (val == kPendingVal && --cnt);
  }

  // Any contention beyond a plain owner (a tail, or a pending waiter): queue.
  if (val & ~kLockedMask) return false;

  // trylock || pending:  0,0,* -> 0,1,*
  val = fetch_set_pending_acquire(lock);

  // Someone queued or set pending meanwhile.  Undo our pending bit if it was
  // ours (*,1,* -> *,0,*) and queue.
  if (val & ~kLockedMask) {
    if (!(val & kPendingMask)) clear_pending(lock);
    return false;
  }

  // We are pending: wait for the owner to go away.   0,1,1 -> *,1,0
  // Acquire pairs with the owner's release in clear_locked_release().
  if (val & kLockedMask) {
    while (read_acquire(lock) & kLockedMask) spin_relax<Env>();
  }

  // Take ownership and clear pending.   *,1,0 -> *,0,1
  // (A queue head, if one appeared, is waiting for pending to clear, and no
  // one may set the locked byte while pending is set.)
  clear_pending_set_locked(lock);
  lockevent_inc<Env>(LockEvent::lock_pending);
  return true;
}

// The shared slow path.  kUsePending selects the pending-bit path (native
// fair lock); the unfair lock and PV skip it (a pending waiter must not be
// overtaken by a stealer, see unfair_qspinlock.h).  The run-time parameter
// q_pending=0 (pvbounded_tuning.h) turns it off for the native lock too: the
// second contender then queues, and the queue head is the only waiter that
// spins on the word.  Safe either way: nobody sets pending when it is off, and
// head_acquire() waits for locked and pending clear whatever set them.
template <class Env, class Hooks, bool kUsePending>
[[gnu::noinline]] void queued_lock_slowpath(QSpinWord* lock, u32 val) {
  using Pool = QNodePool<Env>;
  using Tail = typename TailOf<Hooks>::type;
  static_assert(kMaxCpus <= Tail::kMaxCpus, "the hooks' tail layout cannot name every CPU");

  if constexpr (kUsePending && !Hooks::kPv) {
    if (pvb::tuning(&pvb::Tuning::q_pending) && pending_path<Env>(lock, val)) return;
  }

  lockevent_inc<Env>(LockEvent::lock_slowpath);

  const unsigned cpu = Env::cpu();
  QNode* const node0 = Pool::node(cpu, 0);
  const u32 idx = load_relaxed(&node0->count);
  store_relaxed(&node0->count, idx + 1);
  barrier();  // the nesting count is visible to a nested (interrupt) locker first

  QNode* node = nullptr;
  QNode* next = nullptr;
  u32 tail = 0;
  u32 old = 0;

  if (idx >= kMaxNodes) {
    // All 4 nodes in use (a 5th nesting level).  Spin on trylock instead of
    // queueing: correct, but unfair (lock_no_node).
    lockevent_inc<Env>(LockEvent::lock_no_node);
    while (!Hooks::trylock(lock)) spin_relax<Env>();
    goto release;
  }

  node = Pool::node(cpu, idx);
  tail = encode_tail<Tail>(cpu, idx);
  if (idx) lockevent_inc<Env>(static_cast<LockEvent>(static_cast<unsigned>(LockEvent::lock_use_node2) + idx - 1));

  barrier();  // count before node init (an interrupt must not reuse this node)
  store_relaxed(&node->locked, u32{0});
  store_relaxed(&node->next, static_cast<QNode*>(nullptr));
  Hooks::init_node(node);

  // We touched a (possibly cold) node line; the lock may have been released
  // meanwhile.  (PV: this is the hybrid unfair trylock.)
  if (Hooks::trylock(lock)) goto release;

  // Publish our node:  p,*,* -> n,*,*   (acq_rel, see xchg_tail()).
  old = xchg_tail<Tail>(lock, tail);

  if (old & Tail::kMask) {
    // There was a queue: link behind the previous tail and wait for headship.
    QNode* prev = decode_tail<Env, Tail>(old);
    link_prev(prev, node);  // release; pairs with load_next_acquire() in prev
    Hooks::wait_node(node, prev);
    wait_node_locked<Env>(node);  // acquire; pairs with mcs_pass() in prev
    next = load_next_acquire(node);  // may already know our successor
  }

  // We are the queue head.  Wait for the owner and the pending waiter to go
  // away, then take the lock:  n,0,0 -> 0,0,1 (we are the tail) or n,0,1.
  if (u32 v = Hooks::wait_head_or_lock(lock, node)) {
    // PV already took the lock (locked byte set by us).  If we are still the
    // tail, clear it: n,0,1 -> 0,0,1.  Failure means a successor appeared.
    if ((v & Tail::kMask) == tail && try_cmpxchg(&lock->val, &v, kLockedVal, Order::relaxed)) goto release;
  } else {
    // Native: the head's acquisition, in queue order.  (A PV
    // wait_head_or_lock counts its own path: it knows how it took the lock.)
    lockevent_inc<Env>(LockEvent::lock_queue);
    if (head_acquire<Env, Tail>(lock, tail)) goto release;  // we were the last node: no one to hand over to
  }

  // Someone queued behind us; wait for them to finish linking in, then pass
  // queue headship.
  while (!next) {
    spin_relax<Env>();
    next = load_next_acquire(node);  // pairs with the successor's link_prev()
  }
  Hooks::pass(next);          // release; pairs with wait_node_locked() in next
  Hooks::kick_node(lock, next);

release:
  // Free our node (this_cpu_dec(qnodes[0].count)).
  store_relaxed(&node0->count, load_relaxed(&node0->count) - 1);
}

}  // namespace q

template <class Env>
class QSpinLock {
 public:
  static constexpr const char* kName = "qspinlock";
  // Traits for the registry (registry.h): MCS queue in arrival order (pending waiter first).
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = true;
  static constexpr const char* kDescription =
      "4-byte MCS-queued spinlock with pending bit (Linux native qspinlock)";

  // Operations on a bare word, reused by AutoLock.
  static void lock_word(q::QSpinWord* w) {
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1; acquire pairs with the unlock release.
    if (__builtin_expect(try_cmpxchg(&w->val, &v, q::kLockedVal, Order::acquire), 1)) return;
    q::queued_lock_slowpath<Env, q::NativeHooks<Env>, true>(w, v);
  }
  static void unlock_word(q::QSpinWord* w) { q::clear_locked_release(w); }  // *,*,1 -> *,*,0
  static bool trylock_word(q::QSpinWord* w) { return q::trylock_word(w); }

  void lock() { lock_word(&w_); }
  void unlock() { unlock_word(&w_); }
  // Fair trylock: only from (0,0,0); never jumps a queue or pending waiter.
  bool try_lock() { return trylock_word(&w_); }
  // True whenever try_lock() would fail: held, pending or queued.  (Checking
  // only the locked byte is the lockref bug met in Waiman Long's v6 qspinlock
  // series, LKML, March 2014: it calls the lock free while a pending waiter is
  // about to own it.)
  bool is_locked() const { return q::read(&w_) != 0; }

  // Raw word, for tests and diagnostics.
  u32 value() const { return q::read(&w_); }
  q::QSpinWord* word() { return &w_; }

 private:
  q::QSpinWord w_;
};

static_assert(sizeof(QSpinLock<void>) == 4);

}  // namespace lockvisor::locks
