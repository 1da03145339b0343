// cna.h: the compact NUMA-aware lock (cna) and its slow path, shared with
// the paravirtual variant (pvcna, pv_cna.h).
//
// ALGORITHM (Dave Dice and Alex Kogan, "Compact NUMA-aware Locks", EuroSys
// 2019; posted for Linux as a qspinlock slow path by Alex Kogan, "[PATCH v15
// 0/6] Add NUMA-awareness to qspinlock", LKML, May 2021, not merged)
//   The qspinlock word of qspinlock_word.h (locked byte, pending byte, MCS
//   tail) and its per-CPU queue nodes, unchanged: the lock stays 4 bytes and
//   the fast path and pending path are qspinlock's.  What changes is whom the
//   queue head passes headship to.  Waiters form two queues:
//     main queue       the MCS queue the tail names, in arrival order;
//     secondary queue  waiters of OTHER nodes that a handoff skipped, in the
//                      order they were skipped.  It has no anchor in the lock
//                      word: its head and tail travel with headship (in the
//                      per-node CNA record of the node that is queue head),
//                      so it exists only while the lock is held or about to
//                      be taken.
//   The queue head H, once it holds the lock, picks its successor:
//     1. if H's run is below the threshold (below), scan the linked part of
//        the main queue for the first waiter on H's node; the waiters before
//        it move, in order, to the end of the secondary queue, and the found
//        waiter becomes head (run + 1);
//     2. otherwise (none found, or the threshold reached) the secondary queue,
//        if any, is put back IN FRONT of the main queue and its first waiter
//        becomes head (run reset to 0);
//     3. when H is the last node of the main queue but the secondary queue is
//        not empty, H swings the tail from itself to the secondary queue's
//        last node (one cmpxchg that also takes the lock): the secondary
//        queue becomes the main queue.
//   A RUN starts when the first waiter moves into an empty secondary queue
//   and counts the same-node handoffs while that queue is not empty; it
//   travels with headship (Record::intra, Record::since).  Its threshold is
//   two run-time parameters (pvbounded_tuning.h), whichever comes first:
//   cna_threshold handoffs (default 2^16, the series' count before v12) and
//   cna_threshold_us of time since the run started (default 1 ms, v15's
//   numa_spinlock_threshold_ns).  The series' shuffle-reduction heuristic
//   (scanning only with some probability) is left out: every handoff scans.
//
// BOUND (what cna and pvcna promise a waiter of another node)
//   A waiter moved to the secondary queue is bypassed by at most
//   cna_threshold holders of the run's node, and for at most
//   cna_threshold_us plus one holder (the handoff that first sees the time
//   passed ends the run), before its queue is back in front; after that
//   only the waiters ahead of it in that queue (one holder each) precede
//   it.  With two nodes that is all: the flushed queue's first waiter is of
//   the waiter's own node, and so the next run is its node's.  With k nodes
//   the next k-2 runs may move it again (each bounded the same way).
//   Waiters never moved wait as in MCS: one holder per waiter ahead.
//   pvcna adds to each handoff the wake-up of a halted head (pv_cna.h).
//   Counted in handoffs alone the bound is a time only through the handoff
//   rate: at ~15 us a handoff (pvcna, 16 vCPUs 1:1 on two nodes) 2^16
//   handoffs are ~1 s, which is what a remote waiter waited before the time
//   form existed.  `lockvisor trace-check` judges each wait against this
//   bound (vmm/trace/bound_check.h).
//
//   States of the word are qspinlock's (tail, pending, locked); CNA adds the
//   secondary queue beside them:
//     (0,0,0) -fast-> (0,0,1)
//     (n,*,*) -xchg_tail-> (m,*,*)               enqueue, as qspinlock
//     head H, (t,0,0) with t == H:  -> (0,0,1)   no secondary queue
//                                   -> (s,0,1)   s = last secondary waiter;
//                                                its first becomes head
//     head H, (t,0,0) with t != H:  -> (t,0,1), then pass by 1./2. above
//   A node moved to the secondary queue is never the tail (only nodes before
//   a found successor move, and each of them already has a successor
//   linked), so the tail always names a node of the main queue, and the
//   secondary queue's last node gets its `next` cleared by the mover, the
//   only writer left for it.
//
// UNDER vCPU PREEMPTION
//   The same as qspinlock: a FIFO-ish queue whose handoffs go to whoever is
//   next, running or not, so lock-waiter preemption costs a time slice per
//   handoff -- and CNA makes it worse when one node's vCPUs share a host CPU,
//   because it keeps handing off within that node.  Waiman Long's review of
//   the HQ RFC: CNA "can coexist with pvspinlock"; pv_cna.h is that variant.
//
// HOOKS are qspinlock.h's (q::NativeHooks, pv::PvHooks): init_node,
// trylock, wait_node, pass, kick_node and wait_head_or_lock work on any
// node, whichever queue it came from.
//
// All-zero is unlocked; queue nodes and CNA records are static per Env.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/pvbounded_tuning.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::locks {

