// Chrome trace-event JSON (the format Perfetto and chrome://tracing load)
// from a Trace: {"traceEvents":[...], "displayTimeUnit":"ns", "metadata":{...}}.
//
// pid 1 is the VM. Each vCPU has three threads (tids), kept together by
// thread_sort_index: tid i "vCPU i" (guest, exits, halts, parks; kicks as
// flow arrows), tid kHostTidBase + i "vCPU i host" (host preemptions) and
// tid kLockTidBase + i "vCPU i locks" (lock waits and holds). Slices are
// complete ("X") events, which nest on one tid; timestamps are microseconds
// since the run's origin with nanosecond decimals. Kicks are flow events
// ("s" on the kicker, "f" with "bp":"e" on the kicked vCPU at its wake),
// written only in pairs. A lane that dropped events ends with an instant
// "dropped N events". With a window (trace_window.h) only what overlaps it
// is written, and metadata.window says which window and what it left out.
#pragma once
#include <string>

#include "vmm/trace/trace.h"
#include "vmm/trace/trace_window.h"

namespace lockvisor::trace {

inline constexpr unsigned kHostTidBase = 1000;
inline constexpr unsigned kLockTidBase = 2000;

std::string to_trace_json(const Trace& trace, const ResolvedWindow* window = nullptr);

}  // namespace lockvisor::trace
