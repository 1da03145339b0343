// lockvisor lab: run a scenario's points (each a child `lockvisor run`),
// append each result to OUT/results.jsonl as it finishes, and leave
// summary.csv, summary.md, report.md and the plots in OUT.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/lab/lab_summary.h"
#include "vmm/lab/matrix.h"
#include "vmm/lab/scenario.h"

namespace lockvisor::lab {

struct LabOptions {
  std::string scenario_text;  // empty with resume: the one in OUT/lab.json
  std::string origin;         // "preset quick", a file name
  bool native = false;        // add native twins
  std::optional<unsigned> repeats;
  std::optional<Shard> shard;
  SettingValues overrides;    // --set NAME=VALUE and --kernel, for every point (scenario.h, apply_overrides)
  std::string out;
  // --host-cpus LIST: plan the placements for these CPUs instead of the
  // usable ones (vmm/host/host_cpus.h); empty: the usable ones.
  std::string host_cpus;
  std::optional<unsigned> jobs;  // --jobs N: points side by side (side_by_side.h); none: default_jobs
  bool resume = false;
  bool dry_run = false;       // list the points, run nothing
  bool timelines = true;      // the scenario's [timeline] traced runs (--no-timelines: none)
  std::string command;        // the exact command line, for the report
  std::string lockvisor;      // the binary to run points with
  // Checks one point's `lockvisor run` arguments as run would (throws a usage
  // Error); the command line's cli::check_run_arguments.
  std::function<void(const std::vector<std::string>&)> check_point;
};

// Returns the exit code: 0 when every point has run (a point that failed is
// a result, recorded with its outcome), 130 when stopped by a signal.
int run_lab(const LabOptions& o);

// Combines the results of shards (or any labs of one scenario) into OUT:
// duplicates are an error naming the point.
int merge_labs(const std::string& out, const std::vector<std::string>& inputs, const std::string& command);

// Rewrites the summaries, report and plots of a lab directory from its results.
void write_outputs(const std::string& dir);

// A lab directory as its summaries see it: lab.json, the scenario as the lab
// ran it (preset or file with its --repeats, --native and --set, planned for
// the CPUs lab.json names), its results and their summary. Throws a usage
// lockvisor::Error for a directory that is no lab.
struct LabDirectory {
  nlohmann::json manifest;
  Scenario scenario;
  std::vector<nlohmann::json> records;
  Summary summary;
};
LabDirectory load_lab(const std::string& dir);

}  // namespace lockvisor::lab
