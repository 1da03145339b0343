#include "vmm/lab/point_runner.h"

#include <set>

#include "vmm/machine/run_result.h"

namespace lockvisor::lab {

bool is_point_outcome(const std::string& outcome) {
  // A child's exit status is 0..255 (128 + N for signal N).
  static const std::set<std::string> kOutcomes = [] {
    std::set<std::string> names{kLabTimeout};
    for (int code = 0; code <= 255; ++code) names.insert(machine::outcome_for_exit_code(code));
    return names;
  }();
  return kOutcomes.count(outcome) != 0;
}

std::string point_outcomes_text() {
  std::string names;
  for (auto o : {machine::Outcome::kCompleted, machine::Outcome::kGuestFailed, machine::Outcome::kUsageError,
                 machine::Outcome::kGuestFault, machine::Outcome::kTimeout, machine::Outcome::kDeadlock,
                 machine::Outcome::kHostError, machine::Outcome::kInterrupted})
    names += std::string(machine::outcome_name(o)) + ", ";
  return names + kLabTimeout + ", killed-by-signal-N or exit-code-N";
}

PointRun run_point(const std::string& lockvisor_path, const std::vector<std::string>& args, const std::string& json_path,
                   const std::string& log_path, double timeout_s) {
  PointRun run{machine::run_child(lockvisor_path, args, json_path, log_path, timeout_s), {}};
  run.outcome = run.timed_out ? kLabTimeout : machine::outcome_for_exit_code(run.exit_code);
  return run;
}

}  // namespace lockvisor::lab
