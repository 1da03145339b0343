// pv_qspinlock.h: paravirtual queued spinlock (pvqspinlock).
//
// ALGORITHM (patches 09-11 of Waiman Long, "[PATCH v6 00/11] qspinlock with
// paravirt support", LKML, March 2014, as reworked upstream in Linux
// kernel/locking/qspinlock_paravirt.h)
//   The qspinlock of qspinlock.h, same word, same MCS queue, run through the
//   shared slow path with PvHooks.  The pending path is not used.  Waiters
//   spin for a bounded time (kSpinThreshold, SPIN_THRESHOLD = 1 << 15) and
//   then halt via Env::wait; whoever makes them runnable again kicks them via
//   Env::kick.  Per-node state: running / halted / hashed (qspinlock_word.h).
//
//   Queue node (not head), pv_wait_node():
//     spin on node->locked; every kPrevCheckMask+1 iterations look at
//     prev->state and, if the predecessor is not running (halted or hashed),
//     stop spinning early (pv_wait_early): it will not hand over soon.  Then
//     state = halted (with a full barrier), re-check node->locked, and
//     Env::wait(&state, halted).
//     Early waiting is deliberately NOT triggered by vcpu_is_preempted(prev):
//     Linux added that (75437bb304b2) and reverted it (89340d0935c9) because
//     it made waiters halt in cascades (ebizzy 13000-14000 -> 1700-1800 rec/s).
//
//   Queue head, pv_wait_head_or_lock():
//     set pending (this also stops lock stealing, see below) and spin trying
//     (*,1,0) -> (*,0,1).  After kSpinThreshold: clear pending, enter
//     lock -> node into the hash table, and xchg the locked byte to
//     _Q_SLOW_VAL (3): (*,0,1) -> (*,0,3).  If the old byte was 0 we own the
//     lock after all (unhash, byte back to 1).  Otherwise state = hashed and
//     Env::wait(&locked, _Q_SLOW_VAL).  The head hashes at most once per
//     acquisition (as upstream: once the unlocker has unhashed us, a re-hash
//     could race with pv_kick_node's hash and leave a duplicate).
//
//   Hand-off, pv_kick_node(next) (lock holder, after passing headship):
//     does NOT kick a halted successor.  If next is halted, mark it hashed,
//     set the locked byte to _Q_SLOW_VAL and hash next, so that OUR unlock
//     finds and kicks it.  Kicking now would wake it only to spin and halt
//     again while we still hold the lock (the "wake/sleep cycle").
//
//   Unlock: cmpxchg locked 1 -> 0 (release).  If the byte was _Q_SLOW_VAL:
//     unhash the lock's node, clear the byte (release), pv_kick_unlock, kick.
//
//   Hybrid unfair trylock (replaces trylock inside the slow path): steal the
//     lock, (n,0,0) -> (n,0,1), as long as there is a queue but its head is
//     NOT actively spinning (no pending bit): the head is halted/hashed or
//     being woken.  Once the head spins it sets pending and stealing stops,
//     so the head cannot be starved indefinitely.
//
//   Unfair + PV (run-time parameter pvq_unfair=1, pvbounded_tuning.h): before
//     the slow path a newcomer makes one steal attempt that ignores tail and
//     pending, (n,p,0) -> (n,p,1), as the unfair lock does.  Safe here because
//     every PV transition of the locked byte is a cmpxchg or an xchg whose old
//     value is checked (trylock_clear_pending, the head's xchg to _Q_SLOW_VAL,
//     the unlock's cmpxchg), and pv_kick_node() runs with the lock held.
//
//   States of the word, (tail, pending, locked):
//     (0,0,0) -fast-> (0,0,1) -unlock cmpxchg-> (0,0,0)
//     (n,0,0) -steal(head halted)-> (n,0,1)
//     (n,0,1) -head spins-> (n,1,1) -> (n,1,0) -trylock_clear_pending-> (n,0,1)
//     (n,0,1) -head gives up, hashes-> (n,0,3) -unlock slowpath-> (n,0,0) + kick head
//     (n,0,1) -pv_kick_node(halted next)-> (n,0,3) -unlock slowpath-> kick next
//
// UNDER vCPU PREEMPTION
//   Waiters that cannot make progress give their pCPU back (halt) instead of
//   burning their time slice, so a preempted lock holder gets scheduled
//   sooner; halting is bounded by the spin threshold so short waits stay
//   spin-only.  Lock-waiter preemption (the head is descheduled when the lock
//   is released) is attacked twice: the head is marked by the absence of the
//   pending bit, so running CPUs steal the lock instead of waiting for it,
//   and queue nodes behind a non-running predecessor halt early instead of
//   spinning behind it.  Every halt is paired with a kick from the unlocker,
//   and the sticky-kick contract (lock_env.h) closes the window between the
//   waiter's last check and its halt.
//
// All-zero is unlocked (trivially constructible).  The hash table and queue
// nodes are static per Env.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::locks {

