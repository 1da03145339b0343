#include "vmm/lab/lab_report.h"

#include <sys/utsname.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "vmm/host/cpu_set.h"
#include "vmm/host/emulation.h"
#include "vmm/lab/host_slice.h"
#include "vmm/lab/metrics.h"
#include "vmm/lab/placement.h"
#include "vmm/lab/platform_part.h"
#include "vmm/kvm/kvm_system.h"

namespace lockvisor::lab {
namespace {

std::string cpuinfo_field(const std::string& name) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name, 0) == 0 && line.find(':') != std::string::npos) {
      const auto colon = line.find(':');
      if (line.substr(0, colon).find_last_not_of(" \t") + 1 != name.size()) continue;
      auto value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      return value;
    }
  return "unknown";
}

std::string best_lock_lines(const std::string& compared, const Summary& summary) {
  // Per placement and other settings (all axes but the compared one), the
  // value with the highest median throughput, and how far ahead of the
  // runner-up it is. In a multi-VM scenario the VMs of a point are compared
  // with each other.
  const bool multi_vm = compared == "vm";
  std::map<std::string, std::vector<const PointSummary*>> groups;
  for (const auto& p : summary.points) {
    std::string group;
    for (const auto& [a, l] : p.labels)
      if (a != compared) group += (group.empty() ? "" : ",") + a + "=" + l;
    groups[group.empty() ? "(all)" : group].push_back(&p);
  }
  std::string out;
  for (const auto& [group, points] : groups) {
    const PointSummary* best = nullptr;
    const PointSummary* second = nullptr;
    auto tput = [](const PointSummary* p) {
      const auto it = p->estimates.find("ops_per_sec");
      return it == p->estimates.end() ? -1.0 : it->second.median;
    };
    for (const auto* p : points) {
      if (tput(p) < 0) continue;
      if (!best || tput(p) > tput(best)) {
        second = best;
        best = p;
      } else if (!second || tput(p) > tput(second)) {
        second = p;
      }
    }
    if (!best) continue;
    // The compared axis's label names the variant ("pvbounded-running" is
    // lock pvbounded with a parameter); the setting is the fallback.
    auto lock = [&](const PointSummary* p) {
      const auto* l = lookup(p->settings, multi_vm ? "lock" : compared);
      std::string name = l ? *l : std::string("?");
      for (const auto& [a, v] : p->labels)
        if (a == (multi_vm ? "lock" : compared)) name = v;
      for (const auto& [a, v] : p->labels)
        if (multi_vm && a == "vm") name = "VM " + v + " (" + name + ")";
      return name;
    };
    if (!second) {
      out += fmt::format("| {} | {} | {:.0f} | | |\n", group, lock(best), tput(best));
      continue;
    }
    const auto ratio = bootstrap_ratio(best->values.at("ops_per_sec"), second->values.at("ops_per_sec"),
                                       fnv1a(best->key + second->key));
    out += fmt::format("| {} | {} | {:.0f} | {} | {:.2f}x [{:.2f}, {:.2f}]{} |\n", group, lock(best), tput(best),
                       lock(second), ratio.median, ratio.lo, ratio.hi,
                       ratio.lo > 1 ? "" : " (within the spread)");
  }
  return out;
}

// A metric in words: "throughput" rather than ops_per_sec.
std::string metric_words(const std::string& metric, const char* unit) {
  if (metric == "ops_per_sec") return std::string(unit) == "ops/s" ? "throughput (operations/s)" : "throughput (acquisitions/s)";
  if (metric == "latency_max_ns") return "worst wait";
  if (metric == "latency_p99_ns") return "p99 wait";
  if (metric == "latency_p999_ns") return "p99.9 wait";
  if (metric == "jain") return "fairness (Jain index over per-CPU operations)";
  if (const auto* m = find_metric(metric)) return fmt::format("{} ({})", metric, m->unit);
  return metric;
}

std::string where_words(const Claim& c) {
  std::string out;
  for (const auto& [axis, labels] : c.where) {
    std::string list;
    for (std::size_t i = 0; i < labels.size(); ++i)
      list += (i == 0 ? "" : i + 1 == labels.size() ? " and " : ", ") + labels[i];
    out += fmt::format("{}{} {}", out.empty() ? " at " : "; ", axis, list);
  }
  return out;
}

