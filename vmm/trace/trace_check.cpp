#include "vmm/trace/trace_check.h"

#include <fmt/format.h>

#include "vmm/util/error.h"

namespace lockvisor::trace {
namespace {

// A lock workload's trace that holds no acquisition at all is refused, not
// passed: exit 0 says "judged: no bypass breaks the invariant", and a gate
// that reads it would pass a trace nobody judged (its lock lanes removed, a
// window where the run did nothing, a run whose lock log found no room).
// Nor is it a violation (exit 1): it is input the oracle cannot use (exit 2).
// A run without locks (pingpong, hello) has no lock lanes to miss; its
// report says "not judged".
void require_something_to_judge(const TraceTimeline& t) {
  if (!t.acquisitions.empty() || t.merged_slices != 0) return;
  bool lock_run = t.metadata.contains(nlohmann::json::json_pointer("/locks/records_per_vcpu"));
  for (const auto& [key, value] : run_args(t.metadata)) lock_run = lock_run || key == "lock";
  if (!lock_run) return;
  fail("{}: nothing to judge: a lock workload's trace without a single lock slice{}", t.file,
       t.windowed ? fmt::format(" in its window, {:.3f}..{:.3f} ms", static_cast<double>(t.begin_ns) * 1e-6,
                                static_cast<double>(t.end_ns) * 1e-6)
                  : std::string());
}

}  // namespace

TraceCheck check_trace(const TraceTimeline& timeline, const TraceCheckOptions& options) {
  require_something_to_judge(timeline);
  BoundRules rules = bound_rules_from(timeline.metadata);
  if (options.bound_us) rules.bound_ns = rules.aim_ns = *options.bound_us * 1000;
  rules.grace_ns = options.grace_us * 1000;
  rules.steal_phase_ns = options.steal_phase_us * 1000;
  if (options.resume_us) rules.resume_ns = *options.resume_us * 1000;
  TraceCheck check;
  check.bound = check_bound(timeline, rules);
  check.numa = check_numa_bound(timeline, numa_bound_rules_from(timeline.metadata));
  check.locks = lock_time(timeline, options.gap_us * 1000);
  return check;
}

bool trace_check_judges(std::string_view lock, bool with_topology) {
  return bound_judges(lock) || (with_topology && states_numa_bound(lock));
}

std::string format_trace_check(const TraceTimeline& timeline, const TraceCheck& check, std::size_t runs) {
  std::string out = format_bound_report(timeline, check.bound, runs);
  if (check.numa.rules.judged) out += format_numa_bound_report(timeline, check.numa, runs);
  out += format_lock_time(check.locks);
  return out;
}

nlohmann::json trace_check_json(const std::string& file, const TraceTimeline& timeline, const TraceCheck& check) {
  const BoundReport& report = check.bound;
  const NumaBoundReport& numa = check.numa;
  nlohmann::json reasons = nlohmann::json::object();
  for (unsigned i = 0; i < static_cast<unsigned>(Reason::kCount); ++i)
    if (report.by_reason[i] != 0) reasons[reason_name(static_cast<Reason>(i))] = report.by_reason[i];
  std::size_t checked = 0;
  for (const LongWait& w : report.long_waits) checked += w.checked;
  return {{"file", file},
          {"vcpus", timeline.vcpus},
          {"merged_slices", timeline.merged_slices},
          {"bound",
           {{"judged", report.rules.judged},
            {"bound_ns", report.rules.bound_ns},
            {"waits", report.waits},
            {"long_waits", report.long_waits.size()},
            {"checked", checked},
            {"violations", report.violations},
            {"waits_with_violation", report.waits_with_violation},
            {"by_reason", std::move(reasons)}}},
          {"numa_bound",
           {{"judged", numa.rules.judged},
            {"promised", numa.rules.judged ? promised_bound_text(numa.rules) : std::string()},
            {"waits", numa.waits},
            {"checked", numa.checked},
            {"longest_wait_ns", numa.longest_wait_ns},
            {"longest_run", numa.longest_run},
            {"violations", numa.violations.size()},
            {"explained", numa.explained}}},
          {"locks", lock_time_json(check.locks)}};
}

}  // namespace lockvisor::trace
