// The figures a reader compares lock strategies by, computed from one
// LockRun (guest or native) as typed values; lock_run.cpp turns them into
// JSON and the human summary.
//
// Fairness has three views, because each hides something:
//   * over per-CPU rates (ops / that CPU's finish time): meaningful for both
//     run kinds; with --iterations every CPU does the same number of
//     operations, so Jain over counts is 1 by construction, while the rates
//     and the finish times still show who waited;
//   * the spread of finish times (max/min, cv): the "spread of per-task
//     time" for fixed-work runs reported in Waiman Long's qspinlock series
//     (LKML, March 2014);
//   * short windows (metrics/window_fairness.h): starvation that totals
//     average away under time slicing.
// Host-side costs come twice: `total` over the threads' whole life (boot,
// barriers, reporting) and `window` between the workload's window marks.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "locks/lock_events.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/metrics/summary.h"
#include "vmm/metrics/window_fairness.h"

namespace lockvisor::lockstat {

struct LatencyFigures {
  std::uint64_t count = 0;  // acquisitions timed
  double p50_ns = 0, p90_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0, mean_ns = 0;
};

// Host-side cost of the CPUs (vCPU threads or native threads), summed.
struct UsageFigures {
  double cpu_seconds = 0;
  std::uint64_t involuntary_switches = 0;
  std::optional<std::uint64_t> steal_ns;          // run-queue wait; nullopt when any CPU lacks it
  std::optional<std::uint64_t> host_preemptions;  // KVM stat (whole life only)
  double ops_per_cpu_second = 0;                  // ops_total / cpu_seconds (0 without CPU time)
};

// Acquisitions by how they were made (locks::AcqPath, guest/locks/lock_events.h).
// Every path but `fast` is its own lock event; fast is what remains of a
// CPU's acquisitions. The counts are the guest's word: a CPU whose path
// events add up to more than its acquisitions gets fast = 0 and the excess
// as `invalid` (a count that cannot be an acquisition), never a wrapped
// number.
struct PathFigures {
  std::array<std::uint64_t, locks::kAcqPathCount> by_path{};
  std::uint64_t invalid = 0;
};
PathFigures path_figures(const abi::WorkloadStats& stats);

struct WindowFigures {
  double window_ms = 0;          // one window's length
  metrics::WindowFairness fairness;
};

struct LockMetrics {
  double duration_s = 0;  // the latest finish time (common start -> last CPU's end of loop)
  std::uint64_t ops_total = 0;
  double ops_per_sec = 0;
  std::vector<std::uint64_t> per_cpu_ops;
  std::vector<double> per_cpu_finish_s;     // common start -> this CPU's end of loop
  std::vector<double> per_cpu_ops_per_sec;  // ops / finish time (0 when the CPU has no finish time)
  std::optional<metrics::Spread> fairness_rate;    // over per_cpu_ops_per_sec
  bool imbalanced = false;                         // fastest rate > 2 x slowest (locktorture's ???)
  std::optional<metrics::Fairness> fairness_ops;   // over per_cpu_ops
  std::optional<metrics::Spread> finish_spread;    // over per_cpu_finish_s
  std::optional<WindowFigures> windows;            // nullopt: no windows recorded or none complete
  LatencyFigures latency;
  std::optional<double> ns_per_lock_unlock;        // uncontended only
  std::uint64_t violations = 0;
  std::map<std::string, std::uint64_t> lock_events;                 // every LockEvent, summed
  std::vector<std::map<std::string, std::uint64_t>> lock_events_per_cpu;  // non-zero ones
  PathFigures paths;                        // summed over CPUs (saturating)
  std::vector<PathFigures> paths_per_cpu;
  // Acquisitions that bypassed a queued waiter (locks::acq_path_bypasses_queue:
  // steal, borrow) over all acquisitions, from `paths`; nullopt without
  // acquisitions or when the guest's path counts do not add up (invalid > 0).
  std::optional<double> steal_fraction;
  UsageFigures total;                  // threads' whole life
  std::optional<UsageFigures> window;  // measured window only; nullopt unless every CPU was sampled at both marks
  std::optional<bool> pv_kicks_match_vmm;  // guest runs with KICK_CPU kicks: guest pv_kick == VMM kicks
  std::optional<bool> pv_halts_match_vmm;  // guest runs: guest pv_wait halts == VMM halts
  // Lock handoffs (WorkloadStats::handoffs_*), summed: to another CPU of the
  // releaser's virtual node, to a CPU of another node, to the releaser
  // itself. handoff_locality = local / (local + remote), the fraction of
  // handoffs between two vCPUs that stayed within one node; nullopt without
  // any such handoff.
  std::uint64_t handoffs_local = 0, handoffs_remote = 0, handoffs_self = 0;
  std::optional<double> handoff_locality;
  // With LockRun::vcpu_node: per node, its CPUs' acquisitions over the run's
  // duration.
  std::vector<double> per_node_ops_per_sec;
};

LockMetrics analyse(const LockRun& run);

// TSC cycles to nanoseconds (0 when the TSC rate is unknown).
double cycles_to_ns(double cycles, std::uint64_t tsc_khz);

}  // namespace lockvisor::lockstat
