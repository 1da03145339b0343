// shared_state.h: everything the CPUs of one workload run share.
//
// One WorkloadShared<Lock> per run.  It must start all-zero: the guest puts
// it in .bss (one run per boot), the native runner value-initialises a fresh
// one.  All-zero is a valid initial state for every member: every registry
// lock is unlocked when zero, owner 0 = free, barriers not yet reached.
//
// Per lock (kMaxLocks of them, torture uses p.nlocks, the others lock 0):
//
//   own line    | standalone lock                  (64 B, nothing else in it)
//   line 0      | embedded lock | owner | counter | data |   (one 64 B line)
//   lines 1..15 | data word in w[0]                (touched if cs_lines > 1)
//
// LockLayout::kStandalone uses the lock in `own` (the lock and the data it
// protects are in different cache lines: an acquisition moves the lock line,
// the critical section then moves the data lines).  kEmbedded uses the lock
// in line 0 (the kernel's usual "spinlock inside the structure it protects":
// a waiter spinning on the lock word keeps stealing the line the holder
// writes).  The unused lock object just stays zero.  Each critical section
// writes cs_lines lines: line 0 (owner, counter, data) and lines 1..cs_lines-1.
//
// `owner` (cpu + 1 of the holder, 0 = free) and `counter` (acquisitions,
// incremented with a separate load and store: NOT an atomic RMW) are the
// mutual-exclusion checks; see workloads.h.  `totals` collects the
// acquisitions each CPU counted locally, added atomically at the end, to
// check the non-atomic counters against.
#pragma once

#include "lockvisor/abi/types.h"
#include "lockvisor/abi/workload.h"
#include "locks/lock_env.h"

namespace lockvisor::workloads {

using lockvisor::abi::u32;
using lockvisor::abi::u64;

inline constexpr unsigned kMaxLocks = 16;
inline constexpr unsigned kMaxCsLines = 16;
inline constexpr unsigned kLine = locks::kCacheLine;

struct alignas(kLine) DataLine {
  u64 w[kLine / sizeof(u64)];
};
static_assert(sizeof(DataLine) == kLine);

template <class Lock>
struct alignas(kLine) LockSlot {
  struct alignas(kLine) Own {
    Lock lock;
  };
  struct alignas(kLine) First {
    Lock lock;    // the embedded lock
    u32 owner;    // cpu + 1 of the holder, 0 = free (atomic xchg)
    u64 counter;  // acquisitions (non-atomic increment, under the lock)
    u64 data;     // the first protected data word
    u64 last_holder;  // (node + 1) << 32 | (cpu + 1) of its last releaser, 0 = none (under the lock)
  };
  static_assert(sizeof(First) == kLine, "lock too large to embed in one cache line with its data");

  Own own;
  First first;
  DataLine more[kMaxCsLines - 1];  // data lines 1..15

  Lock& lock(abi::LockLayout layout) { return layout == abi::LockLayout::kEmbedded ? first.lock : own.lock; }
};

// A one-shot barrier: arrivals are counted; the last to arrive releases.
struct alignas(kLine) Barrier {
  u32 arrived;
  u32 released;
  u64 start_tsc;     // start barrier: release time, the common start of the window
  u64 deadline_tsc;  // start barrier: start_tsc + duration
};

template <class Lock>
struct WorkloadShared {
  LockSlot<Lock> slots[kMaxLocks];
  Barrier start;
  Barrier end;
  alignas(kLine) u64 totals[kMaxLocks];  // per lock: sum over CPUs of acquisitions (atomic adds)
};

// Compile-time layout checks for one lock type (used by run_workload).
template <class Lock>
constexpr bool check_shared_layout() {
  static_assert(sizeof(WorkloadShared<Lock>) < 64 * 1024, "WorkloadShared too large");
  static_assert(__is_trivially_constructible(WorkloadShared<Lock>), "WorkloadShared must be zero-initialisable");
  static_assert(alignof(LockSlot<Lock>) == kLine && sizeof(LockSlot<Lock>) % kLine == 0);
  return true;
}

}  // namespace lockvisor::workloads
