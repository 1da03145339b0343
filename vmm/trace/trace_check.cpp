#include "vmm/trace/trace_check.h"

namespace lockvisor::trace {

TraceCheck check_trace(const TraceTimeline& timeline, const TraceCheckOptions& options) {
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
