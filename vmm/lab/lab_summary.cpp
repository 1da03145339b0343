#include "vmm/lab/lab_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <set>

#include "vmm/experiment/run_settings.h"
#include "vmm/host/cpu_set.h"
#include "vmm/lab/metrics.h"
#include "vmm/lab/numa_bounds.h"
#include "vmm/lab/point_runner.h"
#include "vmm/lab/settings.h"
#include "vmm/machine/run_result.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {
namespace {

bool sets_placement(const Axis& axis) {
  for (const auto& v : axis.values)
    if (lookup(v.settings, "vcpus") || lookup(v.settings, "pcpus")) return true;
  return false;
}

double overcommit_of(const SettingValues& settings, unsigned host_cpus) {
  const std::string* vcpus = lookup(settings, "vcpus");
  const std::string* pcpus = lookup(settings, "pcpus");
  const double v = vcpus ? std::stod(*vcpus) : 1.0;
  const double p = pcpus ? static_cast<double>(host::parse_cpu_list(*pcpus).size()) : host_cpus;
  return p > 0 ? v / p : v;
}

// One VM of a multi-VM point: the shared settings, then its own.
SettingValues vm_settings(const SettingValues& point, const std::string& label) {
  SettingValues out;
  const std::string prefix = std::string(kVmSettingPrefix) + label + ":";
  for (const auto& [n, v] : point)
    if (n.rfind(kVmSettingPrefix, 0) != 0) assign(out, n, v);
  for (const auto& [n, v] : point)
    if (n.rfind(prefix, 0) == 0 && n.substr(prefix.size()) != "label") assign(out, n.substr(prefix.size()), v);
  return out;
}

// All VMs' vCPUs over the host CPUs they share: how overcommitted the host is.
double multi_vm_overcommit(const Scenario& s, const SettingValues& point, unsigned host_cpus) {
  double vcpus = 0;
  std::set<int> cpus;
  for (const auto& vm : s.vms) {
    const auto settings = vm_settings(point, vm.label);
    const std::string* v = lookup(settings, "vcpus");
    vcpus += v ? std::stod(*v) : 1.0;
    const std::string* p = lookup(settings, "pcpus");
    for (int cpu : p ? host::parse_cpu_list(*p) : host::allowed_cpus()) cpus.insert(cpu);
  }
  const double p = cpus.empty() ? host_cpus : static_cast<double>(cpus.size());
  return p > 0 ? vcpus / p : vcpus;
}

// A run of one point (one VM of it in a multi-VM point) into its summary.
void add_run(PointSummary& ps, const std::string& outcome, const nlohmann::json& report, const std::string& id,
             std::optional<double> host_slice_ns) {
  ++ps.runs;
  ++ps.outcomes[outcome];
  if (outcome != "completed") return;
  if (!report.is_object()) fail("result '{}': completed but has no report", id);
  for (const auto& m : metrics())
    if (const auto v = read_metric(m, report, id, host_slice_ns)) ps.values[m.name].push_back(*v);
}

std::string outcomes_text(const std::map<std::string, unsigned>& outcomes) {
  std::string text;
  for (const auto& [name, n] : outcomes) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", n, name);
  return text;
}

using Labels = std::vector<std::pair<std::string, std::string>>;

bool matches(const Labels& point, const std::map<std::string, std::vector<std::string>>& where) {
  for (const auto& [axis, labels] : where) {
    bool ok = false;
    for (const auto& [a, l] : point) ok = ok || (a == axis && std::find(labels.begin(), labels.end(), l) != labels.end());
    if (!ok) return false;
  }
  return true;
}
bool matches(const PointSummary& p, const std::map<std::string, std::vector<std::string>>& where) {
  return matches(p.labels, where);
}

const std::string& label_of(const Labels& point, const std::string& axis) {
  static const std::string none;
  for (const auto& [a, l] : point)
    if (a == axis) return l;
  return none;
}
const std::string& label_of(const PointSummary& p, const std::string& axis) { return label_of(p.labels, axis); }

// The key without one axis: the points that differ only along it.
std::string key_without(const PointSummary& p, const std::string& axis) {
  std::string key;
  for (const auto& [a, l] : p.labels)
    if (a != axis) key += (key.empty() ? "" : ",") + a + "=" + l;
  return key.empty() ? "(all)" : key;
}

// The fewest runs on each side of a ratio for a verdict on it.
constexpr std::size_t kMinRunsForVerdict = 2;

ClaimResult check_ratio(const Claim& c, const Summary& s) {
  ClaimResult result{&c, {}, "no data"};
  std::map<std::string, std::pair<const PointSummary*, const PointSummary*>> groups;
  for (const auto& p : s.points) {
    if (!matches(p, c.where)) continue;
    const auto& label = label_of(p, c.axis);
    if (label == c.a) groups[key_without(p, c.axis)].first = &p;
    if (label == c.b) groups[key_without(p, c.axis)].second = &p;
  }
  unsigned agree = 0, contradict = 0, compared = 0, too_few = 0;
  for (const auto& [group, pair] : groups) {
    if (!pair.first || !pair.second) continue;
    const auto ia = pair.first->values.find(c.metric), ib = pair.second->values.find(c.metric);
    if (ia == pair.first->values.end() || ib == pair.second->values.end() || ia->second.empty() || ib->second.empty()) {
      result.findings.push_back(fmt::format("{}: no completed runs of both", group));
      continue;
    }
    const auto r = bootstrap_ratio(ia->second, ib->second, fnv1a(c.text + group));
    // One run on a side has no spread: its interval is a point, and
    // "beyond the spread" would claim what one run cannot show.
    if (ia->second.size() < kMinRunsForVerdict || ib->second.size() < kMinRunsForVerdict) {
      ++too_few;
      result.findings.push_back(fmt::format("{}: {}/{} {} = {} ({} vs {} runs): too few runs to tell (at least {} each)",
                                            group, c.a, c.b, c.metric, fmt_num(r.median), ia->second.size(),
                                            ib->second.size(), kMinRunsForVerdict));
      continue;
    }
    const std::string verdict = ratio_verdict(r, c.factor);
    ++compared;
    agree += verdict == c.expect;
    contradict += verdict != c.expect && (c.expect == "a~b" || verdict != "a~b");
    // Against b itself: "higher"; against a factor of it: "above 0.9x".
    const std::string than = c.factor == 1 ? "" : fmt::format(" than {:g}x {}", c.factor, c.b);
    result.findings.push_back(fmt::format("{}: {}/{} {} = {} [95% CI {}, {}] ({} vs {} runs): {}", group, c.a, c.b,
                                          c.metric, fmt_num(r.median), fmt_num(r.lo), fmt_num(r.hi), ia->second.size(),
                                          ib->second.size(),
                                          verdict == std::string("a~b")
                                              ? (c.factor == 1 ? "within the spread"
                                                               : fmt::format("{:g}x within the spread", c.factor))
                                              : (verdict == std::string("a>b")
                                                     ? c.a + " higher" + than + ", beyond the spread"
                                                     : c.a + " lower" + than + ", beyond the spread")));
  }
  if (compared == 0) {
    if (too_few > 0) result.verdict = "too few runs";
    return result;
  }
  result.verdict = contradict ? "contradicted" : (agree == compared ? "holds" : "not beyond the spread");
  return result;
}

ClaimResult check_outcome(const Claim& c, const Summary& s) {
  ClaimResult result{&c, {}, "no data"};
  unsigned runs = 0, hits = 0;
  for (const auto& p : s.points) {
    if (!matches(p, c.where)) continue;
    runs += static_cast<unsigned>(p.runs);
    const auto it = p.outcomes.find(c.outcome);
    const unsigned n = it == p.outcomes.end() ? 0 : it->second;
    hits += n;
    result.findings.push_back(fmt::format("{}: {} of {} runs ended '{}'", p.key, n, p.runs, c.outcome));
  }
  if (runs == 0) return result;
  if (c.expect == "some") result.verdict = hits > 0 ? "holds" : "not seen";
  else result.verdict = hits == 0 ? "holds" : "contradicted";
  return result;
}

// A level claim: per point of `a` that `where` selects, the 95% interval of
// the metric's median against the stated bound(s).
ClaimResult check_level(const Claim& c, const Summary& s) {
  ClaimResult result{&c, {}, "no data"};
  unsigned agree = 0, contradict = 0, compared = 0, too_few = 0;
  for (const auto& p : s.points) {
    if (!matches(p, c.where) || label_of(p, c.axis) != c.a) continue;
    const auto values = p.values.find(c.metric);
    const auto e = p.estimates.find(c.metric);
    if (values == p.values.end() || values->second.empty() || e == p.estimates.end()) {
      result.findings.push_back(fmt::format("{}: no completed run with a value of {}", p.key, c.metric));
      continue;
    }
    const std::size_t n = values->second.size();
    const Estimate& est = e->second;
    const std::string measured =
        fmt::format("{}: {} median {} [95% CI {}, {}] ({} runs)", p.key, c.metric, fmt_num(est.median),
                    fmt_num(est.lo), fmt_num(est.hi), n);
    if (n < kMinRunsForVerdict) {
      ++too_few;
      result.findings.push_back(measured + fmt::format(": too few runs to tell (at least {})", kMinRunsForVerdict));
      continue;
    }
    // Inside (agrees) when the whole interval satisfies the bound(s); outside
    // (contradicts) when the whole interval violates one.
    bool inside = false, outside = false;
    if (c.expect == "above") {
      inside = est.lo > c.low;
      outside = est.hi < c.low;
    } else if (c.expect == "below") {
      inside = est.hi < c.high;
      outside = est.lo > c.high;
    } else {
      inside = est.lo >= c.low && est.hi <= c.high;
      outside = est.hi < c.low || est.lo > c.high;
    }
    ++compared;
    agree += inside;
    contradict += outside;
    result.findings.push_back(measured + (inside    ? ": as expected"
                                          : outside ? ": on the other side, beyond the spread"
                                                    : ": the interval straddles the bound"));
  }
  if (compared == 0) {
    if (too_few > 0) result.verdict = "too few runs";
    return result;
  }
  result.verdict = contradict ? "contradicted" : (agree == compared ? "holds" : "not beyond the spread");
  return result;
}

// The values a claim's `where` names that this host was too small for
// (min_cpus), and the points it selects that were beyond a limit here
// (matrix.h), get a finding each, so that every row the claim expects is
// accounted for. A claim without data whose `where` selects, on some axis,
// only such values, or that selects such points, says "not on this host"
// rather than "no data", which would read as runs that failed.
void note_left_out(const Claim& c, const Scenario& s, const std::vector<LeftOutPoint>& points, ClaimResult& result) {
  bool only_left_out = false;
  // The points beyond a limit that the claim selects: a finding each, and
  // "not on this host" when the claim found nothing else.
  std::size_t points_out = 0;
  for (const auto& p : points) {
    // A ratio compares two labels of its axis: a point with a third is not its.
    const std::string& compared = label_of(p.labels, c.axis);
    if (!matches(p.labels, c.where) || (c.kind == "ratio" && compared != c.a && compared != c.b)) continue;
    ++points_out;
    result.findings.push_back(fmt::format("{}: not on this host ({} vCPUs; {})", p.key, p.vcpus, p.why));
  }
  only_left_out = points_out != 0;
  for (const auto& [axis, labels] : c.where) {
    std::size_t out = 0;
    for (const auto& label : labels)
      for (const auto& v : s.left_out) {
        if (v.axis != axis || v.label != label) continue;
        ++out;
        result.findings.push_back(fmt::format("{}={}: not on this host (needs at least {} host CPUs; this lab is "
                                              "planned for {})",
                                              axis, v.label, v.min_cpus, s.host_cpus.size()));
      }
    only_left_out = only_left_out || (out != 0 && out == labels.size());
  }
  if (only_left_out && result.verdict == "no data") result.verdict = "not on this host";
}

}  // namespace

