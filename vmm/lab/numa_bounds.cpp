#include "vmm/lab/numa_bounds.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "vmm/trace/numa_bound_check.h"

namespace lockvisor::lab {
namespace {

// The lab's `param` setting: key=value pairs separated by spaces
// (vmm/experiment/run_settings.cpp, its `lab` text).
std::vector<std::pair<std::string, std::string>> param_pairs(const SettingValues& settings) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string* text = lookup(settings, "param");
  if (text == nullptr) return out;
  std::istringstream words(*text);
  for (std::string word; words >> word;)
    if (const auto eq = word.find('='); eq != std::string::npos) out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  return out;
}

std::string wait_ms(double ns) { return fmt::format("{:.3f}", ns * 1e-6); }

}  // namespace

std::string numa_bounds_markdown(const Summary& summary) {
  std::string rows;
  for (const auto& p : summary.points) {
    const std::string* lock = lookup(p.settings, "lock");
    if (lock == nullptr || !trace::states_numa_bound(*lock)) continue;
    const auto rules = trace::numa_bound_rules(*lock, param_pairs(p.settings));
    std::string longest = "n/a", median = "n/a", in_time = "-";
    if (const auto v = p.values.find("latency_max_ns"); v != p.values.end() && !v->second.empty()) {
      const double worst = *std::max_element(v->second.begin(), v->second.end());
      longest = fmt::format("{} ({} run{})", wait_ms(worst), v->second.size(), v->second.size() == 1 ? "" : "s");
      if (rules.time_ns > 0) in_time = fmt::format("{:.2f}", worst / static_cast<double>(rules.time_ns));
    }
    if (const auto e = p.estimates.find("latency_max_ns"); e != p.estimates.end()) median = wait_ms(e->second.median);
    rows += fmt::format("| {} | {} | {} | {} | {} | {} |\n", p.key, *lock, trace::promised_bound_text(rules), longest,
                        median, in_time);
  }
  if (rows.empty()) return {};
  return "\n## NUMA locks: longest wait beside the promised bound\n\n"
         "Each NUMA lock's header promises a bound on every run of handoffs to one other node while a waiter waits "
         "(holders, and with the time form on, microseconds; its --param values are the point's). A wait may span "
         "one such run per other node plus the waiter's own node's queue ahead of it, so the longest wait is set "
         "beside the bound, not judged by it: `lockvisor trace-check` judges each run of a traced run against it "
         "(docs/vnuma.md). Last column: the longest wait in units of the time threshold.\n\n"
         "| point | lock | promised | longest wait (ms) | median worst wait (ms) | longest / time threshold |\n"
         "|---|---|---|---|---|---|\n" +
         rows;
}

}  // namespace lockvisor::lab
