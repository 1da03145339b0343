// lockvisor lab: experiment matrices (vmm/lab/, docs/lab.md).
//   lockvisor lab --preset quick --out results/quick [--resume] [--native] [--shard I/N]
//   lockvisor lab merge OUT IN...
//   lockvisor lab report DIR
//   lockvisor lab compare BASE OTHER [--metric NAME]...
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "vmm/cli/commands.h"
#include "vmm/cli/option_checks.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/host_cpus.h"
#include "vmm/lab/lab.h"
#include "vmm/lab/lab_compare.h"
#include "vmm/lab/presets.h"
#include "vmm/lab/scenario.h"
#include "vmm/util/error.h"

namespace lockvisor::cli {
namespace {

struct LabCommandOptions {
  std::string preset;
  std::string scenario;
  std::string out;
  std::string shard;
  std::string host_cpus;
  unsigned jobs = 0;  // 0: the default (lab.h, default_jobs)
  std::vector<std::string> sets;
  std::string kernel;
  unsigned repeats = 0;
  bool resume = false;
  bool native = false;
  bool dry_run = false;
  bool no_timelines = false;
  bool list = false;
  std::string merge_out;
  std::vector<std::string> merge_inputs;
  std::string report_dir;
  std::string compare_base, compare_other;
  std::vector<std::string> compare_metrics;
};

// The command exactly as typed, for report.md.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string text, arg;
  while (std::getline(in, arg, '\0')) {
    const bool quote = arg.empty() || arg.find_first_of(" \t'\"$*?") != std::string::npos;
    text += (text.empty() ? "" : " ") + (quote ? "'" + arg + "'" : arg);
  }
  return text;
}

std::string self_path() {
  char buffer[4096];
  const auto n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) fail_host("cannot find the lockvisor binary (/proc/self/exe)");
  return std::string(buffer, static_cast<std::size_t>(n));
}

