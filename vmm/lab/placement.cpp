#include "vmm/lab/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "vmm/experiment/run_settings.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/host_cpus.h"
#include "vmm/host/host_numa.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {
namespace {

constexpr std::string_view kSharedPrefix = "shared:";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

void erase(SettingValues& values, const std::string& name) {
  values.erase(std::remove_if(values.begin(), values.end(), [&](const auto& nv) { return nv.first == name; }),
               values.end());
}

// vCPUs [first, last] in the explicit --vnuma form's spelling.
std::string vcpu_range(unsigned first, unsigned last) {
  return first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
}

// Host CPUs in the explicit --vnuma form's spelling (ranges joined by '+').
std::string node_cpus(const std::vector<int>& cpus) { return replace_all(host::format_cpu_list(cpus), ",", "+"); }

// Nodes of `cpus` each (in order), vCPUs 0..vcpus-1 split by the nodes'
// weights: node k gets the vCPUs up to its cumulative share.
std::string explicit_vnuma(const std::vector<std::vector<int>>& nodes, const std::vector<std::size_t>& weights,
                           unsigned vcpus, const std::string& word) {
  std::size_t total = 0;
  for (auto w : weights) total += w;
  if (vcpus < nodes.size()) fail("vnuma '{}': {} vCPUs cannot fill {} nodes", word, vcpus, nodes.size());
  std::string out;
  unsigned first = 0;
  std::size_t cumulative = 0;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    cumulative += weights[k];
    const auto end = static_cast<unsigned>(vcpus * cumulative / total);
    if (end <= first) fail("vnuma '{}': {} vCPUs leave a node without one", word, vcpus);
    out += fmt::format("{}{}@{}", out.empty() ? "" : ",", vcpu_range(first, end - 1), node_cpus(nodes[k]));
    first = end;
  }
  return out;
}

std::string resolve_vnuma(const std::string& word, unsigned vcpus, const std::vector<int>& cpus) {
  if (word.rfind(kSharedPrefix, 0) == 0) {
    const std::string_view n_text = std::string_view(word).substr(kSharedPrefix.size());
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(n_text.data(), n_text.data() + n_text.size(), n);
    if (n_text.empty() || ec != std::errc() || end != n_text.data() + n_text.size() || n < 2)
      fail("vnuma '{}': shared:N with N >= 2 nodes", word);
    return explicit_vnuma(std::vector<std::vector<int>>(n, cpus), std::vector<std::size_t>(n, 1), vcpus, word);
  }
  std::vector<std::vector<int>> nodes;
  std::vector<std::size_t> weights;
  for (const auto& node : host::host_numa_nodes()) {
    std::vector<int> mine;
    std::set_intersection(node.cpus.begin(), node.cpus.end(), cpus.begin(), cpus.end(), std::back_inserter(mine));
    if (mine.empty()) continue;
    weights.push_back(mine.size());
    nodes.push_back(std::move(mine));
  }
  if (nodes.empty()) fail("vnuma 'host': this host reports no NUMA node with the CPUs {}", host::format_cpu_list(cpus));
  return explicit_vnuma(nodes, weights, vcpus, word);
}

// The settings of one scope: the point's own ("") or a VM's ("vm:LABEL:").
void resolve_scope(SettingValues& settings, const std::string& prefix, const std::vector<int>& outer_cpus,
                   std::vector<PlacementTerm>& terms) {
  std::vector<int> cpus = outer_cpus;
  const auto name = [&](const char* setting) { return prefix + setting; };
  try {
    if (const std::string* pcpus = lookup(settings, name("pcpus"))) {
      cpus = host::resolve_host_cpus(*pcpus, outer_cpus);
      if (!host::is_cpu_list(*pcpus)) {
        const auto text = host::format_cpu_list(cpus);
        terms.push_back({name("pcpus"), *pcpus, text});
        assign(settings, name("pcpus"), text);
      }
    }
  } catch (const Error& e) {
    fail("{}: {}", name("pcpus"), e.what());
  }
  unsigned vcpus = 0;
  if (const std::string* v = lookup(settings, name("vcpus"))) {
    try {
      vcpus = host::resolve_vcpus(*v, cpus.size());
    } catch (const Error& e) {
      fail("{}: {}", name("vcpus"), e.what());
    }
    if (!all_digits(*v)) {
      terms.push_back({name("vcpus"), *v, std::to_string(vcpus)});
      assign(settings, name("vcpus"), std::to_string(vcpus));
    }
  }
  const std::string* vnuma = lookup(settings, name("vnuma"));
  if (vnuma == nullptr || !(vnuma->rfind(kSharedPrefix, 0) == 0 || *vnuma == "host")) return;
  if (vcpus == 0) fail("{} '{}': needs vcpus beside it", name("vnuma"), *vnuma);
  const std::string word = *vnuma;
  const auto text = resolve_vnuma(word, vcpus, cpus);
  terms.push_back({name("vnuma"), word, text});
  assign(settings, name("vnuma"), text);
  // The explicit form names its host CPUs; `run` refuses --pcpus beside it.
  erase(settings, name("pcpus"));
}

}  // namespace

