// A small trace file written by the trace writer from hand-made lanes, so
// that its verdicts are known: two vCPUs, one lock; vCPU 0 waits from 1 ms
// to 6 ms and takes the lock by its reservation, vCPU 1 steals it at 3 ms
// (past vCPU 0, then older than a 1 ms bound) and takes it by the fast path
// at 4 ms, and vCPU 0 is preempted from 3.5 ms to 5 ms. Every timestamp is
// kSampleOrigin plus the offsets above. `args` is the run's metadata.args
// ("lock=pvbounded pvb_bound_max_us=1": a fixed 1 ms bound). The metadata
// has what a lock workload's run writes beside it (program, TSC rate, host
// CPUs, the lock records counted by path).
#pragma once
#include <cstdint>
#include <string>

#include "locks/lock_events.h"
#include "vmm/trace/trace.h"
#include "vmm/trace/trace_window.h"
#include "vmm/trace/trace_writer.h"

namespace lockvisor::trace {

inline constexpr std::uint64_t kSampleOrigin = 1'000'000'000;

// The sample's lanes and metadata in `trace` (not begun yet).
inline void fill_sample_trace(Trace& trace, const char* args) {
  constexpr std::uint64_t kUs = 1000, kMs = 1000 * kUs;
  static const char* const exit_names[] = {"hypercall"};
  trace.begin(2, kSampleOrigin, exit_names);
  trace.metadata()["vcpus"] = 2;
  trace.metadata()["program"] = "lockbench";
  trace.metadata()["args"] = args;
  trace.metadata()["tsc_khz"] = 2600000;
  trace.metadata()["vcpu_host_cpus"] = {{0}, {0}};
  for (unsigned v = 0; v < 2; ++v)
    trace.vcpu_lane(v).add({kSampleOrigin, kSampleOrigin + 20 * kMs, 0, 0, EventKind::kGuest});
  nlohmann::json by_path = nlohmann::json::object();
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p) by_path[locks::kAcqPathNames[p]] = 0;
  const auto wait = [&](unsigned v, std::uint64_t a, std::uint64_t q, locks::AcqPath p) {
    const auto path = static_cast<std::uint8_t>(p);
    trace.lock_lane(v).add({kSampleOrigin + a, kSampleOrigin + q, 0, 0, EventKind::kLockWait, path});
    trace.lock_lane(v).add({kSampleOrigin + q, kSampleOrigin + q + 100, 0, 0, EventKind::kLockHold, path});
    by_path[locks::kAcqPathNames[path]] = by_path[locks::kAcqPathNames[path]].get<std::uint64_t>() + 1;
  };
  wait(0, 1 * kMs, 6 * kMs, locks::AcqPath::reserved);
  wait(1, 3 * kMs, 3 * kMs, locks::AcqPath::steal);
  wait(1, 4 * kMs, 4 * kMs, locks::AcqPath::fast);
  trace.metadata()["locks"] = {{"records_per_vcpu", trace.lock_records_per_vcpu()},
                               {"records", 3},
                               {"dropped_in_guest", 0},
                               {"rejected", 0},
                               {"clamped", 0},
                               {"by_path", by_path},
                               {"invalid_path", 0}};
  trace.host_lane(0).add({kSampleOrigin + 3 * kMs + 500 * kUs, kSampleOrigin + 5 * kMs, 0, 1, EventKind::kPreempted});
}

// The sample as a file: whole, or with `options` (--trace-merge-short) and
// a window given in milliseconds since the origin.
inline std::string sample_trace_json(const char* args, TraceOptions options = TraceOptions{100000, 0},
                                     const char* window = nullptr) {
  Trace trace(options);
  fill_sample_trace(trace, args);
  if (window == nullptr) return to_trace_json(trace);
  const auto resolved = resolve_trace_window(parse_trace_window(window), trace, nullptr);
  return to_trace_json(trace, resolved ? &*resolved : nullptr);
}

}  // namespace lockvisor::trace
