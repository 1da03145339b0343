// --trace-window: write only part of a run's timeline.
//
// A second of lockbench under overcommit makes millions of lock slices, about
// 100 bytes of JSON each; what a report (or a person in Perfetto) needs is
// the few milliseconds around one event. The run still records every lane
// as usual (the lock log in the guest, the buffers in the VMM); the window
// only decides what the writer puts in the file:
//   all                 the whole run (the default);
//   START:END           a time range since the run's origin, each an integer
//                       with a unit (ns, us, ms, s), e.g. 120ms:125ms;
//   worst-wait[:PAD]    the longest lock wait in the lock lanes, with PAD of
//                       context on each side (default half the wait, at least
//                       1 ms): a timeline of what made the worst wait long.
// A slice is kept when it overlaps the window (it may start before it or end
// after it); a kick arrow when both its ends are kept. The file's
// metadata.window says which window, why, and how many events it left out.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "vmm/trace/trace.h"

namespace lockvisor::trace {

struct TraceWindowSpec {
  enum class Kind { kAll, kRange, kWorstWait };
  Kind kind = Kind::kAll;
  std::uint64_t begin_ns = 0, end_ns = 0;  // kRange: since the run's origin, begin < end
  std::optional<std::uint64_t> pad_ns;     // kWorstWait: context on each side
};

// Throws a usage lockvisor::Error with one line naming the bad part.
TraceWindowSpec parse_trace_window(std::string_view text);
std::string format_trace_window(const TraceWindowSpec& spec);

// An integer with a unit (ns, us, ms, s) up to an hour, for the --trace
// options that take durations; `option` names it in the one-line error.
std::uint64_t parse_trace_duration(std::string_view option, std::string_view text);

// A window on the trace's clock (CLOCK_MONOTONIC ns, like the events).
struct ResolvedWindow {
  std::uint64_t begin_ns = 0;
  std::uint64_t end_ns = 0;
  nlohmann::json description;  // metadata.window (without the count left out)

  // Whether the file keeps `e`: a slice that overlaps the window, an instant inside it.
  bool holds(const Event& e) const { return e.end_ns >= begin_ns && e.begin_ns <= end_ns; }
};

// The window for this trace, or nullopt for the whole run (kAll, or
// worst-wait on a trace without lock waits: `note` then says why).
std::optional<ResolvedWindow> resolve_trace_window(const TraceWindowSpec& spec, const Trace& trace, std::string* note);

// What the run's trace line says of the window its file was written with:
// ", window A..B ms" (ms since the origin), with " around the worst lock
// wait (W ms, vCPU V)" for worst-wait. A window that holds none of the run's
// events says so, with the time they cover, so that a file with only
// metadata is not taken for a quiet run: ", window A..B ms: empty, the run's
// events lie in C..D ms".
std::string window_words(const ResolvedWindow& window, const Trace& trace);

}  // namespace lockvisor::trace