namespace pv {

using q::QNode;
using q::QSpinWord;

// How often pv_wait_node() looks at prev->state (PV_PREV_CHECK_MASK).
inline constexpr u32 kPrevCheckMask = 0xff;

// Upstream SPIN_THRESHOLD.
inline constexpr u32 kDefaultSpinThreshold = 1u << 15;

// Diagnostics that have no lock-event counter.
template <class Env>
struct Diag {
  // Unlocks that found a locked byte that is neither 1 nor _Q_SLOW_VAL
  // (Linux: WARN "pvqspinlock: lock ... has corrupted value").
  static inline u32 corrupted_unlocks;
};

// ---- lock -> queue-head hash table -----------------------------------------
// Open addressing, probed one cache line at a time (4 entries per line).
// Size: 4 * kMaxCpus rounded up to a power of two (512 entries, 8 KiB).
// Cannot fill: an entry exists only for a queue head that is halted/hashed
// on a lock, one per (CPU, nesting level) at most, i.e. <= kMaxCpus *
// kMaxNodes = 512 = kSize, and insert scans every slot.  (Linux: max load
// 0.75 since NMIs never halt.)
template <class Env>
struct Hash {
  struct alignas(16) Entry {
    QSpinWord* lock;
    QNode* node;
  };

  static constexpr unsigned kBits = [] {
    unsigned b = 0;
    while ((1u << b) < 4 * kMaxCpus) b++;
    return b;
  }();
  static constexpr unsigned kSize = 1u << kBits;
  static constexpr unsigned kPerLine = kCacheLine / sizeof(Entry);
  static_assert(kSize >= kMaxCpus * q::kMaxNodes, "hash table could fill");
  static_assert(kPerLine == 4);

  alignas(kCacheLine) static inline Entry table[kSize];

  static unsigned hash(const QSpinWord* lock) {
    // Fibonacci hashing of the address; the low bits of a lock address are
    // mostly zero, the high bits of the product mix all of them.
    const u64 a = reinterpret_cast<__UINTPTR_TYPE__>(lock);
    return static_cast<unsigned>((a * 0x9E3779B97F4A7C15ull) >> (64 - kBits));
  }

  // pv_hash(): returns the slot so the head can unhash itself.  Counts the
  // entries probed as pv_hash_hops (charged to the CPU that hashes).
  static QSpinWord** insert(QSpinWord* lock, QNode* node) {
    const unsigned start = hash(lock) & ~(kPerLine - 1);
    u64 hops = 0;
    for (unsigned off = 0; off < kSize; off++) {
      Entry* he = &table[(start + off) & (kSize - 1)];
      hops++;
      QSpinWord* expected = nullptr;
      // Acquire pairs with the release in remove(): the previous user of the
      // slot finished reading ->node before we overwrite it.
      if (try_cmpxchg(&he->lock, &expected, lock, Order::acquire)) {
        store_relaxed(&he->node, node);
        lockevent_inc<Env>(LockEvent::pv_hash_hops, hops);
        return &he->lock;
      }
    }
    Env::bug("pvqspinlock: hash table full (cannot happen: see the table comment)");
  }