namespace cna {

using q::QNode;
using q::QSpinWord;

// What CNA keeps per queue node beside the MCS fields of QNode, at the same
// (cpu, nesting index): the waiter's node, and while it is queue head the
// secondary queue and the run of same-node handoffs it inherited.  Only
// the head's thread writes a record other than its own numa field (before
// pass(), whose release publishes it).
struct alignas(32) Record {
  QNode* sec_head;  // first secondary waiter, nullptr: none
  QNode* sec_tail;  // last one (its next is nullptr)
  u32 numa;         // NUMA node of the waiter
  u32 intra;        // same-node handoffs of the run up to this head (0: no run)
  u64 since;        // lock clock when the run started (valid while intra > 0)
};
static_assert(sizeof(Record) == 32);

// Whether the run that led to head `rec` may go on: below cna_threshold
// handoffs and, when the time form is on, younger than cna_threshold_us.
inline bool run_may_continue(const Record* rec) {
  if (rec->intra == 0) return true;
  if (rec->intra >= pvb::tuning(&pvb::Tuning::cna_threshold)) return false;
  const u64 span = pvb::tuning(&pvb::Tuning::cna_threshold_ticks);
  return span == 0 || read_lock_clock() - rec->since < span;
}

template <class Env>
struct Records {
  static inline Record records[kMaxCpus][q::kMaxNodes];