// What the claim expects this run to show, in plain words.
std::string expectation_words(const Claim& c, const char* unit) {
  if (c.kind == "level") {
    const auto metric = metric_words(c.metric, unit);
    const auto bound = c.expect == "above"   ? fmt::format("above {}", c.low)
                       : c.expect == "below" ? fmt::format("below {}", c.high)
                                             : fmt::format("between {} and {}", c.low, c.high);
    return fmt::format("{}'s {} is {}{} (the 95% interval of its median {})", c.a, metric, bound, where_words(c),
                       c.expect == "between" ? "inside that range" : "beyond that value");
  }
  if (c.kind != "ratio")
    return fmt::format("{} run ends '{}'{}", c.expect == "some" ? "at least one" : "no", c.outcome, where_words(c));
  const auto metric = metric_words(c.metric, unit);
  const char* relation = c.expect == "a>b" ? "higher than" : c.expect == "a<b" ? "lower than" : "the same as";
  // With a factor the line is factor x b: "higher than 0.9x tas's".
  const auto of_b = c.factor == 1 ? c.b : fmt::format("{:g}x {}", c.factor, c.b);
  const auto line = fmt::format("{:g}", c.factor);
  return fmt::format("{}'s {} is {} {}'s{} (the 95% interval of the ratio {})", c.a, metric, relation, of_b,
                     where_words(c),
                     c.expect == "a>b" ? "above " + line : c.expect == "a<b" ? "below " + line : "contains " + line);
}

bool matches(const std::map<std::string, std::vector<std::string>>& where, const PointSummary& p) {
  for (const auto& [axis, labels] : where) {
    bool found = false;
    for (const auto& [a, l] : p.labels)
      if (a == axis && std::find(labels.begin(), labels.end(), l) != labels.end()) found = true;
    if (!found) return false;
  }
  return true;
}

// Per setting (all axes but lock) the goal selects: the locks inside the
// goal region of the trade-off picture, by their medians.
std::string goal_lines(const GoalSpec& goal, const std::string& compared, const char* unit, const Summary& summary) {
  std::map<std::string, std::vector<const PointSummary*>> groups;
  for (const auto& p : summary.points) {
    if (!matches(goal.where, p)) continue;
    std::string group;
    for (const auto& [a, l] : p.labels)
      if (a != compared) group += (group.empty() ? "" : ",") + a + "=" + l;
    groups[group.empty() ? "(all)" : group].push_back(&p);
  }
  auto median = [](const PointSummary* p, const char* metric) -> std::optional<double> {
    const auto it = p->estimates.find(metric);
    if (it == p->estimates.end()) return std::nullopt;
    return it->second.median;
  };
  auto lock = [&](const PointSummary* p) {
    for (const auto& [a, v] : p->labels)
      if (a == compared) return v;
    const auto* l = lookup(p->settings, compared);
    return l ? *l : std::string("?");
  };
  std::string out;
  for (const auto& [group, points] : groups) {
    std::optional<double> floor = goal.min_ops_per_sec;
    if (goal.min_throughput_ratio)
      for (const auto* p : points)
        if (lock(p) == goal.relative_to)
          if (const auto ref = median(p, "ops_per_sec"))
            floor = std::max(floor.value_or(0), *goal.min_throughput_ratio * *ref);
    std::string inside, outside;
    for (const auto* p : points) {
      const auto tput = median(p, "ops_per_sec");
      const auto wait = median(p, "latency_max_ns");
      if (!tput || !wait) continue;
      const bool ok =
          (!goal.max_worst_wait_ms || *wait <= *goal.max_worst_wait_ms * 1e6) && (!floor || *tput >= *floor);
      auto& list = ok ? inside : outside;
      // The median of the runs' worst waits decides (as in the picture);
      // the longest single wait of all the point's runs is stated beside it.
      const auto waits = p->values.find("latency_max_ns");
      const double longest = waits == p->values.end() || waits->second.empty()
                                 ? *wait
                                 : *std::max_element(waits->second.begin(), waits->second.end());
      list += fmt::format("{}{} ({:.0f} {}, worst wait {:.2f} ms, longest of {} runs {:.2f} ms)",
                          list.empty() ? "" : ", ", lock(p), *tput, unit, *wait * 1e-6,
                          waits == p->values.end() ? 0 : waits->second.size(), longest * 1e-6);
    }
    out += fmt::format("- {}: {}{}\n", group, inside.empty() ? "no lock meets it" : "met by " + inside,
                       outside.empty() ? "" : "; outside it: " + outside);
  }
  return out;
}

