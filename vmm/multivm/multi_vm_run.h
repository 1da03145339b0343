// Several VMs at once (`lockvisor run --vm SPEC --vm SPEC ...`): each VM is a
// child `lockvisor run --json F --start-gate-fd N` of this same executable
// (util/child_process.h), built in parallel, started together through the
// start gate (start_gate.h) and stopped together:
//   - SIGINT/SIGTERM/SIGHUP to the parent: SIGTERM to every child; each
//     reports what it has (outcome "interrupted"), the parent exits 130;
//   - one VM ends with a non-zero exit code: the others get SIGTERM, and the
//     report names the VM that failed and why;
//   - a deadline bounds every phase: building (start_gate.h's kGateWait),
//     running (the longest child watchdog + a margin), and stopping (a child
//     that outlives SIGTERM by 2 s is killed).
// Optional host CPU hogs (host_hogs.h) run from the moment the gate opens
// until the last VM ends.
#pragma once
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockvisor::multivm {

// The watchdog a VM gets when neither its workload nor the command line sets
// one (a lock workload has its own, from --duration): every child ends.
inline constexpr double kDefaultVmTimeoutS = 600;

// One VM of the run, as the command line gave it.
struct VmPlan {
  std::string label;
  std::string spec;               // the --vm text as given
  std::vector<std::string> args;  // its `lockvisor run` arguments (no "run", --json, --start-gate-fd)
  double timeout_s = 0;           // its own watchdog (--timeout, or run's default for it)
  std::string workload, lock;     // what it runs (for the table, also when it wrote no report)
  unsigned vcpus = 0;
};

struct MultiRunOptions {
  std::string lockvisor;  // the executable to start (this one)
  std::vector<VmPlan> vms;
  unsigned hogs = 0;
  std::vector<int> hog_cpus;  // empty: the CPUs this process may use
};

struct VmResult {
  const VmPlan* plan = nullptr;
  std::string label, spec;
  int exit_code = -1;
  std::string outcome;     // from the exit code (README.md, "Exit codes")
  std::string stopped_by;  // empty: ended on its own; else why the parent stopped it
  std::string reason;      // the child's outcome reason, or its last line of output
  std::string log;         // everything it printed
  nlohmann::json result;   // its --json report, null if it wrote none
  std::optional<std::int64_t> first_entry_ns;  // CLOCK_MONOTONIC of its first guest entry
};

struct MultiRunResult {
  std::vector<VmResult> vms;
  nlohmann::json hogs;        // HostHogs::stop(), null without hogs
  std::string failure;        // empty, or which VM failed first and why, or the signal
  std::optional<double> start_skew_ms;  // spread of the first guest entries, when every VM has one
  std::int64_t gate_opened_ns = 0;       // the start time the gate gave (CLOCK_MONOTONIC ns); 0: never opened
  int exit_code = 0;
};

// Throws a host lockvisor::Error only when nothing could be started.
MultiRunResult run_vms(const MultiRunOptions& options);

// The --json object: {"vms": [{"label", "spec", "exit_code", "outcome",
// "workload", "lock", "vcpus", "stopped_by", "reason", "result"}], "hogs", "failure", "start_skew_ms", "exit_code"}.
nlohmann::json to_json(const MultiRunResult& result);

// Each VM's own output (the single-run report) under a header, then one
// comparison table, the hogs and the outcome.
void print_report(const MultiRunResult& result, std::FILE* out);

}  // namespace lockvisor::multivm
