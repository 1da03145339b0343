// lockvisor trace-check: the bound oracle on a trace file (vmm/trace/bound_check.h,
// docs/pvbounded.md), the NUMA locks' (vmm/trace/numa_bound_check.h,
// docs/vnuma.md), then where each lock's time went (vmm/trace/lock_time.h).
// Exit 0 when no bypass breaks pvbounded's invariant and no run of a NUMA
// lock exceeds its stated bound, 1 when one does, 2 for a file that is no
// lockvisor trace or a bad option, 6 when --json cannot be written.
#include <fmt/format.h>

#include <cstdio>

#include "vmm/cli/commands.h"
#include "vmm/report/run_report.h"
#include "vmm/trace/trace_check.h"
#include "vmm/trace/trace_reader.h"
#include "vmm/util/file_identity.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {

Action add_trace_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trace-check", "Judge every lock wait longer than T in a trace file by pvbounded's invariant (the bound oracle)");
  struct Options : trace::TraceCheckOptions {
    std::string file;
    std::size_t runs = trace::kTraceCheckRunsShown;
    std::string json;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("FILE", o->file, "A trace written by lockvisor run --trace FILE")->required();
  cmd->add_option("--bound-us", o->bound_us,
                  "T in microseconds (default: the run's bound, the larger of pvb_bound_us and pvb_bound_max_us, else the lock's defaults)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10000000}));
  cmd->add_option("--grace-us", o->grace_us,
                  fmt::format("Slack for a running head to react (one loop iteration and a critical section), default {}",
                              o->grace_us))
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1000000}));
  cmd->add_option("--resume-us", o->resume_us,
                  "How long a head that runs again takes to act (its return from a halt or exit); default: the "
                  "run's pvb_stale_us, 100")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1000000}));
  cmd->add_option("--steal-phase-us", o->steal_phase_us,
                  fmt::format("Longest running time of a newcomer's steal phase before it queues (a waiter that "
                              "halted has queued), default {}",
                              o->steal_phase_us))
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1000000}));
  cmd->add_option("--runs", o->runs, fmt::format("Lines of bypass runs shown per long wait (0: none), default {}", o->runs))
      ->check(CLI::Range(std::size_t{0}, std::size_t{1000000}));
  cmd->add_option("--gap-us", o->gap_us,
                  fmt::format("Free gaps of a lock at least this long are explained by what every vCPU was doing "
                              "meanwhile, default {}",
                              o->gap_us))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10000000}));
  cmd->add_option("--json", o->json,
                  "Also write the summary and each lock's time by path as JSON (docs/trace.md, \"trace-check's "
                  "JSON\")");
  return [o] {
    refuse_shared_files({{"the trace", o->file}, {"--json", o->json}});
    std::optional<OutputFile> json;
    if (!o->json.empty()) json.emplace(o->json, "--json");
    const trace::TraceTimeline timeline = trace::read_trace_file(o->file);
    const trace::TraceCheck check = trace::check_trace(timeline, *o);
    fmt::print("{}", trace::format_trace_check(timeline, check, o->runs));
    std::fflush(stdout);
    if (json) report::write_json_file(*json, trace::trace_check_json(o->file, timeline, check));
    return check.broken() ? 1 : 0;
  };
}

}  // namespace lockvisor::cli
