// The command line of `lockvisor run`: its options (each one row of
// vmm/experiment/run_settings.cpp) and the one validation that run(), the
// lab's up-front check of every point and each --vm of a multi-VM run use.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lockvisor/abi/workload.h"
#include "vmm/cli/linux_guest_run.h"
#include "vmm/cli/machine_options.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/trace/trace.h"
#include "vmm/trace/trace_window.h"

namespace lockvisor::cli {

// The workload side of the experiment (its defaults: vmm/experiment/), plus
// --native, which picks where it runs.
struct LockOptions {
  experiment::WorkloadSettings w;
  bool native = false;
};

struct RunOptions {
  MachineOptions machine;
  std::string workload;  // defaults: the rows of vmm/experiment/run_settings.cpp
  std::uint64_t rounds = 0;
  std::uint64_t spin = 0;
  std::string halt;
  std::vector<std::string> params;
  std::string json;
  std::string api;  // --api SOCK: the control socket (vmm/control/)
  std::vector<std::string> inject;  // --inject values (docs/preemption.md)
  std::string trace;
  std::uint64_t trace_max_events = trace::TraceOptions{}.max_events;
  std::string trace_window;
  std::string trace_merge_short;
  LockOptions lock;
  // --kernel: an unmodified Linux kernel instead of the freestanding guest
  // (linux_guest_run.h); its workload and duration are filled by validate_run.
  LinuxOptions linux_guest;
  std::string kvmclock;
  // Several VMs side by side (multi_vm_command.cpp), host CPU hogs, and the
  // start gate a child VM of a multi-VM run waits at (multivm/start_gate.h).
  std::vector<std::string> vms;
  unsigned hogs = 0;
  int start_gate_fd = -1;
  // Off only to check a command line that will not run here (lab --dry-run):
  // validate_run then leaves out what depends on the host's KVM.
  bool host_checks = true;
  const CLI::App* command = nullptr;
};

// What validate_run() made of the options, for run() to use.
struct CheckedOptions {
  std::vector<inject::InjectSpec> specs;
  trace::TraceWindowSpec window;
  std::uint64_t merge_short_ns = 0;
  std::string args;  // the guest's arguments as run prints them ("defaults" when empty)
  bool linux_guest = false;  // --kernel: run_linux() boots it
};

void add_run_options(CLI::App* command, const std::shared_ptr<RunOptions>& options);

// Every check of a `run` command line that needs nothing to run: run()
// calls it before it opens a file or boots, check_run_arguments() (the lab's
// points, each --vm of a multi-VM run) calls it instead of running. Fills
// the machine config as run() boots it; throws a usage lockvisor::Error.
CheckedOptions validate_run(RunOptions& o);

// The workload record of a lock workload on `cpus` CPUs.
abi::WorkloadParams lock_params(const RunOptions& o, unsigned cpus);

}  // namespace lockvisor::cli