std::string preset_names() {
  std::string names;
  for (const auto& p : lab::presets()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

int lab_main(const LabCommandOptions& o, bool host_cpus_given) {
  if (o.list) {
    for (const auto& p : lab::presets()) {
      const auto s = lab::parse_scenario(p.text, fmt::format("preset {}", p.name));
      fmt::print("{:<16} {}\n", p.name, s.title);
    }
    return 0;
  }
  lab::LabOptions lab;
  if (!o.preset.empty() && !o.scenario.empty()) fail("--preset and --scenario: give one");
  if (!o.preset.empty()) {
    const auto* p = lab::find_preset(o.preset);
    if (p == nullptr) fail("--preset '{}': unknown (presets: {})", o.preset, preset_names());
    lab.scenario_text = p->text;
    lab.origin = fmt::format("preset {}", p->name);
  } else if (!o.scenario.empty()) {
    lab.scenario_text = lab::read_scenario_file(o.scenario);
    lab.origin = o.scenario;
  } else if (!o.resume) {
    fail("lab: give --preset NAME (one of {}) or --scenario FILE", preset_names());
  }
  if (o.out.empty() && !o.dry_run) fail("lab: --out DIR is required");
  lab.native = o.native;
  for (const auto& set : o.sets) {
    const auto eq = set.find('=');
    if (eq == std::string::npos || eq == 0) fail("--set '{}': expected NAME=VALUE, e.g. duration_s=1", set);
    const auto name = set.substr(0, eq);
    // Two values of one setting: neither may silently win.
    if (const auto* before = lab::lookup(lab.overrides, name))
      fail("--set {}: given twice ({}={} and {}); give each setting once", name, name, *before, set);
    lab::assign(lab.overrides, name, set.substr(eq + 1));
  }
  if (!o.kernel.empty()) {
    if (lab::lookup(lab.overrides, "kernel") != nullptr)
      fail("--kernel and --set kernel=...: the same setting twice; give one");
    // Absolute, so that the points (and a later --resume from elsewhere) find it.
    lab::assign(lab.overrides, "kernel", std::filesystem::absolute(o.kernel).string());
  }
  if (o.repeats) lab.repeats = o.repeats;
  if (!o.shard.empty()) lab.shard = lab::parse_shard(o.shard);
  if (host_cpus_given) {
    if (!host::is_cpu_list(o.host_cpus)) fail("--host-cpus '{}': expected a CPU list (0-15)", o.host_cpus);
    if (!o.dry_run) fail("--host-cpus plans for another host: only with --dry-run (taskset narrows this one)");
    try {
      lab.host_cpus = host::format_cpu_list(host::parse_cpu_list(o.host_cpus));
    } catch (const Error& e) {
      fail("--host-cpus: {}", e.what());
    }
    // The points are checked as that host's `run` would check them.
    ::setenv(host::kHostCpusVariable, lab.host_cpus.c_str(), 1);
  }
  if (o.jobs) lab.jobs = o.jobs;
  lab.out = o.out;
  lab.resume = o.resume;
  lab.dry_run = o.dry_run;
  lab.timelines = !o.no_timelines;
  lab.command = command_line();
  lab.lockvisor = self_path();
  // A dry run lists the points whatever the host; a real lab refuses them
  // here when this host's KVM cannot run them.
  lab.check_point = [host_checks = !o.dry_run](const std::vector<std::string>& args) {
    check_run_arguments(args, host_checks);
  };
  return lab::run_lab(lab);
}

}  // namespace

Action add_lab_command(CLI::App& app) {
  auto o = std::make_shared<LabCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "lab", "Run an experiment matrix (a preset or a TOML scenario): every point a fresh VM, results as JSON Lines, "
             "summaries with confidence intervals, plots and a report (docs/lab.md)");
  command->require_subcommand(0, 1);
  command->add_option("--preset", o->preset, "A built-in scenario (--list shows them)");
  command->add_option("--scenario", o->scenario,
                      "A scenario file: TOML, a regular file of at most 1 MiB (docs/lab-example.toml explains it)");
  command->add_option("--out", o->out, "Result directory: must be absent or empty, unless --resume");
  command->add_flag("--resume", o->resume, "Continue the lab in --out: run only the points it has no result for");
  command->add_flag("--native", o->native, "Also run every point natively on host threads (twins; the 'mode' axis)");
  command->add_option("--repeats", o->repeats, "Runs per point (default: the scenario's, 5 unless it says)")
      ->transform(unsigned_in(1, lab::kMaxRepeats));
  command->add_option("--set", o->sets,
                      "NAME=VALUE: give every point this setting (a lab setting no axis sets; repeatable), "
                      "e.g. --set duration_s=1 --set pcpus=0-1");
  command->add_option("--kernel", o->kernel, "The Linux bzImage of the Linux presets (the same as --set kernel=FILE)");
  command->add_option("--shard", o->shard, "Run only shard I of N (I/N), a deterministic slice; combine with 'lab merge'");
  auto* host_cpus = command->add_option(
      "--host-cpus", o->host_cpus,
      "Plan the host-relative placements (pcpus = all, 4cpus, 1/2 ...) for this CPU list instead of the CPUs "
      "lockvisor may use: a dry-run of another host's lab (docs/lab.md)");
  command->add_option("--jobs", o->jobs,
                      "Points run side by side on disjoint host CPUs, at most N at once (default: docs/lab.md)")
      ->transform(unsigned_in(1, 1024));
  command->add_flag("--dry-run", o->dry_run, "List the points and their run commands; run nothing");
  command->add_flag("--no-timelines", o->no_timelines,
                    "Skip the scenario's [timeline] traced runs (report.md then has no worst-wait pictures)");
  command->add_flag("--list", o->list, "List the presets");
  CLI::App* merge = command->add_subcommand("merge", "Combine lab result directories (e.g. shards) into OUT");
  merge->add_option("out", o->merge_out, "The combined result directory (absent or empty)")->required();
  merge->add_option("inputs", o->merge_inputs, "Result directories of the same scenario")->required();
  CLI::App* report = command->add_subcommand("report", "Rewrite the summaries, plots and report.md of a lab directory");
  report->add_option("dir", o->report_dir, "The lab directory")->required();
  CLI::App* compare = command->add_subcommand(
      "compare", "Each point's median in OTHER against BASE's 95% interval, and both wall times (exit 1: some outside)");
  compare->add_option("base", o->compare_base, "The lab compared against (e.g. the one run with --jobs 1)")->required();
  compare->add_option("other", o->compare_other, "A lab of the same points")->required();
  compare->add_option("--metric", o->compare_metrics,
                      fmt::format("A summary.csv metric (repeatable; default {})", lab::kCompareDefaultMetric));
  return [o, merge, report, compare, host_cpus] {
    if (compare->parsed()) return lab::compare_labs(o->compare_base, o->compare_other, o->compare_metrics, stdout);
    if (merge->parsed()) return lab::merge_labs(o->merge_out, o->merge_inputs, command_line());
    if (report->parsed()) {
      lab::write_outputs(o->report_dir);
      fmt::print("lockvisor lab report: rewrote {}/summary.csv, summary.md, report.md and the plots\n", o->report_dir);
      return 0;
    }
    return lab_main(*o, host_cpus->count() > 0);
  };
}

}  // namespace lockvisor::cli
