// The guest side of the lock-trace log (lockvisor/abi/lock_trace.h): each
// vCPU appends one record per lock acquisition to its own block of guest
// memory, which the VMM reads after the run (--trace, docs/trace.md).
//
// No exit, no atomic, no shared cache line: a vCPU writes only its own block.
// With tracing off (kBootFlagLockTrace clear) lock_trace_block() is null and
// the observers cost one predictable branch.
#pragma once
#include "lockvisor/abi/lock_trace.h"
#include "lockvisor/abi/types.h"

namespace guest {

// vCPU `cpu`'s log block, or nullptr when the VMM did not ask for a trace.
// Valid after lock_trace_init(). Called by vCPU `cpu` itself, before its
// measured window: it touches every page of the block once, so that the
// first write to each (a page fault the host resolves, expensive on PVM)
// does not land inside the measurement.
lockvisor::abi::LockTraceHeader* lock_trace_block(unsigned cpu);

// Reads BootInfo once (every vCPU may call it; they write the same values).
void lock_trace_init();

// Appends one acquisition to `block` (this vCPU's), or counts it as dropped
// when the log is full. The record is written whole before count moves.
// `path`: how the lock was taken (locks::AcqPath, locks/lock_events.h).
inline void lock_trace_record(lockvisor::abi::LockTraceHeader* block, unsigned lock, lockvisor::abi::u64 t0,
                              lockvisor::abi::u64 t1, lockvisor::abi::u64 t2, lockvisor::abi::u32 path) {
  const lockvisor::abi::u64 n = block->count;
  if (n >= block->capacity) {
    block->dropped = block->dropped + 1;
    return;
  }
  auto* records = reinterpret_cast<lockvisor::abi::LockTraceRecord*>(block + 1);
  records[n] = {t0, t1, t2, lock, path};
  block->count = n + 1;
}

}  // namespace guest