  // The record of a queue node of QNodePool<Env>.
  static Record* of(const QNode* node) {
    using Pool = q::QNodePool<Env>;
    const auto* base = reinterpret_cast<const char*>(&Pool::sets[0]);
    const auto offset = static_cast<unsigned long>(reinterpret_cast<const char*>(node) - base);
    const unsigned cpu = static_cast<unsigned>(offset / sizeof(q::QNodeSet));
    const unsigned idx = static_cast<unsigned>(node - Pool::sets[cpu].nodes);
    return &records[cpu][idx];
  }
};

// The tail value naming a node of QNodePool<Env>.
template <class Env>
inline u32 encode_node(const QNode* node) {
  using Pool = q::QNodePool<Env>;
  const auto* base = reinterpret_cast<const char*>(&Pool::sets[0]);
  const auto offset = static_cast<unsigned long>(reinterpret_cast<const char*>(node) - base);
  const unsigned cpu = static_cast<unsigned>(offset / sizeof(q::QNodeSet));
  return q::encode_tail(cpu, static_cast<unsigned>(node - Pool::sets[cpu].nodes));
}

// The native queue head's acquisition (q::head_acquire with step 3): wait
// for the owner and the pending waiter, then take the lock.  Returns true
// when nobody is left to pass headship to.  `rec` is the head's record; on
// step 3 its secondary queue becomes the main queue and `*succ` its first
// waiter (the one to pass headship to); else *succ stays nullptr.
template <class Env>
inline bool head_acquire(QSpinWord* lock, u32 tail, Record* rec, QNode** succ) {
  for (;;) {
    // Acquire pairs with the owner's release in clear_locked_release() (or
    // the pending waiter's clear_pending_set_locked and then its unlock).
    u32 v = q::read_acquire(lock);
    while (v & q::kLockedPendingMask) {
      spin_relax<Env>();
      v = q::read_acquire(lock);
    }
    // Both cmpxchgs take the lock: acquire, pairing with the same release
    // as the load above.  The one that swings the tail to the secondary
    // queue's last node publishes nothing new to newcomers: that node's
    // link fields were written by its own enqueue and by the head that
    // moved it, and a newcomer that reads the tail only writes its `next`.
    if ((v & q::kTailMask) != tail) {
      if (try_cmpxchg(&lock->val, &v, v | q::kLockedVal, Order::acquire)) return false;
      continue;
    }
    QNode* const sh = rec->sec_head;
    const u32 to = sh != nullptr ? encode_node<Env>(rec->sec_tail) | q::kLockedVal : q::kLockedVal;
    if (try_cmpxchg(&lock->val, &v, to, Order::acquire)) {
      *succ = sh;
      return sh == nullptr;
    }
  }
}

// Step 3 for a head that already holds the lock (the PV hooks take it in
// wait_head_or_lock): if it is still the tail, swing the tail to the
// secondary queue's last node or clear it.  Returns true when nobody is left
// to pass headship to; sets *succ as head_acquire() does.  `v` is the word
// with our locked byte set.
template <class Env>
inline bool held_head_finish(QSpinWord* lock, u32 v, u32 tail, Record* rec, QNode** succ) {
  while ((v & q::kTailMask) == tail) {
    QNode* const sh = rec->sec_head;
    // Keep the locked byte as it is (1, ours) and clear the tail, or point
    // it at the secondary queue.  Relaxed: wait_head_or_lock() already took
    // the lock with acquire; a failure (a newcomer's xchg_tail) leaves us
    // to wait for its link_prev() with load_next_acquire().
    const u32 to = (v & q::kLockedMask) | (sh != nullptr ? encode_node<Env>(rec->sec_tail) : 0);
    if (try_cmpxchg(&lock->val, &v, to, Order::relaxed)) {
      *succ = sh;
      return sh == nullptr;
    }
  }
  return false;
}

// Steps 1 and 2: the successor of head `me` (record `rec`), with `next` its
// MCS successor, already linked.  Writes the chosen successor's record
// (secondary queue and run) before the caller's pass() publishes it.
template <class Env>
inline QNode* pick_successor(Record* rec, QNode* next) {
  QNode* sh = rec->sec_head;
  QNode* st = rec->sec_tail;
  if (run_may_continue(rec)) {
    QNode* prev = nullptr;
    // load_next_acquire() pairs with each successor's link_prev() (release),
    // which came after that successor wrote its record's numa field.
    for (QNode* cur = next; cur != nullptr; cur = q::load_next_acquire(cur)) {
      Record* cr = Records<Env>::of(cur);
      if (load_relaxed(&cr->numa) == rec->numa) {
        u64 since = rec->since;
        if (prev != nullptr) {
          // next..prev move to the end of the secondary queue.  prev->next
          // (cur) was written by cur's link_prev, already seen; nobody
          // writes it again, so it is ours to clear.  These relaxed link
          // stores reach the next head through pass() (release), which
          // pairs with its wait_node_locked() (acquire); a moved waiter
          // reads its own next only once it is head, after the same chain.
          if (st != nullptr) {
            store_relaxed(&st->next, next);
          } else {
            sh = next;
            since = read_lock_clock();  // a run starts with the first waiter moved
          }
          st = prev;
          store_relaxed(&prev->next, static_cast<QNode*>(nullptr));
        }
        cr->sec_head = sh;
        cr->sec_tail = st;
        cr->intra = sh != nullptr ? rec->intra + 1 : 0;
        cr->since = since;
        lockevent_inc<Env>(LockEvent::numa_local_pass);
        return cur;
      }
      prev = cur;
    }
  }
  if (sh == nullptr) {
    Record* nr = Records<Env>::of(next);
    nr->sec_head = nr->sec_tail = nullptr;
    nr->intra = 0;
    return next;
  }
  // The secondary queue goes back in front of the main queue (published by
  // pass(), as above).
  store_relaxed(&st->next, next);
  Record* hr = Records<Env>::of(sh);
  hr->sec_head = hr->sec_tail = nullptr;
  hr->intra = 0;
  lockevent_inc<Env>(LockEvent::numa_flush);
  return sh;
}

// The slow path: qspinlock's, with the CNA head (see the file comment).
template <class Env, class Hooks, bool kUsePending>
[[gnu::noinline]] void cna_lock_slowpath(QSpinWord* lock, u32 val) {
  using Pool = q::QNodePool<Env>;

  if constexpr (kUsePending && !Hooks::kPv) {
    if (q::pending_path<Env>(lock, val)) return;
  }
  lockevent_inc<Env>(LockEvent::lock_slowpath);

  const unsigned cpu = Env::cpu();
  QNode* const node0 = Pool::node(cpu, 0);
  // Only this CPU touches its node count; barrier() (compiler only) keeps
  // an interrupt's nested acquisition from reusing the node, as in
  // qspinlock.h.
  const u32 idx = load_relaxed(&node0->count);
  store_relaxed(&node0->count, idx + 1);
  barrier();

  QNode* node = nullptr;
  QNode* next = nullptr;
  QNode* succ = nullptr;
  Record* rec = nullptr;
  u32 tail = 0;
  u32 old = 0;

  if (idx >= q::kMaxNodes) {
    lockevent_inc<Env>(LockEvent::lock_no_node);
    while (!Hooks::trylock(lock)) spin_relax<Env>();
    goto release;
  }

  node = Pool::node(cpu, idx);
  rec = &Records<Env>::records[cpu][idx];
  tail = q::encode_tail(cpu, idx);
  if (idx) lockevent_inc<Env>(static_cast<LockEvent>(static_cast<unsigned>(LockEvent::lock_use_node2) + idx - 1));

  barrier();
  store_relaxed(&node->locked, u32{0});
  store_relaxed(&node->next, static_cast<QNode*>(nullptr));
  // Read by a head scanning the queue after our link_prev (release), which
  // pairs with its load_next_acquire().
  store_relaxed(&rec->numa, numa_node_of<Env>(cpu));
  // A node that becomes head by reaching the front of the main queue
  // without being picked gets these from nobody: start empty.
  rec->sec_head = rec->sec_tail = nullptr;
  rec->intra = 0;
  Hooks::init_node(node);

  if (Hooks::trylock(lock)) goto release;

  // acq_rel: publishes our node's initialisation to whoever reads the tail
  // (release) and sees the previous tail's (acquire), as in qspinlock.h.
  old = q::xchg_tail(lock, tail);
  if (old & q::kTailMask) {
    QNode* prev = q::decode_tail<Env>(old);
    q::link_prev(prev, node);  // release; pairs with load_next_acquire() in the head's scan
    Hooks::wait_node(node, prev);
    // Acquire; pairs with pass() (release) in the head that picked us: our
    // record's secondary queue and run, and the links it moved.
    q::wait_node_locked<Env>(node);
  }

  // Queue head: take the lock (step 3 when we are the tail).
  if (u32 v = Hooks::wait_head_or_lock(lock, node)) {
    if (held_head_finish<Env>(lock, v, tail, rec, &succ)) goto release;
  } else {
    lockevent_inc<Env>(LockEvent::lock_queue);
    if (head_acquire<Env>(lock, tail, rec, &succ)) goto release;
  }

  if (succ != nullptr) {
    // Step 3: the secondary queue is the main queue now; its first waiter
    // starts without one.
    Record* sr = Records<Env>::of(succ);
    sr->sec_head = sr->sec_tail = nullptr;
    sr->intra = 0;
    lockevent_inc<Env>(LockEvent::numa_flush);
  } else {
    // Someone queued behind us: wait for the link (acquire; pairs with its
    // link_prev()), then pick by node.
    while ((next = q::load_next_acquire(node)) == nullptr) spin_relax<Env>();
    succ = pick_successor<Env>(rec, next);
  }
  // Release (seq_cst for PV); pairs with wait_node_locked() in succ:
  // succ's record and the queue links first.  kick_node's own ordering
  // (the halted-state cmpxchg) is pv_qspinlock.h's.
  Hooks::pass(succ);
  Hooks::kick_node(lock, succ);

release:
  store_relaxed(&node0->count, load_relaxed(&node0->count) - 1);  // this CPU's only
}

}  // namespace cna

template <class Env>
class CnaLock {
 public:
  static constexpr const char* kName = "cna";
  // Traits for the registry (registry.h): FIFO within a node; remote waiters
  // are bypassed (within the file comment's BOUND), so not fair.
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "compact NUMA-aware lock (Dice & Kogan): qspinlock word, same-node handoffs, secondary queue of remote waiters";

  void lock() {
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1; acquire pairs with the unlock's release.
    if (__builtin_expect(try_cmpxchg(&w_.val, &v, q::kLockedVal, Order::acquire), 1)) return;
    cna::cna_lock_slowpath<Env, q::NativeHooks<Env>, true>(&w_, v);
  }
  // Release pairs with the acquire of the next owner's cmpxchg or load.
  void unlock() { q::clear_locked_release(&w_); }
  bool try_lock() { return q::trylock_word(&w_); }
  // Held, pending or queued (the secondary queue exists only while held).
  bool is_locked() const { return q::read(&w_) != 0; }

  u32 value() const { return q::read(&w_); }

 private:
  q::QSpinWord w_;
};

static_assert(sizeof(CnaLock<void>) == 4);

}  // namespace lockvisor::locks