std::string fmt_num(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e6) return fmt::format("{:.3g}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  if (a >= 0.01) return fmt::format("{:.3f}", v);
  return fmt::format("{:.2g}", v);  // exits per acquisition, p99.9 in slices: 0.000 would hide them
}

Summary summarize(const Scenario& s, const std::vector<nlohmann::json>& records, unsigned host_cpus,
                  std::optional<double> host_slice_ns) {
  Summary summary;
  summary.records = records.size();
  std::map<std::string, std::size_t> by_key;
  std::set<std::string> placement_axes;
  for (const auto& a : s.axes)
    if (sets_placement(a)) placement_axes.insert(a.name);
  Scenario one = s;
  one.repeats = 1;
  const Expansion expansion = expand_matrix(one);
  auto add_point = [&](const std::string& key, const std::vector<std::pair<std::string, std::string>>& labels,
                       const SettingValues& settings, double overcommit) {
    PointSummary ps;
    ps.key = key;
    ps.labels = labels;
    ps.settings = settings;
    for (const auto& [a, l] : labels)
      if (!placement_axes.count(a)) ps.series += (ps.series.empty() ? "" : ",") + a + "=" + l;
    if (ps.series.empty()) ps.series = "all";
    ps.overcommit = overcommit;
    // 4 vCPUs on one CPU and 8 on two are both 4:1 but not the same
    // experiment: a plot line per host-CPU count.
    if (!placement_axes.empty()) {
      const std::string* pcpus = lookup(settings, "pcpus");
      const auto n = pcpus ? host::parse_cpu_list(*pcpus).size() : host_cpus;
      ps.series += fmt::format(" ({} host CPU{})", n, n == 1 ? "" : "s");
    }
    by_key[key] = summary.points.size();
    summary.points.push_back(std::move(ps));
  };
  for (const auto& p : expansion.points) {
    if (s.vms.empty()) {
      add_point(p.key, p.labels, p.settings, overcommit_of(p.settings, host_cpus));
      continue;
    }
    // A multi-VM point: one row per VM, told apart by the "vm" column.
    const double overcommit = multi_vm_overcommit(s, p.settings, host_cpus);
    for (const auto& vm : s.vms) {
      auto labels = p.labels;
      labels.emplace_back("vm", vm.label);
      add_point(p.key + ",vm=" + vm.label, labels, vm_settings(p.settings, vm.label), overcommit);
    }
  }
  for (const auto& r : records) {
    const auto id = r.at("id").get<std::string>();
    const auto key = r.contains("key") ? r["key"].get<std::string>() : id.substr(0, id.rfind('#'));
    const auto outcome = r.value("outcome", std::string("unknown"));
    const auto& report = r.at("report");
    if (s.vms.empty()) {
      const auto it = by_key.find(key);
      if (it == by_key.end()) fail("result '{}' is not a point of scenario '{}'", id, s.name);
      add_run(summary.points[it->second], outcome, report, id, host_slice_ns);
      continue;
    }
    // Each VM's result (multivm/multi_vm_run.h, to_json) is its own run; a
    // point that left no report counts its outcome for every VM.
    for (const auto& vm : s.vms) {
      const auto it = by_key.find(key + ",vm=" + vm.label);
      if (it == by_key.end()) fail("result '{}' is not a point of scenario '{}'", id, s.name);
      const nlohmann::json* entry = nullptr;
      if (report.is_object() && report.contains("vms") && report["vms"].is_array())
        for (const auto& e : report["vms"])
          if (e.value("label", std::string()) == vm.label) entry = &e;
      if (entry == nullptr) {
        add_run(summary.points[it->second], outcome == "completed" ? kNoReport : outcome, nullptr, id, host_slice_ns);
        continue;
      }
      add_run(summary.points[it->second], entry->value("outcome", std::string("unknown")), entry->at("result"),
              id + " vm=" + vm.label, host_slice_ns);
    }
  }
  for (auto& ps : summary.points)
    for (const auto& [name, values] : ps.values) ps.estimates[name] = bootstrap_median(values, fnv1a(ps.key + name));
  for (const auto& c : s.claims) {
    auto result = c.kind == "ratio"   ? check_ratio(c, summary)
                  : c.kind == "level" ? check_level(c, summary)
                                      : check_outcome(c, summary);
    note_left_out(c, s, expansion.left_out, result);
    summary.claims.push_back(std::move(result));
  }
  return summary;
}

