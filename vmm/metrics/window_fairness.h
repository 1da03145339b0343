// Short-window fairness: totals over a whole run hide starvation under time
// slicing (four vCPUs on one host CPU each get a quarter of the run, so
// their totals look fair whatever the lock does, while inside every 10 ms
// slice one vCPU may do all the work). Each CPU counts its acquisitions per
// window of fixed length from the common start (abi::WorkloadStats::
// window_ops); here Jain's index is taken over the CPUs in each window.
//
// Only windows that every CPU ran through completely are analysed (a CPU
// that finished its fixed work early would otherwise look starved). A window
// in which no CPU made progress (e.g. the lock holder was preempted) is
// counted as starved and as idle but has no Jain index (0/0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lockvisor::metrics {

struct WindowFairness {
  std::size_t windows = 0;          // windows analysed
  std::size_t starved_windows = 0;  // windows in which at least one CPU completed no acquisition
  std::size_t idle_windows = 0;     // windows in which no CPU completed one (no Jain index)
  // Jain over the CPUs' counts, over the analysed non-idle windows; nullopt
  // when every window was idle.
  std::optional<double> jain_min;
  std::optional<double> jain_median;  // nearest rank (summary.h)
};

// per_cpu[c][w]: CPU c's acquisitions in window w; `windows` of them are
// analysed (each per_cpu[c] must have at least that many; throws
// lockvisor::Error otherwise). nullopt when there are no CPUs or no windows.
std::optional<WindowFairness> window_fairness(std::span<const std::vector<std::uint64_t>> per_cpu, std::size_t windows);

}  // namespace lockvisor::metrics
