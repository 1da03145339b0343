#include "vmm/metrics/window_fairness.h"

#include <algorithm>

#include "vmm/metrics/summary.h"
#include "vmm/util/error.h"

namespace lockvisor::metrics {

std::optional<WindowFairness> window_fairness(std::span<const std::vector<std::uint64_t>> per_cpu, std::size_t windows) {
  if (per_cpu.empty() || windows == 0) return std::nullopt;
  for (const auto& cpu : per_cpu)
    if (cpu.size() < windows) fail("window fairness: a CPU has {} windows, {} analysed", cpu.size(), windows);
  WindowFairness f;
  f.windows = windows;
  std::vector<double> jains;
  std::vector<std::uint64_t> counts(per_cpu.size());
  for (std::size_t w = 0; w < windows; ++w) {
    for (std::size_t c = 0; c < per_cpu.size(); ++c) counts[c] = per_cpu[c][w];
    const Fairness one = *compute_fairness(counts);
    if (one.min == 0) ++f.starved_windows;
    if (one.max == 0) {
      ++f.idle_windows;
      continue;
    }
    jains.push_back(one.jain);
  }
  if (!jains.empty()) {
    std::ranges::sort(jains);
    f.jain_min = jains.front();
    f.jain_median = jains[nearest_rank(jains.size(), 50) - 1];
  }
  return f;
}

}  // namespace lockvisor::metrics