// The first three fields of /proc/loadavg ("1.00 0.50 0.25"): how busy the
// host was when the lab started (other jobs skew every absolute number).
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown";
  return one + " " + five + " " + fifteen;
}

}  // namespace

nlohmann::json machine_description() {
  utsname uts{};
  ::uname(&uts);
  std::string kvm_kind;
  try {
    kvm_kind = kvm::backend_name(kvm::detect_backend());
  } catch (const std::exception& e) {
    kvm_kind = std::string("unavailable: ") + e.what();
  }
  nlohmann::json description = {{"cpu_vendor", cpuinfo_field("vendor_id")},
                                 {"cpu_family", cpuinfo_field("cpu family")},
                                 {"cpu_model", cpuinfo_field("model")},
                                 {"cpu_stepping", cpuinfo_field("stepping")},
                                 {"cpu_model_name", cpuinfo_field("model name")},
                                 {"host_cpus", host::host_cpu_count()},
                                 {"allowed_cpus", host::format_cpu_list(host::allowed_cpus())},
                                 {"kernel", uts.release},
                                 {"kvm", kvm_kind},
                                 {"host_slice", host_slice_description()},
                                 {"loadavg_at_start", loadavg()}};
  description.update(host::emulation_json(host::emulation()));
  return description;
}

std::string with_emulation_note(std::string markdown, const nlohmann::json& machine) {
  const auto warning = host::emulation_warning(machine);
  if (warning.empty()) return markdown;
  const auto after_title = markdown.find("\n\n");
  const auto at = after_title == std::string::npos ? markdown.size() : after_title + 2;
  return markdown.insert(at, fmt::format("**{}.**\n\n", warning));
}

std::optional<double> host_slice_ns(const nlohmann::json& manifest) {
  const nlohmann::json::json_pointer ptr("/machine/host_slice/ns");
  if (!manifest.contains(ptr) || !manifest.at(ptr).is_number()) return std::nullopt;
  return manifest.at(ptr).get<double>();
}

