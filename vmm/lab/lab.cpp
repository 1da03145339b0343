// A lab's life from one command: planning the points, running them (one at a
// time or side by side), resuming, merging shards and writing the summaries
// and report. One file (over 500 lines) because these steps share one
// directory format and one manifest, and each reads what the others wrote;
// the checks of that input live in lab_files.cpp, the statistics in
// lab_summary.cpp and the report's text in lab_report.cpp.
#include "vmm/lab/lab.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "vmm/host/cpu_set.h"
#include "vmm/host/emulation.h"
#include "vmm/host/host_cpus.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lab/placement.h"
#include "vmm/lab/platform_part.h"
#include "vmm/lab/point_runner.h"
#include "vmm/lab/python_script.h"
#include "vmm/lab/lab_files.h"
#include "vmm/lab/lab_report.h"
#include "vmm/lab/results_log.h"
#include "vmm/lab/side_by_side.h"
#include "vmm/lab/lab_summary.h"
#include "vmm/lab/timelines.h"
#include "vmm/machine/run_result.h"
#include "vmm/machine/stop_signals.h"
#include "vmm/util/build_version.h"
#include "vmm/util/error.h"
#include "vmm/util/output_file.h"

namespace lockvisor::lab {
namespace fs = std::filesystem;
namespace {

constexpr double kPlotTimeoutS = 300;

void write_text(const fs::path& path, const std::string& text) { OutputFile(path.string(), "lab: writing").write(text); }

nlohmann::json overrides_json(const SettingValues& overrides) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [name, value] : overrides) j.push_back({name, value});
  return j;
}

// The most vCPUs a point's VM may have on this host: its KVM's limit where
// that is below lockvisor's own (a PVM or older KVM), else lockvisor's own
// (0); a host without a usable KVM (a native lab) has only lockvisor's.
std::pair<unsigned, std::string> planned_vcpu_limit() {
  try {
    const kvm::VcpuLimit limit = kvm::KvmSystem::open().vcpu_limit();
    if (limit.vcpus < own_vcpu_limit()) return {limit.vcpus, fmt::format("this host's KVM, {}", limit.source)};
  } catch (const Error&) {
    // No usable KVM: its limit is not what holds these points back.
  }
  return {0, {}};
}

// The scenario as this lab runs it: the file or preset, with --repeats,
// --native and --set applied. The manifest keeps the text and the changes.
// `path`: the lab.json it was read from, which messages about its scenario
// name ("" for the manifest of a lab being made, whose scenario and --set
// are the command line's).
Scenario effective_scenario(const nlohmann::json& manifest, const std::string& path = {}) {
  const auto origin = manifest.at("origin").get<std::string>();
  SettingValues overrides;
  for (const auto& o : manifest.value("overrides", nlohmann::json::array()))
    overrides.emplace_back(o.at(0).get<std::string>(), o.at(1).get<std::string>());
  Scenario s;
  try {
    s = parse_scenario(manifest.at("scenario_text").get<std::string>(), origin);
    apply_overrides(s, overrides, origin);
  } catch (const Error& e) {
    if (path.empty()) throw;
    fail("{}: the lab's scenario: {}", path, e.what());
  }
  const auto changed = [&s](const std::string& what) { s.changed += (s.changed.empty() ? "" : ", ") + what; };
  for (const auto& [name, value] : overrides) changed(name + "=" + value);
  const unsigned repeats = manifest.at("repeats").get<unsigned>();
  if (repeats != s.repeats) changed(fmt::format("{} repeat{} per point", repeats, repeats == 1 ? "" : "s"));
  s.repeats = repeats;
  if (manifest.at("native").get<bool>()) {
    if (!s.native) changed("native twins");
    add_native_twins(s);
  }
  // The CPUs the lab was planned for, whichever machine continues it (a lab
  // from before host-relative placements: this one's).
  const auto placement = manifest.value("placement", nlohmann::json::object());
  s.host_cpus = placement.contains("host_cpus") ? host::parse_cpu_list(placement.at("host_cpus").get<std::string>())
                                                : host::usable_cpus();
  std::tie(s.vcpu_limit, s.vcpu_limit_source) = placement_vcpu_limit(placement);
  if (const auto vm_only = placement.find("vm_only"); vm_only != placement.end())
    for (const auto& [key, why] : vm_only->items()) s.vm_only[key] = why.get<std::string>();
  expand_for_host(s);
  return s;
}

