#include "vmm/lab/lab_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "vmm/lab/lab.h"
#include "vmm/lab/lab_summary.h"
#include "vmm/lab/metrics.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {
namespace {

std::string wall_text(double s) { return s < 0 ? "n/a (results without finished_at)" : fmt::format("{:.1f} s", s); }

// A lab's wall time in seconds from its results' finished_at and wall_s
// (first point's start to last point's end, pauses of a resumed lab
// included); negative when a result lacks finished_at (labs of older
// versions).
double lab_wall_seconds(const std::vector<nlohmann::json>& records) {
  double first = 0, last = 0;
  bool any = false;
  for (const auto& r : records) {
    if (!r.contains("finished_at") || !r["finished_at"].is_number()) return -1;
    const double end = r["finished_at"].get<double>();
    const double start = end - r.value("wall_s", 0.0);
    first = any ? std::min(first, start) : start;
    last = any ? std::max(last, end) : end;
    any = true;
  }
  return any ? last - first : -1;
}

// What the two labs' plans differ in, in words ("" when nothing).
std::string plan_differences(const LabDirectory& a, const LabDirectory& b) {
  std::vector<std::string> differ;
  const auto text = [](const LabDirectory& l, const char* key) { return l.manifest.value(key, nlohmann::json()).dump(); };
  if (text(a, "scenario_text") != text(b, "scenario_text"))
    differ.push_back(fmt::format("the scenario ({} against {})", a.manifest.value("origin", std::string("?")),
                                 b.manifest.value("origin", std::string("?"))));
  if (text(a, "overrides") != text(b, "overrides"))
    differ.push_back(fmt::format("--set ({} against {})", a.scenario.changed.empty() ? "none" : a.scenario.changed,
                                 b.scenario.changed.empty() ? "none" : b.scenario.changed));
  if (text(a, "repeats") != text(b, "repeats")) differ.push_back("the repeats per point");
  if (text(a, "native") != text(b, "native")) differ.push_back("native twins");
  const auto planned = [](const LabDirectory& l) {
    return l.manifest.value("placement", nlohmann::json::object()).value("host_cpus", std::string("?"));
  };
  if (planned(a) != planned(b)) differ.push_back(fmt::format("the host CPUs planned for ({} against {})", planned(a), planned(b)));
  std::string out;
  for (const auto& d : differ) out += (out.empty() ? "" : ", ") + d;
  return out;
}

}  // namespace

int compare_labs(const std::string& base_dir, const std::string& other_dir, const std::vector<std::string>& names,
                 std::FILE* out) {
  std::vector<const Metric*> chosen;
  for (const auto& name : names.empty() ? std::vector<std::string>{kCompareDefaultMetric} : names) {
    // summary.csv names a metric's median NAME_median: that column is the metric too
    // (window_jain_median is a metric of its own, and its column window_jain_median_median).
    constexpr std::string_view kMedian = "_median";
    const Metric* m = find_metric(name);
    if (m == nullptr && name.ends_with(kMedian)) m = find_metric(name.substr(0, name.size() - kMedian.size()));
    if (m == nullptr) {
      std::string known;
      for (const auto& each : metrics()) known += (known.empty() ? "" : ", ") + std::string(each.name);
      fail("lab compare: --metric {}: not a summary.csv metric (one of: {})", name, known);
    }
    chosen.push_back(m);
  }
  const auto base = load_lab(base_dir);
  const auto other = load_lab(other_dir);
  std::map<std::string, const PointSummary*> theirs;
  for (const auto& p : other.summary.points) theirs[p.key] = &p;
  std::set<std::string> base_keys;
  for (const auto& p : base.summary.points) base_keys.insert(p.key);

  const double base_wall = lab_wall_seconds(base.records), other_wall = lab_wall_seconds(other.records);
  fmt::print(out, "# lab compare: {} against {}\n\n", other_dir, base_dir);
  fmt::print(out, "Base: {} ({}), {} runs, wall time {}.  \n", base_dir, base.scenario.name, base.records.size(),
             wall_text(base_wall));
  fmt::print(out, "Other: {} ({}), {} runs, wall time {}{}.\n", other_dir, other.scenario.name, other.records.size(),
             wall_text(other_wall),
             base_wall > 0 && other_wall >= 0 ? fmt::format(": {:.2f}x the base's", other_wall / base_wall) : "");
  if (const auto d = plan_differences(base, other); !d.empty()) fmt::print(out, "\nThe two labs differ in {}.\n", d);

  int code = 0;
  for (const Metric* m : chosen) {
    std::vector<std::string> rows, outside, not_compared;
    for (const auto& p : base.summary.points) {
      const auto it = theirs.find(p.key);
      const auto mine = p.estimates.find(m->name);
      const bool both = it != theirs.end() && mine != p.estimates.end() && it->second->estimates.count(m->name) != 0;
      if (!both) {
        not_compared.push_back(p.key);
        continue;
      }
      const Estimate& b = mine->second;
      const Estimate& o = it->second->estimates.at(m->name);
      const bool inside = o.median >= b.lo && o.median <= b.hi;
      if (!inside) outside.push_back(p.key);
      rows.push_back(fmt::format("| {} | {} [{}, {}] (n={}) | {} (n={}) | {} | {} |", p.key, fmt_num(b.median), fmt_num(b.lo),
                                 fmt_num(b.hi), b.n, fmt_num(o.median), o.n,
                                 b.median != 0 ? fmt::format("{:.2f}", o.median / b.median) : "n/a",
                                 inside ? "yes" : "**no**"));
    }
    for (const auto& p : other.summary.points)
      if (!base_keys.count(p.key)) not_compared.push_back(p.key);
    if (rows.empty()) fail("lab compare: no point of {} has completed runs with {} in both labs", base_dir, m->name);
    fmt::print(out, "\n## {} ({}, {} is better)\n\n", m->name, m->unit, m->higher_is_better ? "higher" : "lower");
    fmt::print(out, "| point | base: median [95% interval] | other: median | other / base | inside |\n|---|---|---|---|---|\n");
    for (const auto& r : rows) fmt::print(out, "{}\n", r);
    fmt::print(out, "\n{}: {} of {} medians of the other lab inside the base's 95% interval", m->name,
               rows.size() - outside.size(), rows.size());
    if (!outside.empty()) {
      std::string list;
      for (const auto& k : outside) list += (list.empty() ? "" : ", ") + k;
      fmt::print(out, "; outside: {}", list);
      code = kCompareOutsideExit;
    }
    if (!not_compared.empty()) fmt::print(out, "; {} not compared (no completed runs in one lab)", not_compared.size());
    fmt::print(out, ".\n");
  }
  return code;
}

}  // namespace lockvisor::lab