std::string report_markdown(const Scenario& s, const Summary& summary, const nlohmann::json& manifest,
                            const std::string& plots_note, const std::string& timelines) {
  const auto& m = manifest.at("machine");
  std::string out = with_emulation_note(fmt::format("# {}\n\n{}\n\n", s.title, described(s)), m);
  // A modelled remote cost is no measurement: say so whatever the scenario's
  // own text says (docs/vnuma.md).
  std::string modelled;
  for (const auto& p : summary.points)
    if (const auto* ns = lookup(p.settings, "vnuma_remote_ns"); ns != nullptr && *ns != "0")
      modelled += (modelled.empty() ? "" : ", ") + p.key;
  if (!modelled.empty())
    out += fmt::format("**Modelled remote cost.** These points run with vnuma_remote_ns > 0: a lock taken after a "
                       "release on another virtual node busy-waits that long first. Their figures are a model of "
                       "remote memory, not a measurement of one: {}.\n\n",
                       modelled);
  out += "## Verdicts: what published work and this project's goals expect, and what this run shows\n\n";
  if (summary.claims.empty()) out += "This scenario states no claims.\n";
  for (const auto& c : summary.claims) {
    out += fmt::format("### {}: {}\n\n", c.verdict, c.claim->text);
    if (!c.claim->source.empty()) out += fmt::format("- Source: {}\n", c.claim->source);
    out += fmt::format("- Expected here: {}\n", expectation_words(*c.claim, throughput_unit(s)));
    out += "- This run:\n";
    for (const auto& f : c.findings) out += fmt::format("  - {}\n", f);
    out += "\n";
  }
  if (s.goal.enabled) {
    out += fmt::format("## This project's goal\n\n{}\n\nBy the medians of this run (the shaded region of "
                       "tradeoff.png):\n\n",
                       s.goal.text);
    out += goal_lines(s.goal, compared_axis(s), throughput_unit(s), summary);
    out += "\n";
  }
  const auto compared = compared_axis(s);
  out += fmt::format("## Headline: the fastest {} per setting\n\n"
                     "| setting | fastest | median {} | runner-up | fastest / runner-up [95% CI] |\n|---|---|---|---|---|\n",
                     compared == "lock" ? "lock" : compared == "vm" ? "VM" : compared, throughput_unit(s));
  out += best_lock_lines(compared, summary);
  out += fmt::format("\n## The platform's part\n\nHost: {} family {} model {} stepping {}, Linux {}, KVM {}. ",
                     m.value("cpu_vendor", "?"), m.value("cpu_family", "?"), m.value("cpu_model", "?"),
                     m.value("cpu_stepping", "?"), m.value("kernel", "?"), m.value("kvm", "?"));
  if (m.value("emulated", false))
    out += fmt::format("That is the nested machine's emulated CPU, not hardware; the outer host is {}. ",
                       host::outer_host_words(m));
  if (m.contains("platform") && m.at("platform").is_object())
    out += platform_part_markdown(m.at("platform"));
  else
    out += "Exit costs were not measured when this lab started (lab.json has no machine.platform).\n";
  if (!s.platform_note.empty()) out += fmt::format("\n{}\n", s.platform_note);
  out += fmt::format("\n## Plots\n\n{}\n", plots_note);
  out += timelines;
  out += placement_markdown(manifest.value("placement", nlohmann::json()));
  out += "\n## Machine and run\n\n";
  out += fmt::format("- CPU: {} family {} model {} stepping {} (model name: {}), {} CPUs, lab used {}\n",
                     m.value("cpu_vendor", "?"), m.value("cpu_family", "?"), m.value("cpu_model", "?"),
                     m.value("cpu_stepping", "?"), m.value("cpu_model_name", "?"), m.value("host_cpus", 0),
                     m.value("allowed_cpus", "?"));
  out += fmt::format("- Host kernel: {}\n- KVM: {}\n", m.value("kernel", "?"), m.value("kvm", "?"));
  if (m.value("emulated", false))
    out += fmt::format("- Emulated: yes, inside tools/nested-kvm (QEMU TCG); outer host: {}\n", host::outer_host_words(m));
  out += fmt::format("- Host load average (1, 5, 15 min) when the lab started: {}\n", m.value("loadavg_at_start", "not recorded"));
  if (const auto slice = host_slice_ns(manifest)) {
    const auto& h = m.at("host_slice");
    const auto ns_or = [&](const char* key) {
      return h.contains(key) && h.at(key).is_number() ? fmt::format("{:.2f} ms", h.at(key).get<double>() * 1e-6)
                                                      : std::string("unknown");
    };
    out += fmt::format("- Host time slice (waits \"in slices\" are divided by it): {:.2f} ms = {}; {}. Cross-checks: "
                       "EEVDF slice request (se.slice) {}, debugfs base_slice_ns {}\n",
                       *slice * 1e-6, h.value("definition", "?"), h.value("source", "?"), ns_or("eevdf_slice_ns"),
                       ns_or("base_slice_ns"));
  } else {
    out += "- Host time slice: unknown (lab.json machine.host_slice): waits in slices are n/a\n";
  }
  std::string fixed;
  for (const auto& [name, value] : s.fixed) {
    // A VM's label entry only marks the VM (settings.h); its settings read "VM unfair: lock=unfair".
    if (name.rfind(kVmSettingPrefix, 0) == 0 && name.ends_with(":label")) continue;
    std::string shown = name;
    if (name.rfind(kVmSettingPrefix, 0) == 0) {
      const auto colon = name.find(':', kVmSettingPrefix.size());
      shown = fmt::format("VM {}: {}", name.substr(kVmSettingPrefix.size(), colon - kVmSettingPrefix.size()),
                          name.substr(colon + 1));
    }
    fixed += fmt::format("{}{}={}", fixed.empty() ? "" : ", ", shown, value);
  }
  for (const auto& vm : s.vms)
    if (vm.settings.empty()) fixed += fmt::format("{}VM {}", fixed.empty() ? "" : ", ", vm.label);
  out += fmt::format("- Settings every point shares: {}; other backend knobs at `lockvisor run`'s defaults\n",
                     fixed.empty() ? "none" : fixed);
  out += fmt::format("- Repeats per point: {}; results: {} runs\n", manifest.value("repeats", 0), summary.records);
  out += fmt::format("- lockvisor version: {}\n", manifest.value("version", "?"));
  out += fmt::format("- Command: `{}`\n", manifest.value("command", "?"));
  out += "\nPer-point medians and intervals: summary.md and summary.csv; every run: results.jsonl; each run's output: "
         "logs/.\n";
  return out;
}

}  // namespace lockvisor::lab
