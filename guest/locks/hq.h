// hq.h: the hierarchical NUMA-aware queued spinlock (hq), and its
// paravirtual variant (pvhq).
//
// ALGORITHM (after Stepanov and Fedorov, "[RFC] HQ spinlock", LKML,
// November-December 2025: "a combination of cohort-locking by Dave Dice and
// Linux kernel queued spinlock"; written here from that description)
//   Two levels.  The GLOBAL lock is a qspinlock word (qspinlock.h, or
//   pv_qspinlock.h for pvhq): its locked byte says "held", its MCS queue
//   orders the contenders that compete for it.  Under contention each NUMA
//   node has a LOCAL FIFO queue of its waiters (an MCS queue of HQ nodes in
//   the lock's metadata, below); only a local queue's head competes for the
//   global lock, so the global queue holds at most one waiter per node, in
//   the order the nodes arrived: the per-node queues are linked FIFO.
//
//   Acquire (NUMA mode): bind the metadata, append to the local queue.  A
//   waiter that becomes local head either inherits the global lock from
//   its local predecessor (local handoff) or takes it through the global
//   queue (the previous node's holder released it: remote handoff).
//   Release: with a local successor and a run of local handoffs below the
//   threshold (below), pass the lock within the node -- the global word
//   stays locked and only the successor's node line moves; otherwise
//   release the global lock (the next node's head in the global queue gets
//   it) and make the local successor local head, so that it queues
//   globally behind the other nodes.  Without a local successor: release
//   the global lock, leave the local queue, unbind.
//   A node's RUN starts when its local head takes the global lock and
//   counts the holders since (Local::handoffs, Local::since).  Its
//   threshold is two run-time parameters (pvbounded_tuning.h), whichever
//   comes first: hq_fairness_threshold holders (the RFC's
//   hqlock_fairness_threshold, 1000) and hq_fairness_threshold_us of time
//   since the run began (not in the RFC; 0, off, by default).
//
// BOUND (what hq and pvhq promise a waiter of another node)
//   The global queue holds at most one waiter per node (its local head), in
//   FIFO order, and a node's run ends after at most hq_fairness_threshold
//   holders, or with the first local handoff at least
//   hq_fairness_threshold_us after it began (one holder more).  So a local
//   head queued globally gets the lock after at most one run of each of
//   the k-1 other nodes (plus qspinlock-mode contenders, one holder each,
//   that queued globally before it); a local waiter waits for the holders
//   of its own node ahead of it and, each time its node's run ends before
//   its turn, for one run of every other node.  pvhq adds a halted
//   waiter's wake-up per handoff, and its global lock is pvqspinlock's,
//   whose hybrid trylock lets a running local head steal it past a halted
//   global queue head: each steal starts another run of the stealer's
//   node, outside this bound (the steals are counted, pv_lock_stealing).  `lockvisor trace-check` judges each wait
//   against this bound (vmm/trace/bound_check.h).
//
//   MODE SWITCH.  A contender that finds the global word free of queued
//   waiters (at most an owner and a pending waiter) stays in QSPINLOCK
//   mode: the qspinlock slow path, unchanged, no metadata.  One that finds
//   a global queue switches to NUMA mode for its acquisition (the RFC
//   switches after hqlock_general_handoffs_turn_numa = 50 handoffs in
//   qspinlock mode; here the global queue is the contention signal).  Both
//   kinds meet in the global queue, which is what makes mixing them
//   correct: the global word is the lock, the local queues only decide who
//   of a node may join it.  A lock is back in qspinlock mode once its last
//   NUMA-mode contender has released and unbound the metadata.
//
//   METADATA BINDING, simplified.  The RFC binds a lock to one of 4096
//   metadata records on demand (hash of the lock address) and falls back to
//   qspinlock mode on a conflict.  Here: kMetaSlots records, the slot is a
//   hash of the address, and binding is one 64-bit word per slot, (lock
//   address << 16 | users): a contender binds with a CAS (free -> ours with
//   1 user, ours -> one more user) and unbinds at its release (the last
//   user frees the slot).  A slot bound to another lock is a conflict: that
//   contender stays in qspinlock mode.  While a slot has users, its local
//   tails belong to its lock; every user leaves its local queue before it
//   unbinds, so a freed slot has empty queues.
//
//   Per-acquisition state (which slot, which local node) is kept by the
//   holding CPU in a small per-CPU table keyed by the lock, so that
//   unlock() needs nothing but the lock (spinlocks are released by the CPU
//   that took them).
//
//   States of a NUMA-mode contender's local node: queued (locked 0) ->
//   local head (locked 1: go and take the global lock) or owner (locked 2:
//   the global lock is yours, handed over within the node).
//
// UNDER vCPU PREEMPTION
//   Local handoffs go to the next waiter of the node whether its vCPU runs
//   or not; and a node whose vCPUs share a host CPU keeps the lock for a
//   whole run.  Waiman Long's review: HQ "is mutually
//   exclusive with pvqspinlock" in the RFC; pvhq combines them anyway:
//   local waiters spin kSpinThreshold iterations and then halt, the
//   releaser that makes one head or owner kicks it, and the global lock is
//   pvqspinlock's own (its head halts and is kicked at unlock).
//
// All-zero is unlocked (a free global word, no binding needed).
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/pv_qspinlock.h"
#include "locks/qspinlock.h"
#include "locks/pvbounded_tuning.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::locks {