  // pv_unhash(): only called after seeing _Q_SLOW_VAL, which is set after the
  // entry was written (see the litmus sketch at the head's xchg).
  static QNode* remove(QSpinWord* lock) {
    const unsigned start = hash(lock) & ~(kPerLine - 1);
    for (unsigned off = 0; off < kSize; off++) {
      Entry* he = &table[(start + off) & (kSize - 1)];
      if (load_relaxed(&he->lock) == lock) {
        QNode* node = load_relaxed(&he->node);
        store_release(&he->lock, static_cast<QSpinWord*>(nullptr));  // pairs with insert()'s acquire
        return node;
      }
    }
    Env::bug("pvqspinlock: slow-path unlock found no hash entry (_Q_SLOW_VAL implies one)");
  }
};

// Take the lock if it is free while we (the head) hold pending.
//   *,1,0 -> *,0,1.   Acquire pairs with the unlock's release.
inline bool trylock_clear_pending(QSpinWord* lock) {
  u32 v = q::read(lock);
  while (!(v & q::kLockedMask)) {
    if (try_cmpxchg(&lock->val, &v, (v & ~q::kPendingMask) | q::kLockedVal, Order::acquire)) return true;
  }
  return false;
}

// pv_wait_early(): is the predecessor not running (halted/hashed)?
inline bool wait_early(QNode* prev, u32 loop) {
  if ((loop & kPrevCheckMask) != 0) return false;
  return load_relaxed(&prev->state) != q::kVcpuRunning;
}

// No reason besides the predecessor's state to stop spinning early.
struct NoConfer {
  static bool node_confers(QNode*) { return false; }
  static bool head_confers(const QSpinWord*) { return false; }
};

// pv_wait_node(): spin `spin_threshold` iterations, then halt until we become
// the queue head; repeat.  At each predecessor check `Confer::node_confers`
// may also end the spinning (pv_confer.h: it has conferred its time slice to
// the preempted lock holder, so it halts now instead of spinning on).  Returns once node->locked is seen set; the caller
// re-reads it with acquire.  A halted node is woken by whoever makes it head:
// the new lock owner marks it hashed (halted -> hashed) and kicks it at
// unlock (pvqspinlock: PvHooks::kick_node; pvbounded: its kick_node).
template <class Env, class Confer = NoConfer>
void wait_node_halting(QNode* node, QNode* prev, u32 spin_threshold) {
  for (;;) {
    bool early = false;
    for (u32 loop = spin_threshold; loop; loop--) {
      if (load_relaxed(&node->locked)) return;
      if (wait_early(prev, loop)) {
        early = true;
        break;
      }
      if ((loop & kPrevCheckMask) == 0 && Confer::node_confers(node)) break;
      spin_relax<Env>();
    }

    // Publish "halted", then re-check node->locked (store-buffer pattern):
    //
    //   wait_node (us)                 kick_node (new lock owner)
    //   [S] node->state = halted       [S] node->locked = 1   (pass())
    //       MB (seq_cst xchg)              MB (seq_cst store + cmpxchg)
    //   [L] node->locked               [RmW] node->state halted -> hashed
    //
    // Either we see locked == 1 and skip the halt, or kick_node sees
    // halted, marks us hashed and makes its unlock kick us.  Matches the
    // cmpxchg() in kick_node().
    xchg(&node->state, u8{q::kVcpuHalted}, Order::seq_cst);
    if (!__atomic_load_n(&node->locked, __ATOMIC_SEQ_CST)) {
      lockevent_inc<Env>(LockEvent::pv_wait_node);
      if (early) lockevent_inc<Env>(LockEvent::pv_wait_early);
      lockevent_inc<Env>(LockEvent::pv_wait);
      Env::wait(&node->state, u8{q::kVcpuHalted});
    }

    // If kick_node() changed us to hashed, keep it: wait_head_or_lock()
    // must know that the lock is already hashed for us.
    cmpxchg(&node->state, u8{q::kVcpuHalted}, u8{q::kVcpuRunning}, Order::relaxed);

    // Woken (or the wait returned) without being made head: spurious.
    if (!load_relaxed(&node->locked)) lockevent_inc<Env>(LockEvent::pv_spurious_wakeup);
    else return;
  }
}

// Confer: NoConfer (pvqspinlock) or pv_confer.h's policy, asked at the
// waiters' periodic checks whether to give the CPU to the lock holder.
template <class Env, u32 kSpinThreshold, class Confer = NoConfer>
struct PvHooks {
  static_assert(kSpinThreshold >= 1, "spin threshold must be positive");
  static constexpr bool kPv = true;

  static void init_node(QNode* node) {
    store_relaxed(&node->cpu, Env::cpu());
    store_relaxed(&node->state, u8{q::kVcpuRunning});
  }

