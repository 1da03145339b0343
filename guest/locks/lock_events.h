// lock_events.h: per-CPU lock event counters (Linux lock_events_list.h style).
//
// LOCKVISOR_LOCK_EVENTS(X) is the single list of counters; X(name, "what it
// counts") once per line.  It generates
//   * struct LockEvents   plain u64 counters, one per event, per CPU;
//   * enum class LockEvent the event ids, for indexed access (lock_use_node*);
//   * kLockEventNames[] / kLockEventDescriptions[] so reporters can iterate.
// LOCKVISOR_ACQ_PATHS(X) below names how an acquisition was made (fast path,
// steal, queue handoff, ...) and which of these counters counts each path.
//
// Single-writer rule: a CPU's LockEvents is only ever incremented by that CPU
// (Env::events() returns the calling CPU's block).  Increments are therefore a
// relaxed load + relaxed store, not a locked RMW: as cheap as a plain `++`, but
// still an atomic access so a reporter may read another CPU's counters while it
// runs (it sees a slightly stale value, never a torn one, and TSan agrees).
#pragma once

#include "lockvisor/abi/types.h"
#include "locks/atomic.h"

namespace lockvisor::locks {

using lockvisor::abi::u64;

// clang-format off
#define LOCKVISOR_LOCK_EVENTS(X)                                                              \
  X(pv_wait,            "pv_wait calls that halted or would halt the vCPU (Env::wait)")      \
  X(pv_kick,            "pv_kick calls (Env::kick) sent by this CPU")                        \
  X(pv_spurious_wakeup, "returns from pv_wait with the wait condition still unmet")           \
  X(pv_lock_stealing,   "locks taken by stealing past queued waiters (unfair / hybrid trylock)") \
  X(pv_wait_early,      "queue-node halts taken early because prev was not running")          \
  X(pv_wait_head,       "halts by the queue head (waiting on the locked byte)")               \
  X(pv_wait_node,       "halts by a non-head queue node (waiting on its node state)")         \
  X(pv_wait_again,      "queue-head halts after the first (woken but lock stolen)")           \
  X(pv_hash_hops,       "hash-table entries probed by pv_hash (sum over inserts)")            \
  X(pv_kick_unlock,     "slow-path unlocks (an unlock that had to find and kick a waiter)")   \
  X(lock_pending,       "acquisitions via the pending bit (2-contender path)")               \
  X(lock_slowpath,      "slow-path entries (the fast path failed; qspinlock family, after the pending path)") \
  X(lock_use_node2,     "queue entries using nesting node 2")                                \
  X(lock_use_node3,     "queue entries using nesting node 3")                                \
  X(lock_use_node4,     "queue entries using nesting node 4")                                \
  X(lock_no_node,       "queue entries with all nodes busy (fell back to trylock spinning)")   \
  X(pv_no_steal,        "pvbounded: a queue head older than the bound reserved the lock (no-steal)") \
  X(pv_boost,           "pvbounded: unlocks that asked the host to run a preempted reserved head") \
  X(pv_lend,            "pvbounded (handoff=running): locks taken while reserved for a preempted head") \
  X(lock_spin,          "acquisitions by a spinning contender with no queued waiter (TAS retry, steal phase)") \
  X(lock_queue,         "acquisitions in queue order (MCS queue head without a reservation, ticket turn)") \
  X(pv_reserved,        "pvbounded: acquisitions by a queue head of the lock it had reserved (N set)") \
  X(pv_reserve_for,     "pvbounded: reservations set for a queue head past its deadline by a newcomer that would have stolen") \
  X(pv_bound_up,        "pvbounded: windows in which reserved locks sat free for their heads a quarter of the time or more, which raised the working bound (convoy)") \
  X(pv_bound_down,      "pvbounded: windows of nearly idle-free handoffs that lowered a raised working bound back towards T") \
  X(numa_local_pass,    "cna/hq: handoffs that skipped to a same-node waiter or stayed on the node") \
  X(numa_flush,         "cna/hq: handoffs that went back to the waiters of other nodes (threshold or none local)") \
  X(pv_confer,          "pvconfer: waits that conferred their time slice to the preempted lock holder (YIELD_TO)") \
  X(pv_head_expired,    "pvbounded: timed head halts that ended at pvb_head_halt_us with no kick and the lock free for the head (a kick request the release's store erased, or a kick still on its way)")
// clang-format on

enum class LockEvent : unsigned {
#define LOCKVISOR_X_ENUM_(name, desc) name,
  LOCKVISOR_LOCK_EVENTS(LOCKVISOR_X_ENUM_)
#undef LOCKVISOR_X_ENUM_
  count_
};

inline constexpr unsigned kLockEventCount = static_cast<unsigned>(LockEvent::count_);

// Whole cache lines per CPU: the slow paths write their CPU's counters, so a
// block must not share a line with another CPU's (lock_env.h's kCacheLine;
// that header includes this one).
inline constexpr unsigned kLockEventsAlign = 64;
struct alignas(kLockEventsAlign) LockEvents {
#define LOCKVISOR_X_FIELD_(name, desc) u64 name;
  LOCKVISOR_LOCK_EVENTS(LOCKVISOR_X_FIELD_)
#undef LOCKVISOR_X_FIELD_

  // Counter by id (for reporters and for the lock_use_node2..4 family).
  u64* slot(LockEvent e);
  u64 get(LockEvent e) const { return load_relaxed(const_cast<LockEvents*>(this)->slot(e)); }

  // Single-writer increment (see the file comment).
  void add(LockEvent e, u64 n = 1) {
    u64* p = slot(e);
    store_relaxed(p, load_relaxed(p) + n);
  }

