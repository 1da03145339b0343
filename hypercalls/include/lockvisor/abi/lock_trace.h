// The lock-trace log: where a traced guest records each lock acquisition
// (arrive, acquired, released) for the VMM's timeline (--trace,
// docs/trace.md), with no exit at all.
//
// The VMM reserves one region of guest RAM per run at BootInfo::lock_trace_gpa
// (kBootFlagLockTrace set), lock_trace_stride bytes per vCPU: a LockTraceHeader
// followed by `capacity` LockTraceRecords. Only vCPU i writes block i, only
// while the program runs; the VMM reads every block once all vCPU threads
// have left (so no ordering between the two is needed).
//
// It is a log, not a ring: the first `capacity` acquisitions are kept, later
// ones are only counted (`dropped`), so a trace always starts at the start of
// the measured run and `count + dropped` equals the vCPU's acquisitions.
//
// The guest is untrusted: the VMM takes capacity from its own bookkeeping,
// never from the header, clamps count to it, and checks every record (lock
// slot in range, t0 <= t1 <= t2, times inside the run) before using it; a
// path code it does not know is counted as invalid, never used as an index.
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

inline constexpr u64 kLockTraceMagic = 0x3130525456434c;  // "LCVTR01"

struct LockTraceHeader {
  u64 magic;     // written by the VMM
  u64 capacity;  // records after this header, written by the VMM
  u64 count;     // records written so far (guest)
  u64 dropped;   // acquisitions not recorded because the log was full (guest)
};

// One acquisition, in guest TSC cycles. Written whole before count moves.
struct LockTraceRecord {
  u64 arrive;    // t0: about to call lock()
  u64 acquired;  // t1: lock() returned
  u64 released;  // t2: unlock() returned
  u32 lock;      // lock slot (0 for lockbench, 0..locks-1 for torture)
  u32 path;      // how the lock was taken: a locks::AcqPath code (guest/locks/lock_events.h), below its count
};

static_assert(sizeof(LockTraceHeader) == 32);
static_assert(sizeof(LockTraceRecord) == 32);

}  // namespace lockvisor::abi
