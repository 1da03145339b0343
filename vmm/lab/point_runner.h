// Runs one lab point as a child `lockvisor run ... --json FILE` process
// (machine/child_run.h), its outcome named for the lab's results.
#pragma once
#include <string>
#include <vector>

#include "vmm/machine/child_run.h"

namespace lockvisor::lab {

struct PointRun : machine::ChildRun {
  std::string outcome;  // completed, deadlock, ... (README.md, "Exit codes"); kLabTimeout
};

// The outcome of a point the lab killed for running past its time.
inline constexpr const char* kLabTimeout = "lab-timeout";
// The outcome the summary counts for a VM of a multi-VM point whose run left
// no report for it.
inline constexpr const char* kNoReport = "no-report";

// Whether a point's result can end with `outcome`: a run's outcome for some
// exit code (machine::outcome_for_exit_code: completed, deadlock, ...,
// killed-by-signal-N, exit-code-N) or kLabTimeout.
bool is_point_outcome(const std::string& outcome);
// Those outcomes in words, for messages.
std::string point_outcomes_text();

// machine::run_child, and the outcome of its exit code ("lab-timeout" when
// the lab killed it).
PointRun run_point(const std::string& lockvisor_path, const std::vector<std::string>& args, const std::string& json_path,
                   const std::string& log_path, double timeout_s);

}  // namespace lockvisor::lab
