// The lockvisor subcommands, perf/kvmtool style: one file per command, each
// registering its options on a CLI11 subcommand and returning an exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace lockvisor::cli {

// A registered command: called after parsing when its subcommand was chosen.
using Action = std::function<int()>;

Action add_run_command(CLI::App& app);
Action add_conformance_command(CLI::App& app);
Action add_doctor_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_locks_command(CLI::App& app);
Action add_lab_command(CLI::App& app);
Action add_ctl_command(CLI::App& app);

// Parses a `lockvisor run` argument list (without "run") and checks it as
// run would, without running anything: throws a usage lockvisor::Error
// with the one-line reason. The lab checks every point with it up front.
void check_run_arguments(std::vector<std::string> args);

}  // namespace lockvisor::cli
