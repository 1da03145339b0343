// The lockvisor subcommands, perf/kvmtool style: one file per command, each
// registering its options on a CLI11 subcommand and returning an exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace lockvisor::cli {

// A registered command: called after parsing when its subcommand was chosen.
using Action = std::function<int()>;

Action add_run_command(CLI::App& app);
Action add_conformance_command(CLI::App& app);
Action add_doctor_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_locks_command(CLI::App& app);

}  // namespace lockvisor::cli
