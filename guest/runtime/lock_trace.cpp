#include "runtime/lock_trace.h"

#include "runtime/boot.h"

namespace guest {
namespace {
u64 g_trace_gpa;     // 0: tracing off
u64 g_trace_stride;
}  // namespace

void lock_trace_init() {
  const BootInfo& info = boot();
  if ((info.flags & kBootFlagLockTrace) == 0 || info.lock_trace_stride < sizeof(LockTraceHeader)) return;
  g_trace_stride = info.lock_trace_stride;
  g_trace_gpa = info.lock_trace_gpa;
}

LockTraceHeader* lock_trace_block(unsigned cpu) {
  if (g_trace_gpa == 0) return nullptr;
  // Identity-mapped: the guest-physical address is the pointer.
  const u64 base = g_trace_gpa + u64{cpu} * g_trace_stride;
  for (u64 page = 0; page < g_trace_stride; page += 4096) {
    auto* word = reinterpret_cast<volatile u64*>(base + page);
    *word = *word;  // a write: the page is mapped writable from now on
  }
  return reinterpret_cast<LockTraceHeader*>(base);
}

}  // namespace guest
