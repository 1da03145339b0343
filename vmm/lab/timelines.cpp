#include "vmm/lab/timelines.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "vmm/lab/point_runner.h"
#include "vmm/lab/python_script.h"
#include "vmm/lab/results_log.h"
#include "vmm/lab/timeline_check.h"
#include "vmm/machine/stop_signals.h"
#include "vmm/trace/trace_check.h"

namespace lockvisor::lab {
namespace fs = std::filesystem;
namespace {

constexpr double kSwimlaneTimeoutS = 300;

bool matches(const std::map<std::string, std::vector<std::string>>& where,
             const std::vector<std::pair<std::string, std::string>>& labels) {
  for (const auto& [axis, wanted] : where) {
    const auto it = std::find_if(labels.begin(), labels.end(), [&](const auto& l) { return l.first == axis; });
    if (it == labels.end() || std::find(wanted.begin(), wanted.end(), it->second) == wanted.end()) return false;
  }
  return true;
}

std::string labels_text(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string out;
  for (const auto& [a, l] : labels) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", a, l);
  return out;
}

// The trace file's metadata (it is small: windowed on the worst wait).
nlohmann::json trace_metadata(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  try {
    const auto trace = nlohmann::json::parse(in);
    return trace.value("metadata", nlohmann::json(nullptr));
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

std::string ms(double ns) { return fmt::format("{:.2f} ms", ns * 1e-6); }

std::string slices(double ns, std::optional<double> slice_ns) {
  return slice_ns && *slice_ns > 0 ? fmt::format(" ({:.1f} host slices)", ns / *slice_ns) : std::string();
}

}  // namespace

std::vector<TimelinePlan> plan_timelines(const Scenario& scenario, const std::vector<Point>& mine,
                                         const std::string& dir) {
  std::vector<TimelinePlan> plans;
  if (!scenario.timeline.enabled) return plans;
  for (const auto& p : mine) {
    if (p.repeat != 0 || !matches(scenario.timeline.where, p.labels)) continue;
    if (const auto* native = lookup(p.settings, "native"); native && *native == "true") continue;
    TimelinePlan plan;
    plan.key = p.key;
    plan.id = p.key + "#timeline";
    plan.labels = p.labels;
    plan.name = fmt::format("{:016x}", fnv1a(plan.id));
    auto settings = p.settings;
    // As long as the point's run, but at most kMaxTimelineSeconds: every
    // acquisition must fit the lock log. A point sized by iterations keeps them.
    if (lookup(settings, "iterations") == nullptr) {
      const auto* d = lookup(settings, "duration_s");
      const double point_s = d ? std::stod(*d) : 1.0;
      plan.duration_s = scenario.timeline.duration_s.value_or(std::min(point_s, kMaxTimelineSeconds));
      assign(settings, "duration_s", fmt::format("{}", plan.duration_s));
    }
    const auto* memory = lookup(settings, "memory_mib");
    if (memory == nullptr || std::stoull(*memory) < kTimelineMemoryMib)
      assign(settings, "memory_mib", std::to_string(kTimelineMemoryMib));
    plan.args = run_arguments(settings);
    const auto trace = (fs::path(dir) / kTimelinesDir / (plan.name + ".json")).string();
    plan.args.insert(plan.args.end(), {"--trace", trace, "--trace-window", "worst-wait", "--trace-max-events",
                                       std::to_string(kTimelineMaxEvents)});
    const auto* lock = lookup(settings, "lock");
    if (!trace::trace_check_judges(lock ? *lock : std::string(), lookup(settings, "vnuma") != nullptr))
      plan.args.insert(plan.args.end(), {"--trace-merge-short", kTimelineMergeShort});
    plans.push_back(std::move(plan));
  }
  return plans;
}

bool run_timelines(const std::vector<TimelinePlan>& plans, const std::string& dir_text, const std::string& lockvisor) {
  if (plans.empty()) return true;
  const fs::path dir(dir_text);
  fs::create_directories(dir / kTimelinesDir);
  const auto loaded = load_results((dir / kTimelinesLog).string());
  std::set<std::string> done;
  for (const auto& r : loaded.records) done.insert(r["id"].get<std::string>());
  ResultsLog log((dir / kTimelinesLog).string(), loaded);
  std::size_t todo = 0;
  for (const auto& p : plans) todo += done.count(p.id) ? 0 : 1;
  if (todo == 0) return true;
  fmt::print("lab: {} traced run{} for the timelines of the worst waits\n", todo, todo == 1 ? "" : "s");
  std::fflush(stdout);
  for (const auto& p : plans) {
    if (done.count(p.id)) continue;
    machine::throw_if_stop_signalled();
    const auto trace = dir / kTimelinesDir / (p.name + ".json");
    std::error_code ignored;
    // Left by an interrupted run or a removed record: made again.
    fs::remove(trace, ignored);
    for (const char* made : kMadeFromTrace)
      fs::remove(fs::path(trace).replace_extension(made), ignored);
    auto run = run_point(lockvisor, p.args, (dir / ("." + p.name + ".json")).string(),
                         (dir / "logs" / (p.name + ".log")).string(), 120 + 20 * std::max(p.duration_s, 1.0));
    if (run.interrupted || machine::stop_signal() != 0) return false;
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [a, l] : p.labels) labels[a] = l;
    const bool have_trace = fs::exists(trace);
    nlohmann::json record = {{"id", p.id},
                             {"key", p.key},
                             {"axes", labels},
                             {"duration_s", p.duration_s},
                             {"exit_code", run.exit_code},
                             {"outcome", run.outcome},
                             {"wall_s", run.wall_s},
                             {"trace", have_trace ? (fs::path(kTimelinesDir) / (p.name + ".json")).string() : std::string()},
                             {"trace_metadata", have_trace ? trace_metadata(trace) : nlohmann::json(nullptr)}};
    // What the traced run measured itself, next to the trace's own view.
    const nlohmann::json::json_pointer tput("/ops_per_sec"), max("/latency_ns/max");
    record["ops_per_sec"] = run.report.is_object() && run.report.contains(tput) ? run.report.at(tput) : nullptr;
    record["latency_max_ns"] = run.report.is_object() && run.report.contains(max) ? run.report.at(max) : nullptr;
    log.append(record);
    fmt::print("lab: timeline {}: {}\n", labels_text(p.labels), run.outcome);
    std::fflush(stdout);
  }
  return true;
}

std::string timelines_section(const Scenario& scenario, const Summary& summary, const std::string& dir_text,
                              std::optional<double> host_slice_ns) {
  if (!scenario.timeline.enabled) return {};
  const fs::path dir(dir_text);
  std::string out = "\n## Timelines: each lock's worst wait\n\n";
  const auto loaded = load_results((dir / kTimelinesLog).string());
  if (loaded.records.empty()) {
    out += "No traced runs yet (they run after the matrix; `lockvisor lab --resume` runs the missing ones).\n";
    return out;
  }
  out += "One extra run per cell, traced (`lockvisor run --trace --trace-window worst-wait`): not one of the measured "
         "runs, since the lock log costs a store per acquisition. Each picture is that run's longest lock wait "
         "with what every vCPU did meanwhile (legend in docs/trace.md); the trace file opens in "
         "[Perfetto](https://ui.perfetto.dev). The measured runs' worst wait of the same cell is beside it, and what "
         "`lockvisor trace-check` finds in the traced run (docs/trace.md): the bound oracle's verdict for pvbounded, "
         "the stated bound's for the NUMA locks, and per acquisition path how many acquisitions it made, their "
         "handoff latency (the previous release to this acquisition), how long the lock sat free before them and "
         "what the acquiring vCPU was doing meanwhile (for `queue` and `reserved` it is the queue head).\n";
  // In matrix order, like the summary.
  std::map<std::string, const nlohmann::json*> by_key;
  for (const auto& r : loaded.records) by_key[r.value("key", std::string())] = &r;
  const auto script = tool_script("trace-swimlane.py", "LOCKVISOR_TRACE_SWIMLANE");
  for (const auto& point : summary.points) {
    const auto it = by_key.find(point.key);
    if (it == by_key.end()) continue;
    const auto& r = *it->second;
    out += fmt::format("\n### {}\n\n", labels_text(point.labels));
    if (const auto v = point.values.find("latency_max_ns"); v != point.values.end() && !v->second.empty()) {
      const double worst = *std::max_element(v->second.begin(), v->second.end());
      out += fmt::format("- Measured runs ({}): worst wait {}{}\n", v->second.size(), ms(worst),
                         slices(worst, host_slice_ns));
    }
    const auto outcome = r.value("outcome", std::string("?"));
    if (outcome != "completed" || r.value("trace", std::string()).empty()) {
      out += fmt::format("- Traced run: {} (no timeline; logs/ has its output)\n", outcome);
      continue;
    }
    const auto& meta = r.at("trace_metadata");
    const nlohmann::json::json_pointer wait_ptr("/window/worst_wait");
    if (!meta.is_object() || !meta.contains(wait_ptr)) {
      out += "- Traced run: its trace has no lock wait (no timeline)\n";
      continue;
    }
    const auto& w = meta.at(wait_ptr);
    const double wait_ns = w.value("wait_us", 0.0) * 1e3;
    std::string run_numbers;
    if (r.contains("ops_per_sec") && r["ops_per_sec"].is_number())
      run_numbers = fmt::format(", {:.0f} acquisitions/s", r["ops_per_sec"].get<double>());
    out += fmt::format("- Traced run ({} s{}): worst wait {}{} on vCPU {} (lock slot {}), at {:.3f} ms, of {} waits "
                       "in the trace\n",
                       r.value("duration_s", 0.0), run_numbers, ms(wait_ns), slices(wait_ns, host_slice_ns),
                       w.value("vcpu", 0u), w.value("lock", 0u), w.value("begin_us", 0.0) * 1e-3,
                       w.value("waits_searched", 0ull));
    const nlohmann::json::json_pointer dropped("/locks/dropped_in_guest");
    if (meta.contains(dropped) && meta.at(dropped).is_number() && meta.at(dropped).get<double>() > 0)
      out += fmt::format("- The guest's lock log was full: {} later acquisitions are not in the trace (the worst wait "
                         "is the worst of the ones kept)\n",
                         meta.at(dropped).dump());
    const auto trace = r.at("trace").get<std::string>();
    const auto png = fs::path(trace).replace_extension(kSwimlaneExtension).string();
    if (!fs::exists(dir / png)) {
      const auto drawn = run_python_script(script, {(dir / trace).string(), "-o", (dir / png).string(),
                                                    "--around-worst-wait"},
                                           (dir / "logs" / (fs::path(trace).stem().string() + ".swimlane.log")).string(),
                                           kSwimlaneTimeoutS);
      if (!drawn.ok) {
        out += fmt::format("- No picture: {} ({}). Trace: [{}]({})\n", drawn.why,
                           drawn.timed_out ? "a slow or busy host; `lockvisor lab report` draws it again"
                                           : "needs /usr/bin/python3 with matplotlib",
                           trace, trace);
        out += timeline_check_markdown(timeline_check(dir, trace), trace);
        continue;
      }
    }
    out += fmt::format("- Trace: [{}]({})\n", trace, trace);
    out += timeline_check_markdown(timeline_check(dir, trace), trace);
    out += fmt::format("\n![{}: worst wait]({})\n", labels_text(point.labels), png);
  }
  return out;
}

}  // namespace lockvisor::lab