  // pv_hybrid_queued_unfair_trylock(): steal only while the queue head is not
  // spinning (no pending bit).  (n,0,0) -> (n,0,1), or (0,0,0) -> (0,0,1).
  static bool trylock(QSpinWord* lock) {
    for (;;) {
      u32 v = q::read(lock);
      if (!(v & q::kLockedPendingMask) &&
          try_cmpxchg(&lock->val, &v, v | q::kLockedVal, Order::acquire)) {  // pairs with unlock release
        lockevent_inc<Env>((v & q::kTailMask) ? LockEvent::pv_lock_stealing : LockEvent::lock_spin);
        return true;
      }
      if (!(v & q::kTailMask) || (v & q::kPendingMask)) return false;
      spin_relax<Env>();
    }
  }

  static void wait_node(QNode* node, QNode* prev) { wait_node_halting<Env, Confer>(node, prev, kSpinThreshold); }

  // Pass queue headship.  seq_cst (not just release) for the store-buffer
  // pattern with wait_node() documented there.
  static void pass(QNode* next) { __atomic_store_n(&next->locked, u32{1}, __ATOMIC_SEQ_CST); }

  // pv_kick_node(): called by the lock owner right after pass(next).
  static void kick_node(QSpinWord* lock, QNode* node) {
    // Only a halted node gets the deferred kick; a running one sees
    // node->locked itself.  Matches the xchg/load in wait_node().
    if (cmpxchg(&node->state, u8{q::kVcpuHalted}, u8{q::kVcpuHashed}, Order::seq_cst) != q::kVcpuHalted) return;

    // We own the lock, so (*,*,1) -> (*,*,3) and the hash entry are both
    // ours to write, and it is this same CPU that will read them back at
    // unlock: no ordering needed between the two.  The head may read
    // state == hashed before we get here; it then finds locked != 3 in its
    // Env::wait() re-check and spins until we set it.
    q::xchg_locked(lock, static_cast<u8>(q::kSlowVal), Order::relaxed);
    (void)Hash<Env>::insert(lock, node);
  }

  // pv_wait_head_or_lock(): returns the word (with locked set) once WE hold
  // the lock; never returns 0.
  static u32 wait_head_or_lock(QSpinWord* lock, QNode* node) {
    // If pv_kick_node() hashed us, the lock is (or is about to be) in the
    // table with _Q_SLOW_VAL: do not hash again.
    bool hashed = load_relaxed(&node->state) == q::kVcpuHashed;

    for (u32 waitcnt = 0;; waitcnt++) {
      // Tell our successor (wait_early) that we are running.
      store_relaxed(&node->state, u8{q::kVcpuRunning});

      // Spin with pending set: stops the hybrid trylock from stealing.
      q::set_pending(lock);  // *,0,* -> *,1,*
      for (u32 loop = kSpinThreshold; loop; loop--) {
        if (trylock_clear_pending(lock)) goto gotlock;  // *,1,0 -> *,0,1
        // Conferred to a preempted holder: stop spinning, hash, halt.
        if ((loop & kPrevCheckMask) == 0 && Confer::head_confers(lock)) break;
        spin_relax<Env>();
      }
      q::clear_pending(lock);  // *,1,* -> *,0,*

      if (!hashed) {
        hashed = true;
        QSpinWord** lp = Hash<Env>::insert(lock, node);
        // Hash before setting _Q_SLOW_VAL, so an unlocker that sees
        // _Q_SLOW_VAL finds the entry:
        //
        //   head (us)                         unlocker
        //   [S] <hash>                        [RmW] locked == _Q_SLOW_VAL
        //       MB (seq_cst xchg)                   (acquire)
        //   [RmW] locked = _Q_SLOW_VAL        [L] <unhash>
        //
        // Matches the acquire in PvQSpinLock::unlock().
        if (q::xchg_locked(lock, static_cast<u8>(q::kSlowVal), Order::seq_cst) == 0) {
          // The lock was free and is now ours: (*,0,0) -> (*,0,3) -> (*,0,1),
          // and take our entry back out.
          q::xchg_locked(lock, static_cast<u8>(q::kLockedVal), Order::relaxed);
          store_release(lp, static_cast<QSpinWord*>(nullptr));
          goto gotlock;
        }
      }

      store_relaxed(&node->state, u8{q::kVcpuHashed});
      lockevent_inc<Env>(LockEvent::pv_wait_head);
      if (waitcnt) lockevent_inc<Env>(LockEvent::pv_wait_again);
      lockevent_inc<Env>(LockEvent::pv_wait);
      // Sleeps only while locked == _Q_SLOW_VAL; the unlocker clears it and
      // then kicks us (sticky if we have not suspended yet).  Because of
      // stealing we may wake and still not get the lock; since we hash only
      // once, later rounds find locked != 3 and just spin.
      Env::wait(lock->locked_byte(), static_cast<u8>(q::kSlowVal));
    }

  gotlock:
    lockevent_inc<Env>(LockEvent::lock_queue);  // the acquisition's path (lock_events.h)
    return q::read(lock) | q::kLockedVal;
  }
};

// pvq_unfair=1: the unfair lock's one steal attempt, a byte cmpxchg of the
// locked byte 0 -> 1 emulated on the word (retried only while the byte stays
// 0).  Acquire pairs with the unlock's release.  Out of line: off by default.
template <class Env>
[[gnu::noinline]] bool steal_once(QSpinWord* w, u32 v) {
  while (!(v & q::kLockedMask)) {
    if (try_cmpxchg(&w->val, &v, v | q::kLockedVal, Order::acquire)) {
      lockevent_inc<Env>((v & q::kTailMask) ? LockEvent::pv_lock_stealing : LockEvent::lock_spin);
      return true;
    }
  }
  return false;
}

}  // namespace pv

