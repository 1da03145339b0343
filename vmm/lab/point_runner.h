// Runs one lab point as a child `lockvisor run ... --json FILE` process
// (machine/child_run.h), its outcome named for the lab's results.
#pragma once
#include <string>
#include <vector>

#include "vmm/machine/child_run.h"

namespace lockvisor::lab {

struct PointRun : machine::ChildRun {
  std::string outcome;  // completed, deadlock, ... (README.md, "Exit codes"); "lab-timeout"
};

// machine::run_child, and the outcome of its exit code ("lab-timeout" when
// the lab killed it).
PointRun run_point(const std::string& lockvisor_path, const std::vector<std::string>& args, const std::string& json_path,
                   const std::string& log_path, double timeout_s);

}  // namespace lockvisor::lab
