// The lockvisor subcommands, perf/kvmtool style: one file per command, each
// registering its options on a CLI11 subcommand and returning an exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "vmm/multivm/multi_vm_run.h"

namespace lockvisor::cli {

// A registered command: called after parsing when its subcommand was chosen.
using Action = std::function<int()>;

Action add_run_command(CLI::App& app);
Action add_conformance_command(CLI::App& app);
Action add_doctor_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_locks_command(CLI::App& app);
Action add_trace_check_command(CLI::App& app);
Action add_lab_command(CLI::App& app);
Action add_ctl_command(CLI::App& app);
Action add_linux_command(CLI::App& app);

// Parses a `lockvisor run` argument list (without "run") and checks it as
// run would, without running anything: throws a usage lockvisor::Error
// with the one-line reason. The lab checks every point with it up front.
// Without host_checks it leaves out what depends on the host's KVM (a Linux
// guest, --backend kvm or --guest-ring 0 refused on PVM): a lab's --dry-run
// lists its points on any host.
// Returns what it found out about the run.
struct CheckedRun {
  std::string workload, lock;  // lock: empty for a workload without one
  unsigned vcpus = 0;
  double timeout_s = 0;        // the watchdog it will have (0: none)
  bool native = false;
};
CheckedRun check_run_arguments(std::vector<std::string> args, bool host_checks = true);

// Several VMs side by side (multi_vm_command.cpp). `run` is the parsed `run`
// subcommand: its options outside any --vm apply to every VM.
// Each --vm SPEC as a VM plan, checked as `run` would check it (without
// host_checks, as check_run_arguments: what this host's KVM cannot run is
// not refused); throws a usage lockvisor::Error naming the --vm and the key.
std::vector<multivm::VmPlan> plan_vms(const CLI::App& run, const std::vector<std::string>& specs,
                                      bool host_checks = true);
int run_multi_vm(const CLI::App& run, const std::vector<std::string>& specs, unsigned hogs, const std::string& json);

}  // namespace lockvisor::cli
