// Runs one lab point as a child `lockvisor run ... --json FILE` process: a
// fresh process (and VM) per point, so that a point that crashes, hangs or
// corrupts its VM cannot touch the next one, and its exit code is its
// outcome (README.md, "Exit codes").
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockvisor::lab {

struct PointRun {
  int exit_code = 0;  // the child's, or 128 + signal when a signal ended it
  std::string outcome;  // completed, deadlock, ... (README.md, "Exit codes"); "lab-timeout"
  double wall_s = 0;
  nlohmann::json report;  // the child's --json report, null if it wrote none
  bool interrupted = false;  // the lab itself got SIGINT/SIGTERM/SIGHUP while it ran
};

// The outcome name for a `lockvisor run` exit code.

// Runs `lockvisor_path run ARGS --json JSON_PATH` with stdout and stderr to
// LOG_PATH; kills it after `timeout_s`. The child dies with the lab
// (PR_SET_PDEATHSIG), so a killed lab leaves no orphan behind. Throws a host
// lockvisor::Error if the child cannot be started.
PointRun run_point(const std::string& lockvisor_path, const std::vector<std::string>& args, const std::string& json_path,
                   const std::string& log_path, double timeout_s);

}  // namespace lockvisor::lab