template <class Env, u32 kSpinThreshold = pv::kDefaultSpinThreshold>
class PvQSpinLock {
 public:
  static constexpr const char* kName = "pvqspinlock";
  // Traits for the registry (registry.h): halts with Env::wait unconditionally; the hybrid trylock steals.
  static constexpr bool kNeedsPv = true;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "paravirt qspinlock: spin then halt, hashed queue head, deferred kick at unlock";
  static constexpr u32 kSpin = kSpinThreshold;
  using Hooks = pv::PvHooks<Env, kSpinThreshold>;

  static void lock_word(q::QSpinWord* w) {
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1.  Acquire pairs with unlock's release.
    if (__builtin_expect(try_cmpxchg(&w->val, &v, q::kLockedVal, Order::acquire), 1)) return;
    slowpath_word<Hooks>(w, v);
  }

  // After a failed fast path that saw `v`: the unfair steal (pvq_unfair),
  // then the PV slow path with `H` (PvHooks, or pvconfer's).
  template <class H>
  static void slowpath_word(q::QSpinWord* w, u32 v) {
    if (pvb::tuning(&pvb::Tuning::pvq_unfair) && pv::steal_once<Env>(w, v)) return;
    q::queued_lock_slowpath<Env, H, /*kUsePending=*/false>(w, v);
  }

  // __pv_queued_spin_unlock(): *,*,1 -> *,*,0, else the slow path.
  static void unlock_word(q::QSpinWord* w) {
    // acq_rel: release for the critical section; acquire so that, if we see
    // _Q_SLOW_VAL, the head's hash entry is visible (pairs with the seq_cst
    // xchg in wait_head_or_lock(); pv_kick_node's entry is our own write).
    const u8 locked = q::cmpxchg_locked(w, static_cast<u8>(q::kLockedVal), 0, Order::acq_rel);
    if (__builtin_expect(locked == q::kLockedVal, 1)) return;
    unlock_slowpath(w, locked);
  }

  static bool trylock_word(q::QSpinWord* w) { return q::trylock_word(w); }

  void lock() { lock_word(&w_); }
  void unlock() { unlock_word(&w_); }
  bool try_lock() { return trylock_word(&w_); }
  bool is_locked() const { return q::read(&w_) != 0; }

  u32 value() const { return q::read(&w_); }
  q::QSpinWord* word() { return &w_; }

 private:
  [[gnu::noinline]] static void unlock_slowpath(q::QSpinWord* w, u8 locked) {
    if (locked != q::kSlowVal) {
      // Corrupted lock byte: report and leave the word alone (Linux WARNs).
      fetch_add(&pv::Diag<Env>::corrupted_unlocks, u32{1}, Order::relaxed);
      return;
    }
    q::QNode* node = pv::Hash<Env>::remove(w);
    const unsigned cpu = load_relaxed(&node->cpu);
    // Release the lock:  *,*,3 -> *,*,0.  Pairs with the head's acquire in
    // trylock_clear_pending() (or a stealer's cmpxchg).
    q::clear_locked_release(w);
    lockevent_inc<Env>(LockEvent::pv_kick_unlock);
    lockevent_inc<Env>(LockEvent::pv_kick);
    Env::kick(cpu);
  }

  q::QSpinWord w_;
};

}  // namespace lockvisor::locks
