// lock_events.h: per-CPU lock event counters (Linux lock_events_list.h style).
//
// LOCKVISOR_LOCK_EVENTS(X) is the single list of counters; X(name, "what it
// counts") once per line.  It generates
//   * struct LockEvents   plain u64 counters, one per event, per CPU;
//   * enum class LockEvent the event ids, for indexed access (lock_use_node*);
//   * kLockEventNames[] / kLockEventDescriptions[] so reporters can iterate.
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
  X(lock_slowpath,      "acquisitions via the MCS queue")                                    \
  X(lock_use_node2,     "queue entries using nesting node 2")                                \
  X(lock_use_node3,     "queue entries using nesting node 3")                                \
  X(lock_use_node4,     "queue entries using nesting node 4")                                \
  X(lock_no_node,       "queue entries with all nodes busy (fell back to trylock spinning)")   \
  X(pv_no_steal,        "pvbounded: a queue head older than the bound reserved the lock (no-steal)") \
  X(pv_boost,           "pvbounded: unlocks that asked the host to run a preempted reserved head") \
  X(pv_lend,            "pvbounded (handoff=running): locks taken while reserved for a preempted head")
// clang-format on

enum class LockEvent : unsigned {
#define LOCKVISOR_X_ENUM_(name, desc) name,
  LOCKVISOR_LOCK_EVENTS(LOCKVISOR_X_ENUM_)
#undef LOCKVISOR_X_ENUM_
  count_
};

inline constexpr unsigned kLockEventCount = static_cast<unsigned>(LockEvent::count_);

struct LockEvents {
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

// The three lock_use_node* ids are consecutive so idx 1..3 maps by addition.
static_assert(static_cast<unsigned>(LockEvent::lock_use_node3) ==
              static_cast<unsigned>(LockEvent::lock_use_node2) + 1);
static_assert(static_cast<unsigned>(LockEvent::lock_use_node4) ==
              static_cast<unsigned>(LockEvent::lock_use_node2) + 2);
static_assert(sizeof(LockEvents) == kLockEventCount * sizeof(u64));

}  // namespace lockvisor::locks