bool takes_placement_words(const std::string& name) { return name == "pcpus" || name == "vcpus" || name == "vnuma"; }

void check_placement_word(const std::string& name, const std::string& value) {
  if (value.find("{n}") != std::string::npos) return;
  if (name == "pcpus") {
    // A host as large as any: only the word's form can fail against it.
    static const std::vector<int> kAnyHost = [] {
      std::vector<int> cpus(static_cast<std::size_t>(kMaxMinCpus));
      for (std::size_t i = 0; i < cpus.size(); ++i) cpus[i] = static_cast<int>(i);
      return cpus;
    }();
    host::resolve_host_cpus(value, kAnyHost);
  } else if (name == "vcpus") {
    host::resolve_vcpus(value, 1);
  }
}

unsigned own_vcpu_limit() { return static_cast<unsigned>(experiment::find_run_setting("vcpus")->max); }

std::vector<unsigned> sweep_counts(std::size_t cpus) {
  std::vector<unsigned> counts;
  for (std::size_t n = 1; n < cpus; n *= 2) counts.push_back(static_cast<unsigned>(n));
  return counts;
}

void expand_for_host(Scenario& s) {
  const auto cpus = s.host_cpus.size();
  for (auto& axis : s.axes) {
    std::vector<AxisValue> values;
    for (const auto& v : axis.values) {
      if (v.min_cpus > cpus) {
        const LeftOutValue out{axis.name, v.label, v.min_cpus};
        if (std::find(s.left_out.begin(), s.left_out.end(), out) == s.left_out.end()) s.left_out.push_back(out);
        continue;
      }
      if (v.sweep.empty()) {
        values.push_back(v);
        continue;
      }
      for (unsigned n : sweep_counts(s.host_cpus.size())) {
        AxisValue one{replace_all(v.label, "{n}", std::to_string(n)), {}, {}, 0};
        for (const auto& [setting, value] : v.settings)
          one.settings.emplace_back(setting, replace_all(value, "{n}", std::to_string(n)));
        if (std::none_of(values.begin(), values.end(), [&](const AxisValue& o) { return o.label == one.label; }))
          values.push_back(std::move(one));
      }
    }
    if (values.empty())
      fail("axis '{}': no value on {} host CPU(s) (a sweep's values and those with a larger min_cpus are left out); "
           "give it a value that every host has",
           axis.name, cpus);
    axis.values = std::move(values);
  }
}

std::vector<PlacementTerm> resolve_placement(SettingValues& settings, const std::vector<int>& usable) {
  std::vector<PlacementTerm> terms;
  resolve_scope(settings, "", usable, terms);
  const std::string* point_pcpus = lookup(settings, "pcpus");
  const auto point_cpus = point_pcpus ? host::parse_cpu_list(*point_pcpus) : usable;
  std::vector<std::string> prefixes;
  for (const auto& [name, value] : settings) {
    if (name.rfind(kVmSettingPrefix, 0) != 0) continue;
    const auto prefix = name.substr(0, name.find(':', kVmSettingPrefix.size()) + 1);
    if (std::find(prefixes.begin(), prefixes.end(), prefix) == prefixes.end()) prefixes.push_back(prefix);
  }
  for (const auto& prefix : prefixes) resolve_scope(settings, prefix, point_cpus, terms);
  return terms;
}