std::string summary_csv(const Summary& summary) {
  std::string out = "key,series,overcommit";
  if (!summary.points.empty())
    for (const auto& [axis, label] : summary.points.front().labels) out += ",axis_" + axis;
  for (const auto* name : {"lock", "vcpus", "pcpus", "native"}) out += fmt::format(",{}", name);
  out += ",runs,completed,outcomes";
  for (const auto& m : metrics()) out += fmt::format(",{0}_median,{0}_lo,{0}_hi,{0}_n", m.name);
  out += "\n";
  auto quoted = [](const std::string& t) { return t.find_first_of(",\"") == std::string::npos ? t : "\"" + t + "\""; };
  for (const auto& p : summary.points) {
    out += fmt::format("{},{},{}", quoted(p.key), quoted(p.series), p.overcommit);
    for (const auto& [axis, label] : p.labels) out += "," + quoted(label);
    for (const auto* name : {"lock", "vcpus", "pcpus", "native"}) {
      const std::string* v = lookup(p.settings, name);
      out += "," + quoted(v ? *v : "");
    }
    const auto done = p.outcomes.count("completed") ? p.outcomes.at("completed") : 0u;
    out += fmt::format(",{},{},{}", p.runs, done, quoted(outcomes_text(p.outcomes)));
    for (const auto& m : metrics()) {
      const auto it = p.estimates.find(m.name);
      if (it == p.estimates.end()) out += ",,,,0";
      else out += fmt::format(",{},{},{},{}", it->second.median, it->second.lo, it->second.hi, it->second.n);
    }
    out += "\n";
  }
  return out;
}

