// Everything `lockvisor trace-check` asks of one trace file, as one call:
// pvbounded's bound oracle (bound_check.h), the NUMA locks' stated bound
// (numa_bound_check.h), and where each lock's time went (lock_time.h). The
// command prints and writes it; the lab runs it on each of its timelines
// so that report.md carries the verdicts and the per-path table beside the
// picture (vmm/lab/timeline_check.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/trace/bound_check.h"
#include "vmm/trace/lock_time.h"
#include "vmm/trace/numa_bound_check.h"
#include "vmm/trace/trace_reader.h"

namespace lockvisor::trace {

// The oracle's knobs (the command's options; their defaults live here).
struct TraceCheckOptions {
  // T; empty: the run's own bound (bound_rules_from).
  std::optional<std::uint64_t> bound_us;
  // Slack for a running head to react: one loop iteration and a critical section.
  std::uint64_t grace_us = 10;
  // How long a head that runs again takes to act; empty: the run's pvb_stale_us.
  std::optional<std::uint64_t> resume_us;
  // Longest running time of a newcomer's steal phase before it queues.
  std::uint64_t steal_phase_us = 100;
  // Free gaps of a lock at least this long are explained by every vCPU's activity.
  std::uint64_t gap_us = 20;
};

struct TraceCheck {
  BoundReport bound;
  NumaBoundReport numa;
  std::vector<LockTime> locks;
  // A bypass broke pvbounded's invariant, or a run of a NUMA lock its bound:
  // the command's exit 1.
  bool broken() const { return bound.violations != 0 || !numa.violations.empty(); }
};

// Throws a usage lockvisor::Error naming the file for a lock workload's
// trace without a single acquisition: nothing to judge.
TraceCheck check_trace(const TraceTimeline& timeline, const TraceCheckOptions& options);

// Whether a traced run of `lock` gets a verdict: pvbounded's oracle, or a
// NUMA lock's stated bound when the run has a virtual topology. Such a trace
// must keep every acquisition: the verdicts need each bypass's time, so a
// trace whose short acquisitions were merged (--trace-merge-short) leaves
// every long wait unchecked.
bool trace_check_judges(std::string_view lock, bool with_topology);

// How many lines of bypass runs the text shows per long wait, by default.
inline constexpr std::size_t kTraceCheckRunsShown = 12;

// The command's text: the oracle (with up to `runs` lines of bypass runs per
// long wait), the NUMA bound where the run had one, each lock's time.
std::string format_trace_check(const TraceTimeline& timeline, const TraceCheck& check, std::size_t runs);

// The command's --json (docs/trace.md, "trace-check's JSON"); `file` names
// the trace.
nlohmann::json trace_check_json(const std::string& file, const TraceTimeline& timeline, const TraceCheck& check);

}  // namespace lockvisor::trace