  // Owner-side reset; do not call while the owner CPU is running locks.
  void reset() {
    for (unsigned i = 0; i < kLockEventCount; i++) store_relaxed(slot(static_cast<LockEvent>(i)), u64{0});
  }
};

inline constexpr u64 LockEvents::* kLockEventMembers[kLockEventCount] = {
#define LOCKVISOR_X_MEMBER_(name, desc) &LockEvents::name,
    LOCKVISOR_LOCK_EVENTS(LOCKVISOR_X_MEMBER_)
#undef LOCKVISOR_X_MEMBER_
};

inline u64* LockEvents::slot(LockEvent e) { return &(this->*kLockEventMembers[static_cast<unsigned>(e)]); }

inline constexpr const char* kLockEventNames[kLockEventCount] = {
#define LOCKVISOR_X_NAME_(name, desc) #name,
    LOCKVISOR_LOCK_EVENTS(LOCKVISOR_X_NAME_)
#undef LOCKVISOR_X_NAME_
};

inline constexpr const char* kLockEventDescriptions[kLockEventCount] = {
#define LOCKVISOR_X_DESC_(name, desc) desc,
    LOCKVISOR_LOCK_EVENTS(LOCKVISOR_X_DESC_)
#undef LOCKVISOR_X_DESC_
};

// ---- How each acquisition was made
// LOCKVISOR_ACQ_PATHS(X): X(path, counting event, "what it is").  A lock
// counts the path of an acquisition where its code already branches to it,
// with that event: one counter increment on a slow path, the same per-CPU
// block every lock already writes there.  `fast` has no counter (an
// uncontended acquisition costs nothing more): every acquisition that is not
// fast increments exactly one of the other events, so per CPU, fast =
// acquisitions - the sum of the others.  The ids are the lock-trace log's
// LockTraceRecord::path (lockvisor/abi/lock_trace.h) and the keys of a lock
// run's acquisitions_by_path (docs/pvbounded.md, docs/trace.md).
// clang-format off
#define LOCKVISOR_ACQ_PATHS(X)                                                                  \
  X(fast,     count_,           "the lock's first attempt, no contention seen")                 \
  X(spin,     lock_spin,        "won spinning on the word with no queued waiter (TAS retry, steal phase, trylock)") \
  X(steal,    pv_lock_stealing, "taken past queued waiters: the word had a queue tail (pvbounded: N clear)") \
  X(pending,  lock_pending,     "qspinlock's pending bit (the second contender)")               \
  X(queue,    lock_queue,       "in queue order: MCS queue head (pvbounded: without a reservation), ticket turn") \
  X(reserved, pv_reserved,      "pvbounded: the queue head took the lock it had reserved (N set)") \
  X(borrow,   pv_lend,          "pvbounded, handoff=running: lent past a reserved head whose vCPU is preempted")
// clang-format on

enum class AcqPath : unsigned {
#define LOCKVISOR_X_ENUM_(name, event, desc) name,
  LOCKVISOR_ACQ_PATHS(LOCKVISOR_X_ENUM_)
#undef LOCKVISOR_X_ENUM_
  count_
};
inline constexpr unsigned kAcqPathCount = static_cast<unsigned>(AcqPath::count_);

// The counting event of each path; LockEvent::count_ for `fast` (none).
inline constexpr LockEvent kAcqPathEvents[kAcqPathCount] = {
#define LOCKVISOR_X_EVENT_(name, event, desc) LockEvent::event,
    LOCKVISOR_ACQ_PATHS(LOCKVISOR_X_EVENT_)
#undef LOCKVISOR_X_EVENT_
};
inline constexpr const char* kAcqPathNames[kAcqPathCount] = {
#define LOCKVISOR_X_NAME_(name, event, desc) #name,
    LOCKVISOR_ACQ_PATHS(LOCKVISOR_X_NAME_)
#undef LOCKVISOR_X_NAME_
};
inline constexpr const char* kAcqPathDescriptions[kAcqPathCount] = {
#define LOCKVISOR_X_DESC_(name, event, desc) desc,
    LOCKVISOR_ACQ_PATHS(LOCKVISOR_X_DESC_)
#undef LOCKVISOR_X_DESC_
};
static_assert(static_cast<unsigned>(AcqPath::fast) == 0 && kAcqPathEvents[0] == LockEvent::count_,
              "fast is path 0, the one without a counter");
// Every other path has its own event (the sum rule above needs them distinct).
constexpr bool acq_path_events_distinct() {
  for (unsigned i = 1; i < kAcqPathCount; i++) {
    if (kAcqPathEvents[i] == LockEvent::count_) return false;
    for (unsigned j = 1; j < i; j++)
      if (kAcqPathEvents[i] == kAcqPathEvents[j]) return false;
  }
  return true;
}
static_assert(acq_path_events_distinct());

// The paths that bypassed a queued waiter: a steal past the queue, and a
// borrow past a reserved queue head.  (spin and fast saw no queue; pending,
// queue and reserved are the waiters' own turns.)  Their share of all
// acquisitions is a run's steal_fraction (vmm/lockstat/lock_metrics.h).
constexpr bool acq_path_bypasses_queue(AcqPath p) { return p == AcqPath::steal || p == AcqPath::borrow; }

// The three lock_use_node* ids are consecutive so idx 1..3 maps by addition.
static_assert(static_cast<unsigned>(LockEvent::lock_use_node3) ==
              static_cast<unsigned>(LockEvent::lock_use_node2) + 1);
static_assert(static_cast<unsigned>(LockEvent::lock_use_node4) ==
              static_cast<unsigned>(LockEvent::lock_use_node2) + 2);
static_assert(sizeof(LockEvents) % kLockEventsAlign == 0 && sizeof(LockEvents) >= kLockEventCount * sizeof(u64));

}  // namespace lockvisor::locks
