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
#include "vmm/trace/bound_check.h"
#include "vmm/trace/lock_time.h"
#include "vmm/trace/numa_bound_check.h"
#include "vmm/trace/trace_reader.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {

Action add_trace_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trace-check", "Judge every lock wait longer than T in a trace file by pvbounded's invariant (the bound oracle)");
  struct Options {
    std::string file;
    std::optional<std::uint64_t> bound_us;
    std::uint64_t grace_us = 10;
    std::optional<std::uint64_t> resume_us;
    std::uint64_t steal_phase_us = 100;
    std::size_t runs = 12;
    std::uint64_t gap_us = 20;
    std::string json;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("FILE", o->file, "A trace written by lockvisor run --trace FILE")->required();
  cmd->add_option("--bound-us", o->bound_us,
                  "T in microseconds (default: the run's bound, the larger of pvb_bound_us and pvb_bound_max_us, else the lock's defaults)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10000000}));
  cmd->add_option("--grace-us", o->grace_us,
                  "Slack for a running head to react (one loop iteration and a critical section), default 10")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1000000}));
  cmd->add_option("--resume-us", o->resume_us,
                  "How long a head that runs again takes to act (its return from a halt or exit); default: the "
                  "run's pvb_stale_us, 100")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1000000}));
  cmd->add_option("--steal-phase-us", o->steal_phase_us,
                  "Longest running time of a newcomer's steal phase before it queues (a waiter that halted has "
                  "queued), default 100")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1000000}));
  cmd->add_option("--runs", o->runs, "Lines of bypass runs shown per long wait (0: none), default 12")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1000000}));
  cmd->add_option("--gap-us", o->gap_us,
                  "Free gaps of a lock at least this long are explained by what every vCPU was doing meanwhile, "
                  "default 20")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10000000}));
  cmd->add_option("--json", o->json,
                  "Also write the summary and each lock's time by path as JSON (docs/trace.md, \"trace-check's "
                  "JSON\")");
  return [o] {
    std::optional<OutputFile> json;
    if (!o->json.empty()) json.emplace(o->json, "--json");
    const trace::TraceTimeline timeline = trace::read_trace_file(o->file);
    trace::BoundRules rules = trace::bound_rules_from(timeline.metadata);
    if (o->bound_us) rules.bound_ns = rules.aim_ns = *o->bound_us * 1000;
    rules.grace_ns = o->grace_us * 1000;
    rules.steal_phase_ns = o->steal_phase_us * 1000;
    if (o->resume_us) rules.resume_ns = *o->resume_us * 1000;
    const trace::BoundReport report = trace::check_bound(timeline, rules);
    fmt::print("{}", trace::format_bound_report(timeline, report, o->runs));
    const trace::NumaBoundReport numa = trace::check_numa_bound(timeline, trace::numa_bound_rules_from(timeline.metadata));
    if (numa.rules.judged) fmt::print("{}", trace::format_numa_bound_report(timeline, numa, o->runs));
    const std::vector<trace::LockTime> locks = trace::lock_time(timeline, o->gap_us * 1000);
    fmt::print("{}", trace::format_lock_time(locks));
    std::fflush(stdout);
    if (json) {
      nlohmann::json reasons = nlohmann::json::object();
      for (unsigned i = 0; i < static_cast<unsigned>(trace::Reason::kCount); ++i)
        if (report.by_reason[i] != 0) reasons[trace::reason_name(static_cast<trace::Reason>(i))] = report.by_reason[i];
      std::size_t checked = 0;
      for (const trace::LongWait& w : report.long_waits) checked += w.checked;
      report::write_json_file(*json, {{"file", o->file},
                                      {"vcpus", timeline.vcpus},
                                      {"bound",
                                       {{"judged", report.rules.judged},
                                        {"bound_ns", report.rules.bound_ns},
                                        {"waits", report.waits},
                                        {"long_waits", report.long_waits.size()},
                                        {"checked", checked},
                                        {"violations", report.violations},
                                        {"waits_with_violation", report.waits_with_violation},
                                        {"by_reason", std::move(reasons)}}},
                                      {"numa_bound",
                                       {{"judged", numa.rules.judged},
                                        {"waits", numa.waits},
                                        {"checked", numa.checked},
                                        {"longest_wait_ns", numa.longest_wait_ns},
                                        {"longest_run", numa.longest_run},
                                        {"violations", numa.violations.size()},
                                        {"explained", numa.explained}}},
                                      {"locks", trace::lock_time_json(locks)}});
    }
    return report.violations != 0 || !numa.violations.empty() ? 1 : 0;
  };
}

}  // namespace lockvisor::cli