// The native twins of a --native lab that only a VM can run: each point of
// mode=native that `run`'s own check refuses (check_point), with its
// reason. The guest twin of the same point is checked as every point is, so
// a setting that is wrong everywhere still stops the lab.
nlohmann::json vm_only_twins(const nlohmann::json& manifest, const LabOptions& o) {
  nlohmann::json out = nlohmann::json::object();
  if (!manifest.at("native").get<bool>() || !o.check_point) return out;
  auto s = effective_scenario(manifest);
  s.repeats = 1;
  for (const auto& p : expand_matrix(s).points) {
    const auto mode = std::find_if(p.labels.begin(), p.labels.end(), [](const auto& l) { return l.first == "mode"; });
    if (mode == p.labels.end() || mode->second != "native") continue;
    try {
      o.check_point(run_arguments(p.settings));
    } catch (const Error& e) {
      out[p.key] = e.what();
    }
  }
  return out;
}

std::string duration_text(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return fmt::format("{}h{:02}m", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
}

// The progress line: a bar with ETA on a terminal, plain lines otherwise.
class Progress {
 public:
  Progress(std::size_t total, std::size_t done) : total_(total), done_(done), tty_(::isatty(1)) {}
  void finished(const Point& p, const PointRun& run, double mean_s) {
    ++done_;
    const double eta = mean_s * static_cast<double>(total_ - done_);
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = total_ ? static_cast<int>(kWidth * done_ / total_) : kWidth;
      fmt::print("\r\033[K[{}{}] {}/{} ETA {}  {} {}", std::string(filled, '#'), std::string(kWidth - filled, '.'),
                 done_, total_, duration_text(eta), p.id, run.outcome);
      if (done_ == total_) fmt::print("\n");
    } else {
      fmt::print("lab: [{}/{}] {}: {} ({:.1f} s), ETA {}\n", done_, total_, p.id, run.outcome, run.wall_s,
                 duration_text(eta));
    }
    std::fflush(stdout);
  }
  void end_line() {
    if (tty_ && done_ != total_) fmt::print("\n");
  }

 private:
  std::size_t total_, done_;
  bool tty_;
};

nlohmann::json record_of(const Point& p, const PointRun& run) {
  nlohmann::json labels = nlohmann::json::object(), settings = nlohmann::json::object();
  for (const auto& [a, l] : p.labels) labels[a] = l;
  for (const auto& [n, v] : p.settings) settings[n] = v;
  return {{"id", p.id},           {"key", p.key},         {"repeat", p.repeat},     {"index", p.index},
          {"axes", labels},       {"settings", settings}, {"exit_code", run.exit_code}, {"outcome", run.outcome},
          {"wall_s", run.wall_s}, {"report", run.report}};
}

// Where two texts first differ, in words: "line 12 differs", "the new text
// ends after line 3".
std::string first_difference(const std::string& before, const std::string& now) {
  std::istringstream a(before), b(now);
  std::string x, y;
  for (std::size_t line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, x)), more_b = static_cast<bool>(std::getline(b, y));
    if (!more_a && !more_b) return "only its line ends differ";
    if (!more_a) return fmt::format("it has lines from line {} on that the lab's text has not", line);
    if (!more_b) return fmt::format("it ends before line {} of the lab's text", line);
    if (x != y) return fmt::format("line {} differs", line);
  }
}

bool dir_is_empty_or_absent(const fs::path& dir) { return !fs::exists(dir) || fs::is_empty(dir); }

// Who names the result directory, for messages: the lab's --out, which may
// hold a lab to resume, or merge's positional OUT, which is always new.
struct OutNaming {
  const char* name;
  const char* not_empty;  // what to do about a directory that is not empty
};
constexpr OutNaming kLabOut{"--out", "use --resume to continue that lab, or another directory"};
constexpr OutNaming kMergeOut{"lab merge: OUT", "merge into a new or empty directory"};

void prepare_out(const fs::path& dir, const OutNaming& naming, bool resume = false) {
  if (fs::exists(dir) && !fs::is_directory(dir)) fail("{} {}: exists and is not a directory", naming.name, dir.string());
  if (!resume && !dir_is_empty_or_absent(dir))
    fail("{} {}: exists and is not empty ({})", naming.name, dir.string(), naming.not_empty);
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);
  if (ec) fail("{} {}: cannot create: {}", naming.name, dir.string(), ec.message());
}

}  // namespace

