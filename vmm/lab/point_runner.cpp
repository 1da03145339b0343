#include "vmm/lab/point_runner.h"

#include "vmm/machine/run_result.h"

namespace lockvisor::lab {

PointRun run_point(const std::string& lockvisor_path, const std::vector<std::string>& args, const std::string& json_path,
                   const std::string& log_path, double timeout_s) {
  PointRun run{machine::run_child(lockvisor_path, args, json_path, log_path, timeout_s), {}};
  run.outcome = run.timed_out ? "lab-timeout" : machine::outcome_for_exit_code(run.exit_code);
  return run;
}

}  // namespace lockvisor::lab
