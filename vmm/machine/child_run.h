// A VM run in a child `lockvisor run ... --json FILE` process: a fresh
// process (and VM) per run, so that a run that crashes, hangs or corrupts its
// VM cannot touch the next one, and its exit code is its outcome (README.md,
// "Exit codes"). The lab runs its points this way, the Linux conformance
// cases their kernels.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockvisor::machine {

struct ChildRun {
  int exit_code = 0;  // the child's, or 128 + signal when a signal ended it
  bool timed_out = false;  // killed after `timeout_s` (the caller names this outcome)
  double wall_s = 0;
  nlohmann::json report;  // the child's --json report, null if it wrote none
  bool interrupted = false;  // this process got SIGINT/SIGTERM/SIGHUP while it ran
};

// Runs `lockvisor_path run ARGS --json JSON_PATH` with stdout and stderr to
// LOG_PATH; kills it after `timeout_s`. The child dies with this process
// (PR_SET_PDEATHSIG), so a killed parent leaves no orphan behind. A stop
// signal taken by this process is passed on as SIGTERM (the child of a
// terminal's Ctrl-C has it already). Throws a host lockvisor::Error if the
// child cannot be started.
ChildRun run_child(const std::string& lockvisor_path, const std::vector<std::string>& args,
                   const std::string& json_path, const std::string& log_path, double timeout_s);

}  // namespace lockvisor::machine
