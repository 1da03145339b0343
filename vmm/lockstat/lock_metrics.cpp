#include "vmm/lockstat/lock_metrics.h"

#include <algorithm>
#include <iterator>

#include "locks/lock_events.h"
#include "vmm/lockstat/saturating.h"

namespace lockvisor::lockstat {

double cycles_to_ns(double cycles, std::uint64_t tsc_khz) {
  return tsc_khz ? cycles * 1e6 / static_cast<double>(tsc_khz) : 0;
}

namespace {

// Percentile p of the merged histogram, in cycles: the midpoint of the
// nearest-rank bucket, clamped to the observed maximum.
double bucket_percentile(const std::vector<std::uint64_t>& buckets, std::uint64_t count, std::uint64_t max, double p) {
  if (count == 0) return 0;
  const std::size_t rank = metrics::nearest_rank(count, p);
  std::uint64_t seen = 0;
  for (std::uint32_t b = 0; b < buckets.size(); ++b) {
    add_to(seen, buckets[b]);
    if (seen >= rank) {
      const double low = static_cast<double>(abi::latency_bucket_lowest(b));
      const double high = b + 1 < abi::kLatencyBuckets ? static_cast<double>(abi::latency_bucket_lowest(b + 1)) : low;
      return std::min((low + high) / 2, static_cast<double>(max));
    }
  }
  return static_cast<double>(max);
}

LatencyFigures latency_of(const LockRun& run, std::uint64_t tsc_khz) {
  std::vector<std::uint64_t> buckets(abi::kLatencyBuckets, 0);
  std::uint64_t count = 0, max = 0;
  double sum = 0;
  for (const auto& s : run.samples) {
    add_to(count, s.stats.latency_count);
    max = std::max(max, s.stats.latency_max);
    sum += static_cast<double>(s.stats.latency_sum);
    for (std::uint32_t b = 0; b < abi::kLatencyBuckets; ++b) add_to(buckets[b], s.stats.latency_buckets[b]);
  }
  auto pct = [&](double p) { return cycles_to_ns(bucket_percentile(buckets, count, max, p), tsc_khz); };
  LatencyFigures l;
  l.count = count;
  l.p50_ns = pct(50);
  l.p90_ns = pct(90);
  l.p99_ns = pct(99);
  l.p999_ns = pct(99.9);
  l.max_ns = cycles_to_ns(static_cast<double>(max), tsc_khz);
  l.mean_ns = count ? cycles_to_ns(sum / static_cast<double>(count), tsc_khz) : 0.0;
  return l;
}

// The windows every CPU ran through completely, when all CPUs used the
// same window length (a forged or mixed record gives no window figures).
std::optional<WindowFigures> windows_of(const LockRun& run, std::uint64_t tsc_khz) {
  if (run.samples.empty()) return std::nullopt;
  const std::uint64_t width = run.samples[0].stats.window_cycles;
  if (width == 0) return std::nullopt;
  std::uint64_t complete = abi::kFairnessWindows;
  std::vector<std::vector<std::uint64_t>> per_cpu;
  for (const auto& s : run.samples) {
    if (s.stats.window_cycles != width) return std::nullopt;
    complete = std::min(complete, s.stats.elapsed_cycles / width);
    per_cpu.emplace_back(std::begin(s.stats.window_ops), std::end(s.stats.window_ops));
  }
  const auto fairness = metrics::window_fairness(per_cpu, complete);
  if (!fairness) return std::nullopt;
  return WindowFigures{cycles_to_ns(static_cast<double>(width), tsc_khz) * 1e-6, *fairness};
}

}  // namespace

PathFigures path_figures(const abi::WorkloadStats& stats) {
  static_assert(locks::kLockEventCount <= abi::kLockEventSlots);
  PathFigures f;
  std::uint64_t counted = 0;
  for (unsigned p = 1; p < locks::kAcqPathCount; ++p) {
    f.by_path[p] = stats.lock_events[static_cast<unsigned>(locks::kAcqPathEvents[p])];
    add_to(counted, f.by_path[p]);
  }
  if (counted <= stats.ops) {
    f.by_path[0] = stats.ops - counted;
  } else {
    f.invalid = counted - stats.ops;
  }
  return f;
}

LockMetrics analyse(const LockRun& run) {
  LockMetrics m;
  std::uint64_t tsc_khz = 0, max_elapsed = 0;
  bool all_windows = !run.samples.empty();
  UsageFigures window;
  for (const auto& s : run.samples) {
    const auto& st = s.stats;
    add_to(m.ops_total, st.ops);
    add_to(m.violations, st.violations);
    m.per_cpu_ops.push_back(st.ops);
    tsc_khz = st.tsc_khz ? st.tsc_khz : tsc_khz;
    max_elapsed = std::max(max_elapsed, st.elapsed_cycles);
    std::map<std::string, std::uint64_t> cpu_events;
    for (unsigned e = 0; e < locks::kLockEventCount; ++e) {
      const char* name = locks::kLockEventNames[e];
      add_to(m.lock_events[name], st.lock_events[e]);
      if (st.lock_events[e]) cpu_events[name] = st.lock_events[e];
    }
    m.lock_events_per_cpu.push_back(std::move(cpu_events));
    const PathFigures paths = path_figures(st);
    for (unsigned p = 0; p < locks::kAcqPathCount; ++p) add_to(m.paths.by_path[p], paths.by_path[p]);
    add_to(m.paths.invalid, paths.invalid);
    m.paths_per_cpu.push_back(paths);
    m.total.cpu_seconds += s.cpu_seconds;
    add_to(m.total.involuntary_switches, s.involuntary_switches);
    if (s.host_preemptions) add_to(m.total.host_preemptions, *s.host_preemptions);
    if (s.runqueue_wait_ns) add_to(m.total.steal_ns, *s.runqueue_wait_ns);
    if (s.window) {
      window.cpu_seconds += s.window->cpu_seconds;
      add_to(window.involuntary_switches, s.window->involuntary_switches);
      if (s.window->runqueue_wait_ns) add_to(window.steal_ns, *s.window->runqueue_wait_ns);
    } else {
      all_windows = false;
    }
  }
  for (const auto& s : run.samples) {
    // Steal needs every CPU's figure: a partial sum would read as less steal.
    if (!s.runqueue_wait_ns) m.total.steal_ns.reset();
    if (s.window && !s.window->runqueue_wait_ns) window.steal_ns.reset();
  }
  for (const auto& s : run.samples) {
    const double finish_s = cycles_to_ns(static_cast<double>(s.stats.elapsed_cycles), tsc_khz) * 1e-9;
    m.per_cpu_finish_s.push_back(finish_s);
    m.per_cpu_ops_per_sec.push_back(finish_s > 0 ? static_cast<double>(s.stats.ops) / finish_s : 0.0);
  }
  m.duration_s = cycles_to_ns(static_cast<double>(max_elapsed), tsc_khz) * 1e-9;
  m.ops_per_sec = m.duration_s > 0 ? static_cast<double>(m.ops_total) / m.duration_s : 0.0;
  m.fairness_rate = metrics::compute_spread(m.per_cpu_ops_per_sec);
  m.imbalanced = m.fairness_rate && m.fairness_rate->max > 2 * m.fairness_rate->min;
  m.fairness_ops = metrics::compute_fairness(m.per_cpu_ops);
  m.finish_spread = metrics::compute_spread(m.per_cpu_finish_s);
  m.windows = windows_of(run, tsc_khz);
  m.latency = latency_of(run, tsc_khz);
  if (run.workload == "uncontended" && !run.samples.empty() && run.samples[0].stats.ops > 0)
    m.ns_per_lock_unlock = cycles_to_ns(static_cast<double>(run.samples[0].stats.elapsed_cycles), tsc_khz) /
                           static_cast<double>(run.samples[0].stats.ops);
  m.total.ops_per_cpu_second = m.total.cpu_seconds > 0 ? static_cast<double>(m.ops_total) / m.total.cpu_seconds : 0.0;
  if (all_windows) {
    window.ops_per_cpu_second = window.cpu_seconds > 0 ? static_cast<double>(m.ops_total) / window.cpu_seconds : 0.0;
    m.window = window;
  }
  for (const auto& s : run.samples) {
    add_to(m.handoffs_local, s.stats.handoffs_local);
    add_to(m.handoffs_remote, s.stats.handoffs_remote);
    add_to(m.handoffs_self, s.stats.handoffs_self);
  }
  // In doubles: the guest's counts are untrusted and their u64 sum could wrap.
  const double local = static_cast<double>(m.handoffs_local), remote = static_cast<double>(m.handoffs_remote);
  if (local + remote > 0) m.handoff_locality = local / (local + remote);
  // Also in doubles (saturated sums of untrusted counts).
  double acquisitions = 0, bypassing = 0;
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p) {
    const double n = static_cast<double>(m.paths.by_path[p]);
    acquisitions += n;
    if (locks::acq_path_bypasses_queue(static_cast<locks::AcqPath>(p))) bypassing += n;
  }
  if (m.paths.invalid == 0 && acquisitions > 0) m.steal_fraction = bypassing / acquisitions;
  if (!run.vcpu_node.empty()) {
    unsigned nodes = 0;
    for (const unsigned n : run.vcpu_node) nodes = std::max(nodes, n + 1);
    std::vector<std::uint64_t> node_ops(nodes, 0);
    for (std::size_t i = 0; i < run.samples.size() && i < run.vcpu_node.size(); ++i)
      add_to(node_ops[run.vcpu_node[i]], run.samples[i].stats.ops);
    for (const auto ops : node_ops)
      m.per_node_ops_per_sec.push_back(m.duration_s > 0 ? static_cast<double>(ops) / m.duration_s : 0.0);
  }
  if (run.vmm) {
    // An IPI or NMI kick is no KICK_CPU: the VMM's count is not the guest's (wake_check.h compares those).
    if (!run.wake || run.wake->mechanism == abi::PvWake::kHypercall)
      m.pv_kicks_match_vmm = m.lock_events["pv_kick"] == run.vmm->kicks;
    std::uint64_t halts = 0;
    for (const auto& s : run.samples) add_to(halts, s.stats.pv_halts);
    m.pv_halts_match_vmm = halts == run.vmm->halts;
  }
  return m;
}

}  // namespace lockvisor::lockstat