LabDirectory load_lab(const std::string& dir_text) {
  const fs::path dir(dir_text);
  LabDirectory lab;
  lab.manifest = read_manifest(dir_text);
  lab.scenario = effective_scenario(lab.manifest, (dir / kManifest).string());
  const auto results = (dir / kResults).string();
  auto loaded = load_results(results);
  check_results(loaded, results, lab.scenario);
  lab.records = std::move(loaded.records);
  lab.summary = summarize(lab.scenario, lab.records, static_cast<unsigned>(lab.scenario.host_cpus.size()),
                          host_slice_ns(lab.manifest));
  return lab;
}

void write_outputs(const std::string& dir_text) {
  const fs::path dir(dir_text);
  const auto lab = load_lab(dir_text);
  const auto& manifest = lab.manifest;
  const auto& scenario = lab.scenario;
  const auto& summary = lab.summary;
  std::error_code ec;
  fs::create_directories(dir / "logs", ec);  // the scripts' logs (a copied lab may lack it)
  write_text(dir / "summary.csv", summary_csv(summary));
  write_text(dir / "summary.md", with_emulation_note(summary_markdown(scenario, summary), manifest.value("machine", nlohmann::json::object())));
  // The plots: tools/lab-plot.py with Debian's python3 (matplotlib).
  std::fflush(stdout);
  const auto plotted = run_python_script(tool_script("lab-plot.py", "LOCKVISOR_LAB_PLOT"), {dir_text},
                                         (dir / "logs" / "lab-plot.log").string(), kPlotTimeoutS);
  std::string plots_note;
  if (plotted.ok) {
    plots_note = fmt::format(
        "![Throughput against worst wait, one panel per placement](tradeoff.png)\n\n"
        "tradeoff.png/.svg: each lock's throughput against its worst wait, one panel per placement (vCPUs on host "
        "CPUs); upper left is fast and bounded; whiskers are 95% intervals{}. Per placement, locks sorted: "
        "throughput.png (acquisitions/s), latency.png (worst and p99 wait), fairness.png (Jain index over per-CPU "
        "operations), cpu.png (host CPU seconds per million acquisitions){}; each also as .svg.",
        scenario.goal.enabled ? "; the shaded region is this scenario's goal" : "",
        fs::exists(dir / "locality.png")
            ? ", locality.png (handoff_locality: handoffs between two vCPUs that stayed within a virtual node)"
            : "");
  } else {
    // The install advice only where python3 or matplotlib is what failed; a
    // script that ran and failed says why itself.
    plots_note = plotted.timed_out
                     ? fmt::format("No plots: {} (a slow or busy host; `lockvisor lab report {}` draws them again).",
                                   plotted.why, dir_text)
                 : !plotted.last_line.empty() && !plotted.import_failed
                     ? fmt::format("No plots: {}: {}", plotted.why, plotted.last_line)
                     : fmt::format("No plots: {} (needs /usr/bin/python3 with matplotlib: tools/install-deps.sh "
                                   "installs python3-matplotlib).",
                                   plotted.why);
    fmt::print(stderr, "lockvisor lab: warning: {}\n", plots_note);
  }
  const auto timelines = timelines_section(scenario, summary, dir_text, host_slice_ns(manifest));
  write_text(dir / "report.md", report_markdown(scenario, summary, manifest, plots_note, timelines));
}