namespace hq {

using q::QNode;
using q::QSpinWord;

inline constexpr unsigned kMetaSlots = 64;
inline constexpr unsigned kMaxNumaNodes = 16;

// Local-node `locked` values.
inline constexpr u32 kQueued = 0;
inline constexpr u32 kLocalHead = 1;
inline constexpr u32 kOwner = 2;

struct alignas(kCacheLine) Meta {
  u64 binding;                    // (lock address << 16) | users; 0: free
  QNode* local_tail[kMaxNumaNodes];  // per node: last local waiter
};

// A local node and what its holder needs at unlock.
struct alignas(kCacheLine) Local {
  QNode node;          // next, locked (kQueued/kLocalHead/kOwner), cpu, state
  u32 handoffs;        // consecutive local handoffs that led to this owner
  u32 numa;
  u64 since;           // lock clock when this node's run began (its local head took the global lock)
  QSpinWord* lock;     // the lock it is held for (nullptr: free)
  Meta* meta;
};

template <class Env>
struct State {
  static inline Meta meta[kMetaSlots];
  static inline Local locals[kMaxCpus][q::kMaxNodes];
  // Local nodes in use per CPU, a bit each: releases need not be in the
  // reverse order of acquisitions.
  static inline u32 used[kMaxCpus];

  static Meta* slot(const QSpinWord* lock) {
    const u64 a = reinterpret_cast<__UINTPTR_TYPE__>(lock);
    return &meta[(a * 0x9E3779B97F4A7C15ull) >> 58];  // 6 bits: 64 slots
  }
  static Local* local_of(QNode* node) {
    return reinterpret_cast<Local*>(reinterpret_cast<char*>(node) - __builtin_offsetof(Local, node));
  }
};
static_assert(kMetaSlots == 64);

inline bool bind(Meta* m, const QSpinWord* lock) {
  const u64 key = static_cast<u64>(reinterpret_cast<__UINTPTR_TYPE__>(lock)) << 16;
  u64 b = load_relaxed(&m->binding);
  for (;;) {
    u64 to;
    if (b == 0) {
      to = key | 1;
    } else if ((b & ~u64{0xffff}) == key && (b & 0xffff) < 0xffff) {
      to = b + 1;
    } else {
      return false;  // bound to another lock: conflict
    }
    // acq_rel: acquire pairs with unbind()'s release, so the previous users'
    // local-tail writes (all back to null) are seen; release publishes
    // nothing of ours yet (the local node is written after binding).
    if (try_cmpxchg(&m->binding, &b, to, Order::acq_rel)) return true;
  }
}

inline void unbind(Meta* m) {
  u64 b = load_relaxed(&m->binding);
  for (;;) {
    const u64 to = (b & 0xffff) == 1 ? 0 : b - 1;
    // acq_rel: release pairs with the next bind()'s acquire (our local-tail
    // cmpxchg came first); acquire keeps the count's history in order.
    if (try_cmpxchg(&m->binding, &b, to, Order::acq_rel)) return;
  }
}

// A local waiter's wait: spin (native) or spin then halt (PV) until its
// node's locked word is set.
template <class Env, bool kPv, u32 kSpin>
inline u32 wait_local(QNode* node) {
  if constexpr (kPv) {
    for (;;) {
      for (u32 loop = kSpin; loop; loop--) {
        // Acquire pairs with pass_local()'s store (seq_cst, so release too).
        if (u32 v = load_acquire(&node->locked)) return v;
        spin_relax<Env>();
      }
      // Publish "halted", re-check (store-buffer pattern with pass_local()).
      xchg(&node->state, u8{q::kVcpuHalted}, Order::seq_cst);
      if (!__atomic_load_n(&node->locked, __ATOMIC_SEQ_CST)) {
        lockevent_inc<Env>(LockEvent::pv_wait_node);
        lockevent_inc<Env>(LockEvent::pv_wait);
        Env::wait(&node->state, u8{q::kVcpuHalted});
      }
      // Relaxed: only says "running" again to a later pass_local(); the
      // load after it is the acquire that pairs with pass_local().
      cmpxchg(&node->state, u8{q::kVcpuHalted}, u8{q::kVcpuRunning}, Order::relaxed);
      if (u32 v = load_acquire(&node->locked)) return v;
      lockevent_inc<Env>(LockEvent::pv_spurious_wakeup);
    }
  } else {
    u32 v;
    // Acquire pairs with pass_local()'s release.
    while ((v = load_acquire(&node->locked)) == 0) spin_relax<Env>();
    return v;
  }
}

// Make `next` local head or owner; PV: kick it if it halted.
template <class Env, bool kPv>
inline void pass_local(QNode* next, u32 how) {
  if constexpr (kPv) {
    // Store-buffer pattern with wait_local(): our store of `locked`, then
    // our read of `state` (seq_cst cmpxchg), against its xchg of `state`,
    // then its read of `locked`.  Either it sees `locked` and skips the
    // halt, or we see "halted" and kick.
    __atomic_store_n(&next->locked, how, __ATOMIC_SEQ_CST);
    if (cmpxchg(&next->state, u8{q::kVcpuHalted}, u8{q::kVcpuRunning}, Order::seq_cst) == q::kVcpuHalted) {
      lockevent_inc<Env>(LockEvent::pv_kick);
      Env::kick(load_relaxed(&next->cpu));
    }
  } else {
    store_release(&next->locked, how);  // pairs with wait_local()'s acquire
  }
}

// Whether a node's run that led to owner `l` may go on with one more local
// handoff: below hq_fairness_threshold holders and, when the time form is
// on, younger than hq_fairness_threshold_us.
inline bool run_may_continue(const Local* l) {
  if (l->handoffs + 1 >= pvb::tuning(&pvb::Tuning::hq_fairness)) return false;
  const u64 span = pvb::tuning(&pvb::Tuning::hq_fairness_ticks);
  return span == 0 || read_lock_clock() - l->since < span;
}

}  // namespace hq