nlohmann::json placement_description(const std::vector<int>& host_cpus, const std::string& source,
                                     const std::vector<std::vector<PlacementTerm>>& terms,
                                     const std::vector<LeftOutValue>& left_out,
                                     const std::vector<LeftOutPoint>& left_out_points, unsigned vcpu_limit,
                                     const std::string& vcpu_limit_source) {
  std::vector<PlacementTerm> distinct;
  for (const auto& point : terms)
    for (const auto& t : point)
      if (std::find(distinct.begin(), distinct.end(), t) == distinct.end()) distinct.push_back(t);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : distinct) list.push_back({{"setting", t.setting}, {"word", t.word}, {"resolved", t.resolved}});
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : left_out) out.push_back({{"axis", v.axis}, {"label", v.label}, {"min_cpus", v.min_cpus}});
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : left_out_points) points.push_back({{"key", p.key}, {"vcpus", p.vcpus}, {"why", p.why}});
  const unsigned limit = vcpu_limit != 0 ? vcpu_limit : own_vcpu_limit();
  return {{"host_cpus", host::format_cpu_list(host_cpus)},
          {"cpu_count", host_cpus.size()},
          {"source", source},
          {"terms", list},
          {"left_out", out},
          {"left_out_points", points},
          {"vcpu_limit", limit},
          {"vcpu_limit_source", vcpu_limit != 0 ? vcpu_limit_source : std::string(kOwnVcpuLimit)}};
}

std::pair<unsigned, std::string> placement_vcpu_limit(const nlohmann::json& placement) {
  if (!placement.is_object() || !placement.contains("vcpu_limit")) return {own_vcpu_limit(), kOwnVcpuLimit};
  return {placement.at("vcpu_limit").get<unsigned>(), placement.value("vcpu_limit_source", std::string(kOwnVcpuLimit))};
}

std::string left_out_line(const nlohmann::json& placement) {
  std::string line;
  const auto out = placement.value("left_out", nlohmann::json::array());
  if (!out.empty()) {
    line = fmt::format("Left out on this host (they need more than the {} CPUs it is planned for): ",
                       placement.value("cpu_count", 0));
    for (std::size_t i = 0; i < out.size(); ++i)
      line += fmt::format("{}{} `{}` (at least {} CPUs)", i ? ", " : "", out[i].value("axis", "?"),
                          out[i].value("label", "?"), out[i].value("min_cpus", 0));
    line += ".";
  }
  const auto points = placement.value("left_out_points", nlohmann::json::array());
  if (!points.empty()) {
    line += fmt::format("{}Left out, their vCPUs beyond a limit on this host ({} CPUs; a VM may have {} vCPUs here: "
                        "{}): ",
                        line.empty() ? "" : " ", placement.value("cpu_count", 0),
                        placement.value("vcpu_limit", own_vcpu_limit()),
                        placement.value("vcpu_limit_source", std::string(kOwnVcpuLimit)));
    for (std::size_t i = 0; i < points.size(); ++i)
      line += fmt::format("{}`{}` ({} vCPUs: {})", i ? ", " : "", points[i].value("key", "?"),
                          points[i].value("vcpus", 0), points[i].value("why", "?"));
    line += ".";
  }
  // Native twins only a VM runs, grouped by reason (one reason usually
  // covers a whole axis value: every lock's twin at inject=waiter-1ms).
  std::map<std::string, std::vector<std::string>> by_reason;
  if (const auto vm_only = placement.find("vm_only"); vm_only != placement.end())
    for (const auto& [key, why] : vm_only->items()) by_reason[why.get<std::string>()].push_back(key);
  if (!by_reason.empty()) {
    line += fmt::format("{}Native twins left out (only a VM runs them): ", line.empty() ? "" : " ");
    bool first = true;
    for (const auto& [why, keys] : by_reason) {
      line += fmt::format("{}{} point{}, e.g. `{}` ({})", first ? "" : "; ", keys.size(), keys.size() == 1 ? "" : "s",
                          keys.front(), why);
      first = false;
    }
    line += ".";
  }
  return line;
}

std::string placement_markdown(const nlohmann::json& placement) {
  if (!placement.is_object()) return {};
  std::string out = fmt::format(
      "\n## Placement: this lab's host-relative terms\n\nPlanned for host CPUs {} ({} CPUs; {}).",
      placement.value("host_cpus", "?"), placement.value("cpu_count", 0), placement.value("source", "?"));
  const auto terms = placement.value("terms", nlohmann::json::array());
  if (const auto left = left_out_line(placement); !left.empty()) out += " " + left;
  if (terms.empty()) return out + " Every placement names its CPUs and counts itself.\n";
  out += " Each term and what it resolved to:\n\n| setting | term | resolved |\n|---|---|---|\n";
  for (const auto& t : terms)
    out += fmt::format("| {} | `{}` | `{}` |\n", t.value("setting", "?"), t.value("word", "?"), t.value("resolved", "?"));
  return out;
}

}  // namespace lockvisor::lab