int run_lab(const LabOptions& o) {
  const fs::path dir(o.out);
  nlohmann::json manifest;
  const bool resumed = o.resume && fs::exists(dir / kManifest);
  if (resumed) {
    manifest = read_manifest(o.out);
    const auto began = manifest.at("scenario_text").get<std::string>();
    const auto origin = manifest.at("origin").get<std::string>();
    if (!o.scenario_text.empty() && o.scenario_text != began) {
      if (origin != o.origin)
        fail("--resume: {} ran another scenario ({}); give the same one, or none", o.out, origin);
      fail("--resume: {} has changed since the lab in {} began ({}; lab.json keeps the text it began with); give it "
           "unchanged, or neither --preset nor --scenario to run the text the lab began with",
           o.origin, o.out, first_difference(began, o.scenario_text));
    }
    if (o.repeats && *o.repeats != manifest.at("repeats").get<unsigned>())
      fail("--resume: {} runs {} repeats, not {}", o.out, manifest.at("repeats").get<unsigned>(), *o.repeats);
    if (o.native && !manifest.at("native").get<bool>()) fail("--resume: {} was started without --native", o.out);
    if (!o.overrides.empty() && overrides_json(o.overrides) != manifest.value("overrides", nlohmann::json::array()))
      fail("--resume: {} was started with other --set/--kernel values (lab.json has them); give the same, or none",
           o.out);
    if (!o.host_cpus.empty() &&
        host::format_cpu_list(host::parse_cpu_list(o.host_cpus)) !=
            manifest.value("placement", nlohmann::json::object()).value("host_cpus", std::string()))
      fail("--resume: {} was planned for other host CPUs (lab.json placement); give the same --host-cpus, or none",
           o.out);
    const std::string shard = o.shard ? fmt::format("{}/{}", o.shard->index, o.shard->count) : "1/1";
    if (shard != manifest.at("shard").get<std::string>())
      fail("--resume: {} is shard {}, not {}", o.out, manifest.at("shard").get<std::string>(), shard);
  } else {
    if (o.scenario_text.empty()) fail("--preset or --scenario is required (--resume needs an existing lab in --out)");
    auto scenario = parse_scenario(o.scenario_text, o.origin);
    manifest = {{"scenario", scenario.name},
                {"scenario_text", o.scenario_text},
                {"origin", o.origin},
                {"repeats", o.repeats.value_or(scenario.repeats)},
                {"native", o.native || scenario.native},
                {"shard", o.shard ? fmt::format("{}/{}", o.shard->index, o.shard->count) : "1/1"},
                {"overrides", overrides_json(o.overrides)},
                {"compare", compared_axis(scenario)},
                {"throughput_unit", throughput_unit(scenario)},
                {"command", o.command},
                {"version", util::build_version()},
                {"machine", machine_description()}};
    const bool declared = !o.host_cpus.empty();
    const char* variable = std::getenv(host::kHostCpusVariable);
    const auto host_cpus = declared ? host::parse_cpu_list(o.host_cpus) : host::usable_cpus();
    const auto [vcpu_limit, vcpu_limit_source] = o.dry_run ? std::pair<unsigned, std::string>{0, {}} : planned_vcpu_limit();
    manifest["placement"] = placement_description(
        host_cpus,
        declared                                   ? "declared by --host-cpus"
        : variable != nullptr && *variable != '\0' ? fmt::format("declared by {}", host::kHostCpusVariable)
                                                   : "the affinity mask lockvisor was started with",
        {}, {}, {}, vcpu_limit, vcpu_limit_source);
    manifest["placement"]["vm_only"] = vm_only_twins(manifest, o);
  }
  const auto scenario = effective_scenario(manifest, resumed ? (dir / kManifest).string() : std::string());
  const auto expansion = expand_matrix(scenario);
  const auto& all = expansion.points;
  if (!fs::exists(dir / kManifest)) {
    std::vector<std::vector<PlacementTerm>> terms;
    for (const auto& p : all) terms.push_back(p.terms);
    const auto vm_only = manifest["placement"].at("vm_only");
    manifest["placement"] =
        placement_description(scenario.host_cpus, manifest["placement"].at("source"), terms, scenario.left_out,
                              expansion.left_out, scenario.vcpu_limit, scenario.vcpu_limit_source);
    manifest["placement"]["vm_only"] = vm_only;
  }
  const auto points = o.shard ? shard_points(all, *o.shard) : all;
  // Every point's command line is checked before the first one runs: a bad
  // axis value is one line and exit 2 now, not a failed point an hour later.
  std::set<std::string> checked;
  for (const auto& p : points) {
    const auto args = run_arguments(p.settings);
    std::string joined;
    for (const auto& a : args) joined += a + ' ';
    if (!checked.insert(joined).second) continue;
    try {
      if (o.check_point) o.check_point(args);
    } catch (const Error& e) {
      fail("{}: point {}: {}", o.origin, p.key, e.what());
    }
  }
  if (o.dry_run) {
    const auto print_run = [](const std::string& id, const std::vector<std::string>& args) {
      std::string line;
      for (const auto& a : args) line += ' ' + a;
      fmt::print("{}  lockvisor run{}\n", id, line);
    };
    for (const auto& p : points) print_run(p.id, run_arguments(p.settings));
    const auto plans = o.timelines ? plan_timelines(scenario, points, o.out) : std::vector<TimelinePlan>{};
    for (const auto& t : plans) print_run(t.id, t.args);
    std::set<std::string> cells;
    for (const auto& p : points) cells.insert(p.key);
    fmt::print("{} runs ({} points x {} repeats){}\n", points.size(), cells.size(), scenario.repeats,
               plans.empty() ? "" : fmt::format(", then {} traced runs for the timelines", plans.size()));
    if (const auto left = left_out_line(manifest["placement"]); !left.empty()) fmt::print("{}\n", left);
    return 0;
  }
  prepare_out(dir, kLabOut, o.resume);
  host::print_emulation_warning(stdout);
  if (!fs::exists(dir / kManifest)) {
    // What exits cost on this host, for the report's "platform's part": a
    // lab of native points only boots no VM and measures none.
    const bool any_guest = std::any_of(points.begin(), points.end(), [](const Point& p) {
      const auto* native = lookup(p.settings, "native");
      return native == nullptr || *native != "true";
    });
    if (any_guest) {
      fmt::print("lockvisor lab: measuring this host's exit, doorbell and kick->wake costs\n");
      std::fflush(stdout);
      manifest["machine"]["platform"] = measure_platform_part();
    } else {
      manifest["machine"]["platform"] = {{"exits", {{"not_measured", "every point runs natively"}}}};
    }
    write_text(dir / kManifest, manifest.dump(2) + "\n");
  }
  const auto loaded = load_results((dir / kResults).string());
  check_results(loaded, (dir / kResults).string(), scenario);
  if (loaded.torn) fmt::print("lab: dropped a torn last line of {} (that point runs again)\n", kResults);
  std::set<std::string> done;
  for (const auto& r : loaded.records) done.insert(r["id"].get<std::string>());
  std::set<std::string> mine;
  for (const auto& p : points) mine.insert(p.id);
  for (const auto& id : done)
    if (!mine.count(id)) fail("{}/{}: point '{}' is not part of this lab", o.out, kResults, id);
  ResultsLog log((dir / kResults).string(), loaded);
  std::vector<const Point*> todo;
  for (const auto& p : points)
    if (!done.count(p.id)) todo.push_back(&p);
  fmt::print("lockvisor lab: {} ({}): {} runs{}, {} done, {} to run; results in {}\n", scenario.name, o.origin,
             points.size(), o.shard ? fmt::format(" in shard {}/{}", o.shard->index, o.shard->count) : "",
             points.size() - todo.size(), todo.size(), o.out);
  std::fflush(stdout);
  Progress progress(points.size(), points.size() - todo.size());
  double spent = 0;
  std::size_t ran = 0;
  const unsigned jobs = o.jobs.value_or(default_jobs(scenario.host_cpus.size()));
  const auto run_one = [&](const Point& p, const std::vector<std::string>& args) {
    const std::string* duration = lookup(p.settings, "duration_s");
    const double timeout = 120 + 20 * (duration ? std::stod(*duration) : 1.0);
    const auto name = fmt::format("{:016x}", fnv1a(p.id));
    return run_point(o.lockvisor, args, (dir / ("." + name + ".json")).string(),
                     (dir / "logs" / (name + ".log")).string(), timeout);
  };
  const auto record = [&](const Point& p, const PointRun& run, const std::vector<int>& cpus) {
    auto line = record_of(p, run);
    line["cpus"] = host::format_cpu_list(cpus);
    // When it ended (Unix time, s): with wall_s, when each point ran, so that
    // `lab compare` can give a lab's wall time, side by side or not.
    line["finished_at"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    log.append(line);
    spent += run.wall_s;
    ++ran;
    // Side by side, points finish about `jobs` times as often as one takes.
    progress.finished(p, run, spent / static_cast<double>(ran) / std::min<double>(jobs, todo.size()));
  };
  if (!run_side_by_side(todo, scenario.host_cpus, jobs, run_one, record)) {
    progress.end_line();
    std::fflush(stdout);
    fmt::print(stderr, "lockvisor lab: stopped; {} of {} points recorded, continue with --resume\n", done.size() + ran,
               points.size());
    return machine::exit_code(machine::Outcome::kInterrupted);
  }
  progress.end_line();
  if (o.timelines && !run_timelines(plan_timelines(scenario, points, o.out), o.out, o.lockvisor)) {
    fmt::print(stderr, "lockvisor lab: stopped during the traced runs; continue with --resume\n");
    return machine::exit_code(machine::Outcome::kInterrupted);
  }
  write_outputs(o.out);
  fmt::print("lockvisor lab: done: {}/summary.md, report.md, summary.csv, plots\n", o.out);
  return 0;
}

int merge_labs(const std::string& out, const std::vector<std::string>& inputs, const std::string& command) {
  if (inputs.empty()) fail("lab merge: give the result directories to combine");
  // Every input is read and checked before OUT is made: a refused merge
  // leaves nothing behind, and the same command with good inputs then runs.
  nlohmann::json manifest;
  Scenario scenario;
  std::vector<nlohmann::json> records;
  std::map<std::string, std::string> seen;  // id -> input
  struct Timeline {
    nlohmann::json record;
    fs::path input;
    std::string trace;  // relative to the lab directory; empty: none
  };
  std::vector<Timeline> timelines;
  std::map<std::string, std::string> timeline_seen;  // id -> input
  for (const auto& in : inputs) {
    const auto m = read_manifest(in);
    if (manifest.is_null()) {
      manifest = m;
      scenario = effective_scenario(manifest, (fs::path(in) / kManifest).string());
    } else if (m.at("scenario_text") != manifest.at("scenario_text") || m.at("repeats") != manifest.at("repeats") ||
               m.at("native") != manifest.at("native") ||
               m.value("placement", nlohmann::json::object()).value("host_cpus", std::string()) !=
                   manifest.value("placement", nlohmann::json::object()).value("host_cpus", std::string())) {
      fail("lab merge: {} ran another scenario than {}", in, inputs.front());
    }
    const auto results = (fs::path(in) / kResults).string();
    const auto loaded = load_results(results);
    check_results(loaded, results, scenario);
    if (loaded.torn) fmt::print("lab merge: {}: dropped a torn last line\n", in);
    for (const auto& r : loaded.records) {
      const auto id = r["id"].get<std::string>();
      if (const auto [it, fresh] = seen.emplace(id, in); !fresh)
        fail("lab merge: point '{}' is in both {} and {}", id, it->second, in);
      records.push_back(r);
    }
    // The timelines: their records and files, each cell from one input.
    const auto log = (fs::path(in) / kTimelinesLog).string();
    const auto traced = load_results(log);
    for (std::size_t i = 0; i < traced.records.size(); ++i) {
      const auto& r = traced.records[i];
      const auto id = r["id"].get<std::string>();
      if (const auto [it, fresh] = timeline_seen.emplace(id, in); !fresh)
        fail("lab merge: timeline '{}' is in both {} and {}", id, it->second, in);
      std::string trace;
      if (r.contains("trace")) {
        const auto where = fmt::format("{}:{}", log, traced.lines[i]);
        if (!r["trace"].is_string()) fail("{}: trace: expected a file name, not {}", where, r["trace"].dump());
        trace = r["trace"].get<std::string>();
        // A file of the lab's timelines folder, which the merge copies into
        // OUT's: nothing outside either.
        const fs::path relative(trace);
        if (!trace.empty() && (relative.is_absolute() || *relative.begin() != kTimelinesDir ||
                               relative.lexically_normal() != relative ||
                               std::find(relative.begin(), relative.end(), "..") != relative.end()))
          fail("{}: trace '{}': expected a file in {}/", where, trace, kTimelinesDir);
        if (!trace.empty() && !fs::is_regular_file(fs::path(in) / trace))
          fail("{}: trace '{}': no such file in {}", where, trace, in);
      }
      timelines.push_back({r, in, trace});
    }
  }
  const auto total = expand(scenario).size();

  const fs::path dir(out);
  prepare_out(dir, kMergeOut);
  // The points in matrix order, whichever shard ran them.
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a["index"].template get<std::uint64_t>() < b["index"].template get<std::uint64_t>(); });
  manifest["shard"] = "1/1";
  manifest["command"] = command;
  manifest["merged_from"] = inputs;
  write_text(dir / kManifest, manifest.dump(2) + "\n");
  {
    ResultsLog log((dir / kResults).string(), LoadedResults{});
    for (const auto& r : records) log.append(r);
  }
  if (!timelines.empty()) {
    ResultsLog log((dir / kTimelinesLog).string(), LoadedResults{});
    for (const auto& t : timelines) {
      if (!t.trace.empty()) {
        std::error_code ec;
        fs::create_directories(dir / kTimelinesDir, ec);
        fs::copy_file(t.input / t.trace, dir / t.trace, fs::copy_options::overwrite_existing, ec);
        if (ec) fail_host("lab merge: {}: cannot copy {}: {}", t.input.string(), t.trace, ec.message());
      }
      log.append(t.record);
    }
  }
  fmt::print("lab merge: {} points from {} directories into {} ({} of {} in the matrix)\n", records.size(),
             inputs.size(), out, records.size(), total);
  write_outputs(out);
  return 0;
}

}  // namespace lockvisor::lab