// Global: QSpinLock<Env> (hq) or PvQSpinLock<Env> (pvhq), used through its
// static word operations.
template <class Env, class Global, bool kPv, u32 kSpin>
class HqLockBase {
 public:
  void lock() {
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1; acquire pairs with the unlock's release.
    if (__builtin_expect(try_cmpxchg(&w_.val, &v, q::kLockedVal, Order::acquire), 1)) return;
    slow_lock(v);
  }
  void unlock() {
    using S = hq::State<Env>;
    // A NUMA-mode holder is a user of the lock's slot until this unlock: an
    // unbound slot means qspinlock mode (and costs no per-CPU lookup).
    // Relaxed: our own bind() is the only write that matters here, and we
    // made it (program order).
    if (load_relaxed(&S::slot(&w_)->binding) == 0) {
      Global::unlock_word(&w_);
      return;
    }
    const unsigned cpu = Env::cpu();
    // This CPU's NUMA-mode acquisition of this lock, if it made one.
    const u32 used = load_relaxed(&S::used[cpu]);
    for (unsigned i = 0; i < q::kMaxNodes; i++) {
      hq::Local* l = &S::locals[cpu][i];
      if ((used & (1u << i)) != 0 && l->lock == &w_) {
        numa_unlock(l, i);
        return;
      }
    }
    Global::unlock_word(&w_);  // qspinlock mode
  }
  bool try_lock() { return q::trylock_word(&w_); }
  bool is_locked() const { return q::read(&w_) != 0; }
  u32 value() const { return q::read(&w_); }

