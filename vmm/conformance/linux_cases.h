// The Linux case group, `lockvisor conformance --linux KERNEL`: Linux as a
// client of the PV lock ABI. Each case runs a child `lockvisor run --kernel
// ... --json FILE` (machine/child_run.h) and checks its exit code and report:
// that each --guest-lock policy makes the kernel choose what it should, that
// the PV one really halts and kicks through KVM, and that bad kernels end as
// documented. A child per case: a kernel that hangs or crashes its VM cannot
// touch the next case, and its exit code is checked as a user would see it.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/conformance/suite.h"
#include "vmm/machine/child_run.h"

namespace lockvisor::conformance {

struct LinuxKernels {
  std::string kernel;  // --linux: a distribution kernel (Debian's amd64 flavour)
  std::string cloud;   // --linux-cloud: one that finds its CPUs through ACPI only; empty: not given
  // Where the truncated copy of `kernel` goes (its case writes it there
  // before it runs); may be empty when the cases are only listed.
  std::string truncated;
};

// A check of a child run's --json report: nullopt when the report shows what
// the case expects, otherwise why not (one line, with the figures read).
using ReportCheck = std::function<std::optional<std::string>(const nlohmann::json& report)>;

struct LinuxCase {
  std::string name;
  std::string summary;
  std::vector<std::string> args;  // `lockvisor run` arguments, without --json
  int expected_exit = 0;
  ReportCheck check = nullptr;  // null: the exit code is the whole check
  std::string not_applicable = {};  // non-empty: not run, reported N/A with this reason
  std::function<void()> prepare = nullptr;  // null, or makes the files `args` name
};

std::vector<LinuxCase> linux_cases(const LinuxKernels& kernels);

// The figures the checks read from a report, for people: "guest_spinlock=pv,
// guest_cpus_online=4, ..." ("-" for a figure the report lacks).
std::string linux_figures_text(const nlohmann::json& report);

// The verdict on a finished child run: nullopt when it passed, otherwise why
// not (one line). `timeout_s` is the one the run was given.
std::optional<std::string> judge_linux_run(const LinuxCase& c, const machine::ChildRun& run, double timeout_s);

// Runs one case as a child of `lockvisor` (this executable), its report and
// log in `scratch`, killed after `timeout_s`. A failed case carries the last
// lines of the child's output in `details`.
CaseResult run_linux_case(const LinuxCase& c, const std::string& lockvisor, const std::filesystem::path& scratch,
                          double timeout_s);

}  // namespace lockvisor::conformance