namespace {

// A run ended by SIGKILL that the lab did not send (its own timeout reads
// "lab-timeout"): on Linux that is most often the kernel's OOM killer, and the
// reader's next step is the kernel log and the memory the point asked for.
std::string killed_note(const Summary& summary) {
  const std::string killed = machine::outcome_for_exit_code(128 + SIGKILL);
  std::string points;
  for (const auto& p : summary.points) {
    if (!p.outcomes.contains(killed)) continue;
    const std::string* memory = lookup(p.settings, "memory_mib");
    points += fmt::format("{}{} ({} MiB of guest memory)", points.empty() ? "" : "; ", p.key,
                          memory ? *memory : experiment::find_run_setting("memory_mib")->def);
  }
  if (points.empty()) return "";
  return fmt::format("\n'{}' is a SIGKILL that lockvisor did not send; on Linux it is most often the OOM killer "
                     "(`dmesg | grep -i oom`). Points it ended: {}.\n",
                     killed, points);
}

}  // namespace

std::string summary_markdown(const Scenario& s, const Summary& summary) {
  std::string out = fmt::format("# Lab summary: {}\n\n{}\n\n", s.title, described(s));
  out += fmt::format("{} results. Medians over the completed runs of each point, with the 95% bootstrap "
                     "confidence interval of the median in brackets ({} resamples, seeded: reproducible).\n\n",
                     summary.records, kResamples);
  const std::string unit = throughput_unit(s);
  const std::string per = unit == "ops/s" ? "op" : "acq";
  out += fmt::format("| point | runs | outcomes | throughput ({}) | Jain | p99 latency (ns) | CPU s per 10^6 {} | halts "
                     "(VMM) | kicks (VMM) | halt exits (KVM) | hypercalls (KVM) |\n",
                     unit, per);
  out += "|---|---|---|---|---|---|---|---|---|---|---|\n";
  auto cell = [](const PointSummary& p, const char* metric, double scale = 1) -> std::string {
    const auto it = p.estimates.find(metric);
    if (it == p.estimates.end()) return "n/a";
    const auto& e = it->second;
    return e.n > 1 ? fmt::format("{} [{}, {}]", fmt_num(scale * e.median), fmt_num(scale * e.lo), fmt_num(scale * e.hi))
                   : fmt_num(scale * e.median);
  };
  for (const auto& p : summary.points)
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", p.key, p.runs,
                       outcomes_text(p.outcomes), cell(p, "ops_per_sec"), cell(p, "jain"), cell(p, "latency_p99_ns"),
                       cell(p, "cpu_s_per_mop"), cell(p, "halts"), cell(p, "kicks"), cell(p, "kvm_halt_exits"),
                       cell(p, "kvm_hypercalls"));
  out += killed_note(summary);
  out += "\n## Waits and costs\n\n"
         "Worst and p99.9 acquisition wait in ms and in host time slices (lab.json `machine.host_slice`: how it was "
         "measured), CPU and exits to the VMM per acquisition (exits: whole run, the report has no window figure), "
         "and the worst short-window Jain.\n\n"
         "| point | worst wait (ms) | worst (slices) | p99.9 (ms) | p99.9 (slices) | CPU s per 10^6 acq | exits per acq | "
         "window Jain min |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& p : summary.points)
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", p.key, cell(p, "latency_max_ns", 1e-6),
                       cell(p, "latency_max_slices"), cell(p, "latency_p999_ns", 1e-6), cell(p, "latency_p999_slices"),
                       cell(p, "cpu_s_per_mop"), cell(p, "vmm_exits_per_acq"), cell(p, "window_jain_min"));
  out += numa_bounds_markdown(summary);
  if (!summary.claims.empty()) {
    out += "\n## Comparisons\n\n";
    for (const auto& c : summary.claims) {
      out += c.claim->source.empty() ? fmt::format("- **{}**: {}\n", c.verdict, c.claim->text)
                                     : fmt::format("- **{}**: {} (source: {})\n", c.verdict, c.claim->text,
                                                   c.claim->source);
      for (const auto& f : c.findings) out += fmt::format("  - {}\n", f);
    }
  }
  return out;
}

}  // namespace lockvisor::lab