 private:
  [[gnu::noinline]] void slow_lock(u32 v) {
    using S = hq::State<Env>;
    const unsigned cpu = Env::cpu();
    const u32 used = load_relaxed(&S::used[cpu]);
    const unsigned d = static_cast<unsigned>(__builtin_ctz(~used));  // lowest free local node
    const unsigned numa = numa_node_of<Env>(cpu);
    hq::Meta* m = S::slot(&w_);
    // Qspinlock mode: no queue to join yet, no free local node, a node we
    // cannot index, or a metadata conflict.
    if ((v & q::kTailMask) == 0 || d >= q::kMaxNodes || numa >= hq::kMaxNumaNodes || !hq::bind(m, &w_)) {
      Global::lock_word(&w_);
      return;
    }
    hq::Local* l = &S::locals[cpu][d];
    store_relaxed(&S::used[cpu], used | (1u << d));
    barrier();  // the slot is taken before it is written (an interrupt must not reuse it)
    init_local(l, cpu, numa);
    // acq_rel: release publishes our node's initialisation to the next
    // waiter that reads the tail; acquire sees the previous tail's (as
    // qspinlock's xchg_tail).  Pairs with the other waiters' xchg and the
    // releaser's cmpxchg of the tail in numa_unlock().
    q::QNode* prev = xchg(&m->local_tail[numa], &l->node, Order::acq_rel);
    u32 how = hq::kLocalHead;
    if (prev != nullptr) {
      store_release(&prev->next, &l->node);  // pairs with load_next_acquire() in numa_unlock()
      how = hq::wait_local<Env, kPv, kSpin>(&l->node);
    }
    if (how == hq::kOwner) {
      lockevent_inc<Env>(LockEvent::numa_local_pass);
    } else {
      l->handoffs = 0;
      Global::lock_word(&w_);  // remote handoff: through the global queue
      if (pvb::tuning(&pvb::Tuning::hq_fairness_ticks) != 0) l->since = read_lock_clock();  // the node's run begins
    }
    l->lock = &w_;
    l->meta = m;
  }

  static void init_local(hq::Local* l, unsigned cpu, unsigned numa) {
    store_relaxed(&l->node.next, static_cast<q::QNode*>(nullptr));
    store_relaxed(&l->node.locked, u32{0});
    store_relaxed(&l->node.cpu, cpu);
    store_relaxed(&l->node.state, u8{q::kVcpuRunning});
    l->numa = numa;
    l->handoffs = 0;
    l->lock = nullptr;
  }

  void numa_unlock(hq::Local* l, unsigned index) {
    using S = hq::State<Env>;
    const unsigned cpu = Env::cpu();
    hq::Meta* m = l->meta;
    q::QNode* me = &l->node;
    q::QNode* next = q::load_next_acquire(me);  // pairs with the successor's store_release of prev->next
    if (next == nullptr) {
      q::QNode* expected = me;
      // acq_rel, pairing with a newcomer's xchg of the tail: the queue is
      // empty after us, or the newcomer links itself and we wait for it.
      if (try_cmpxchg(&m->local_tail[l->numa], &expected, static_cast<q::QNode*>(nullptr), Order::acq_rel)) {
        // Last of the node: the lock leaves it.
        Global::unlock_word(&w_);
        finish(l, cpu, index);
        hq::unbind(m);
        return;
      }
      while ((next = q::load_next_acquire(me)) == nullptr) spin_relax<Env>();
    }
    hq::Local* nl = S::local_of(next);
    if (hq::run_may_continue(l)) {
      // Read by next after pass_local() (release; pairs with wait_local()).
      nl->handoffs = l->handoffs + 1;
      nl->since = l->since;
      finish(l, cpu, index);
      hq::pass_local<Env, kPv>(next, hq::kOwner);  // the global word stays locked
    } else {
      lockevent_inc<Env>(LockEvent::numa_flush);
      Global::unlock_word(&w_);
      finish(l, cpu, index);
      hq::pass_local<Env, kPv>(next, hq::kLocalHead);
    }
    hq::unbind(m);
  }

  // Frees this CPU's local node `index`.
  static void finish(hq::Local* l, unsigned cpu, unsigned index) {
    using S = hq::State<Env>;
    l->lock = nullptr;
    barrier();  // compiler only: an interrupt on this CPU must see the node free last
    store_relaxed(&S::used[cpu], load_relaxed(&S::used[cpu]) & ~(1u << index));
  }

  q::QSpinWord w_;
};

template <class Env>
class HqLock : public HqLockBase<Env, QSpinLock<Env>, false, 1> {
 public:
  static constexpr const char* kName = "hq";
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = false;  // a node keeps the lock for a run (the file comment's BOUND)
  static constexpr const char* kDescription =
      "hierarchical NUMA-aware queued spinlock (HQ RFC): per-node queues, global qspinlock, local handoffs";
};

template <class Env, u32 kSpinThreshold = pv::kDefaultSpinThreshold>
class PvHqLock : public HqLockBase<Env, PvQSpinLock<Env, kSpinThreshold>, true, kSpinThreshold> {
 public:
  static constexpr const char* kName = "pvhq";
  static constexpr bool kNeedsPv = true;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "paravirt HQ: per-node queues whose waiters spin then halt and are kicked, global pvqspinlock";
};

static_assert(sizeof(HqLock<void>) == 4);

}  // namespace lockvisor::locks
