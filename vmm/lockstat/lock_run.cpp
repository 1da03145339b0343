#include "vmm/lockstat/lock_run.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "locks/lock_events.h"
#include "vmm/host/emulation.h"
#include "vmm/lockstat/lock_metrics.h"
#include "vmm/lockstat/saturating.h"
#include "vmm/metrics/summary.h"
#include "vmm/report/run_report.h"
#include "vmm/metrics/fairness_json.h"
#include "vmm/util/build_version.h"
#include "vmm/util/error.h"

namespace lockvisor::lockstat {
namespace {

// A PV counter of one vCPU by name: absent is a host bug (a renamed counter
// must not read as 0).
nlohmann::json optional_json(const auto& value) { return value ? nlohmann::json(*value) : nlohmann::json(nullptr); }

// {"fast": N, "spin": N, ...}: every path, and "invalid" (path counts beyond
// the acquisitions: the guest's counters do not add up).
nlohmann::json paths_json(const PathFigures& f) {
  nlohmann::json j = nlohmann::json::object();
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p) j[locks::kAcqPathNames[p]] = f.by_path[p];
  j["invalid"] = f.invalid;
  return j;
}

nlohmann::json spread_json(const std::optional<metrics::Spread>& s) {
  if (!s) return nullptr;
  return {{"jain", s->jain}, {"cv", s->cv}, {"min", s->min}, {"max", s->max}, {"max_min_ratio", optional_json(s->max_min_ratio)}};
}

}  // namespace

std::optional<metrics::ThreadUsage> window_usage(const machine::VcpuReport& vcpu) {
  if (!vcpu.window_start || !vcpu.window_end) return std::nullopt;
  return metrics::usage_between(*vcpu.window_start, *vcpu.window_end);
}

std::vector<abi::WorkloadStats> workload_stats_from(const machine::RunResult& run) {
  std::vector<abi::WorkloadStats> out;
  for (unsigned i = 0; i < run.vcpus.size(); ++i) {
    const auto* r = run.result(i, abi::kWorkloadStatsKey);
    if (r == nullptr) fail_guest("vCPU {} reported no workload statistics", i);
    if (r->values.size() != abi::kWorkloadStatsWords)
      fail_guest("vCPU {}: workload statistics of {} words, expected {}", i, r->values.size(),
                 abi::kWorkloadStatsWords);
    abi::WorkloadStats stats;
    std::memcpy(&stats, r->values.data(), sizeof stats);
    if (stats.version != abi::kWorkloadStatsVersion)
      fail_guest("vCPU {}: workload statistics version {}", i, stats.version);
    out.push_back(stats);
  }
  return out;
}

VmmCounters vmm_counters(const machine::RunResult& run) {
  VmmCounters c;
  for (const auto& v : run.vcpus) {
    const pvlock::PvCounts& pv = v.pv;
    add_to(c.halts, pv.halts);
    add_to(c.halts_immediate, pv.halts_immediate);
    add_to(c.halts_woken, pv.halts_woken);
    add_to(c.halts_woken, pv.halts_polled);
    add_to(c.kicks, pv.kicks_sent);
    add_to(c.kicks_received, pv.kicks_received);
    add_to(c.kicks_coalesced, pv.kicks_coalesced);
    add_to(c.kicks_dropped, pv.kicks_dropped);
    for (const auto& [name, value] : v.exits) add_to(c.exits, value);
  }
  c.wake_latency_ns = report::wake_latency_json(run);
  return c;
}

nlohmann::json host_info(const std::string& kvm_kind) {
  std::string model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  utsname uts{};
  uname(&uts);
  nlohmann::json info = {
      {"kvm", kvm_kind}, {"cpu_model", model}, {"kernel", uts.release}, {"lockvisor_version", util::build_version()}};
  info.update(host::emulation_json(host::emulation()));
  return info;
}

nlohmann::json to_json(const LockRun& run) {
  const LockMetrics m = analyse(run);
  nlohmann::json j;
  j["mode"] = run.mode;
  j["lock"] = run.lock;
  j["workload"] = run.workload;
  j["vcpus"] = run.cpus;
  j["pcpus"] = run.pcpus;
  j["params"] = run.params;
  j["duration_s"] = m.duration_s;
  j["ops_total"] = m.ops_total;
  j["ops_per_sec"] = m.ops_per_sec;
  j["per_vcpu_ops"] = m.per_cpu_ops;
  j["per_vcpu_finish_s"] = m.per_cpu_finish_s;
  j["per_vcpu_ops_per_sec"] = m.per_cpu_ops_per_sec;
  // "fairness": over per-CPU rates (ops / finish time), right for fixed-work
  // and fixed-time runs alike; "fairness_ops" over the raw counts.
  if (m.fairness_rate) {
    j["fairness"] = {{"over", "per_vcpu_ops_per_sec"},
                     {"jain", m.fairness_rate->jain},
                     {"cv", m.fairness_rate->cv},
                     {"max_min_ratio", optional_json(m.fairness_rate->max_min_ratio)},
                     {"imbalanced", m.imbalanced}};
    metrics::add_fairness_factors(j["fairness"], m.fairness_rate->factors);
  }
  if (m.fairness_ops) {
    j["fairness_ops"] = {{"jain", m.fairness_ops->jain}, {"cv", m.fairness_ops->cv},
                         {"max_min_ratio", optional_json(m.fairness_ops->max_min_ratio)}};
    metrics::add_fairness_factors(j["fairness_ops"], m.fairness_ops->factors);
  }
  j["finish_time_s_spread"] = spread_json(m.finish_spread);
  if (m.windows) {
    const auto& w = m.windows->fairness;
    j["window_fairness"] = {{"window_ms", m.windows->window_ms}, {"windows", w.windows},
                            {"jain_min", optional_json(w.jain_min)}, {"jain_median", optional_json(w.jain_median)},
                            {"starved_windows", w.starved_windows}, {"idle_windows", w.idle_windows}};
  } else {
    j["window_fairness"] = nullptr;
  }
  const auto& l = m.latency;
  j["latency_ns"] = {{"p50", l.p50_ns}, {"p90", l.p90_ns}, {"p99", l.p99_ns}, {"p999", l.p999_ns},
                     {"max", l.max_ns}, {"mean", l.mean_ns}, {"count", l.count}};
  if (m.ns_per_lock_unlock) j["ns_per_lock_unlock"] = *m.ns_per_lock_unlock;
  j["violations"] = m.violations;
  // Who took the lock from whom, by virtual node (lock_metrics.h).
  j["handoffs"] = {{"local", m.handoffs_local}, {"remote", m.handoffs_remote}, {"self", m.handoffs_self}};
  j["handoff_locality"] = optional_json(m.handoff_locality);
  if (!run.vcpu_node.empty()) {
    j["vcpu_node"] = run.vcpu_node;
    j["per_node_ops_per_sec"] = m.per_node_ops_per_sec;
  }
  j["pv"] = m.lock_events;
  nlohmann::json per_cpu = nlohmann::json::array();
  for (const auto& events : m.lock_events_per_cpu) per_cpu.push_back(events.empty() ? nlohmann::json::object() : nlohmann::json(events));
  j["pv_per_vcpu"] = per_cpu;
  j["acquisitions_by_path"] = paths_json(m.paths);
  nlohmann::json paths_per_cpu = nlohmann::json::array();
  for (const auto& p : m.paths_per_cpu) paths_per_cpu.push_back(paths_json(p));
  j["per_vcpu_acquisitions_by_path"] = std::move(paths_per_cpu);
  // (steal + borrow) / acquisitions: the share that bypassed a queued waiter.
  j["steal_fraction"] = optional_json(m.steal_fraction);
  if (run.vmm) {
    const auto& c = *run.vmm;
    j["vmm"] = {{"halts", c.halts},
                {"halts_immediate", c.halts_immediate},
                {"halts_woken", c.halts_woken},
                {"kicks", c.kicks},
                {"kicks_received", c.kicks_received},
                {"kicks_coalesced", c.kicks_coalesced},
                {"kicks_dropped", c.kicks_dropped},
                {"wake_latency_ns", c.wake_latency_ns},
                {"exits", c.exits}};
    std::uint64_t guest_halts = 0;
    for (const auto& s : run.samples) add_to(guest_halts, s.stats.pv_halts);
    j["pv_halts_guest"] = guest_halts;
    j["pv_kicks_match_vmm"] = optional_json(m.pv_kicks_match_vmm);
    j["pv_halts_match_vmm"] = *m.pv_halts_match_vmm;
  } else {
    j["vmm"] = nullptr;
  }
  j["wake"] = run.wake ? to_json(*run.wake) : nlohmann::json(nullptr);
  // Host-side cost: *_total over the threads' whole life, *_window between
  // the window marks (null when not every CPU was sampled at both). The
  // unsuffixed keys are the whole-life figures, kept for older readers.
  j["cpu_seconds"] = j["cpu_seconds_total"] = m.total.cpu_seconds;
  j["ops_per_cpu_second"] = j["ops_per_cpu_second_total"] = m.total.ops_per_cpu_second;
  j["involuntary_context_switches"] = j["involuntary_context_switches_total"] = m.total.involuntary_switches;
  j["steal_ns"] = j["steal_ns_total"] = optional_json(m.total.steal_ns);
  j["host_preemptions"] = optional_json(m.total.host_preemptions);
  j["cpu_seconds_window"] = m.window ? nlohmann::json(m.window->cpu_seconds) : nlohmann::json(nullptr);
  j["ops_per_cpu_second_window"] = m.window ? nlohmann::json(m.window->ops_per_cpu_second) : nlohmann::json(nullptr);
  j["involuntary_context_switches_window"] =
      m.window ? nlohmann::json(m.window->involuntary_switches) : nlohmann::json(nullptr);
  j["steal_ns_window"] = m.window ? optional_json(m.window->steal_ns) : nlohmann::json(nullptr);
  j["host"] = run.host;
  return j;
}

namespace {
std::string ratio_text(const std::optional<double>& r) { return r ? fmt::format("{:.2f}", *r) : std::string("inf"); }
}  // namespace

void print_summary(const LockRun& run, const nlohmann::json&, std::FILE* out) {
  const LockMetrics m = analyse(run);
  const char* unit = run.mode == "guest" ? "vCPU" : "thread";
  fmt::print(out, "{} {} on {} {}s: {} ops in {:.3f} s = {:.0f} ops/s{}{}\n", run.lock, run.workload, run.cpus, unit,
             m.ops_total, m.duration_s, m.ops_per_sec, m.imbalanced ? " ???" : "",
             m.violations ? fmt::format(" !!! {} VIOLATIONS", m.violations) : "");
  if (m.per_cpu_ops.size() > report::kTableVcpus) {
    // Beyond a screen: the spread of the per-CPU counts, naming the extremes.
    std::vector<std::pair<std::uint64_t, std::size_t>> ops;
    for (std::size_t i = 0; i < m.per_cpu_ops.size(); ++i) ops.emplace_back(m.per_cpu_ops[i], i);
    std::sort(ops.begin(), ops.end());
    const auto at = [&](double p) { return ops[metrics::nearest_rank(ops.size(), p) - 1].first; };
    fmt::print(out, "  per-{0} ops: min {1} ({0} {2}), p50 {3}, p90 {4}, max {5} ({0} {6}); every {0} is in the JSON (--json)\n",
               unit, ops.front().first, ops.front().second, at(50), at(90), ops.back().first, ops.back().second);
  } else {
    std::string per_cpu;
    for (std::size_t i = 0; i < m.per_cpu_ops.size(); ++i)
      per_cpu += fmt::format("{}{} ({:.3f} s)", i ? ", " : "", m.per_cpu_ops[i], m.per_cpu_finish_s[i]);
    fmt::print(out, "  per-{} ops (finish time): {}\n", unit, per_cpu);
  }
  if (m.fairness_rate)
    fmt::print(out, "  fairness over per-{} rates: Jain {:.3f}, max/min {}, cv {:.3f}, min/max {:.3f}, slowest half {:.3f}\n",
               unit, m.fairness_rate->jain, ratio_text(m.fairness_rate->max_min_ratio), m.fairness_rate->cv,
               m.fairness_rate->factors.min_over_max, m.fairness_rate->factors.slowest_half_share);
  if (m.finish_spread)
    fmt::print(out, "  finish times: {:.3f} .. {:.3f} s, max/min {}, cv {:.3f}\n", m.finish_spread->min,
               m.finish_spread->max, ratio_text(m.finish_spread->max_min_ratio), m.finish_spread->cv);
  if (m.windows) {
    const auto& w = m.windows->fairness;
    fmt::print(out, "  {:.1f} ms windows ({}): Jain min {}, median {}; {} with a {} at 0 ops, {} with nobody progressing\n",
               m.windows->window_ms, w.windows, w.jain_min ? fmt::format("{:.3f}", *w.jain_min) : "-",
               w.jain_median ? fmt::format("{:.3f}", *w.jain_median) : "-", w.starved_windows, unit, w.idle_windows);
  }
  if (!run.vcpu_node.empty()) {
    std::string per_node;
    for (std::size_t n = 0; n < m.per_node_ops_per_sec.size(); ++n)
      per_node += fmt::format("{}node {}: {:.0f}", n ? ", " : "", n, m.per_node_ops_per_sec[n]);
    fmt::print(out, "  handoffs: {} within a node, {} across nodes (locality {}), {} to itself; ops/s by node: {}\n",
               m.handoffs_local, m.handoffs_remote,
               m.handoff_locality ? fmt::format("{:.3f}", *m.handoff_locality) : "-", m.handoffs_self, per_node);
  }
  const auto& l = m.latency;
  if (l.count > 0)
    fmt::print(out, "  acquisition latency: p50 {:.0f} ns, p90 {:.0f}, p99 {:.0f}, p99.9 {:.0f}, max {:.0f}\n", l.p50_ns,
               l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns);
  if (m.ns_per_lock_unlock) fmt::print(out, "  uncontended: {:.2f} ns per lock/unlock pair\n", *m.ns_per_lock_unlock);
  auto usage_line = [&](const char* what, const UsageFigures& u) {
    fmt::print(out, "  CPU {}: {:.3f} s of {} time, {:.0f} ops per CPU-second, {} involuntary switches, steal {}\n",
               what, u.cpu_seconds, run.mode == "guest" ? "vCPU-thread" : "thread", u.ops_per_cpu_second, u.involuntary_switches,
               u.steal_ns ? fmt::format("{:.3f} s", static_cast<double>(*u.steal_ns) * 1e-9) : std::string("n/a"));
  };
  if (m.window) usage_line("(window)", *m.window);
  usage_line("(total) ", m.total);
  // One line: the paths taken, in the list's order (lock_events.h), with
  // their shares, so a reader sees at once how much was stolen or handed over.
  std::string paths;
  const double all = static_cast<double>(m.ops_total);
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p)
    if (m.paths.by_path[p] != 0)
      paths += fmt::format(" {} {} ({:.1f}%)", locks::kAcqPathNames[p], m.paths.by_path[p],
                           all > 0 ? 100.0 * static_cast<double>(m.paths.by_path[p]) / all : 0.0);
  if (!paths.empty() || m.paths.invalid != 0)
    fmt::print(out, "  acquisitions by path:{}{}\n", paths,
               m.paths.invalid ? fmt::format("  !!! {} path counts beyond the acquisitions (invalid)", m.paths.invalid)
                               : std::string());
  if (m.steal_fraction)
    fmt::print(out, "  steal fraction (acquisitions that bypassed a queued waiter): {:.3f}\n", *m.steal_fraction);
  std::string events;
  for (const auto& [name, value] : m.lock_events)
    if (value > 0) events += fmt::format(" {}={}", name, value);
  if (!events.empty()) fmt::print(out, "  lock events:{}\n", events);
  if (run.vmm)
    fmt::print(out, "  VMM: {} halts ({} returned at once), {} kicks, {} exits{}{}\n", run.vmm->halts,
               run.vmm->halts_immediate, run.vmm->kicks, run.vmm->exits,
               m.pv_kicks_match_vmm.value_or(true) ? "" : "  (!!! guest pv_kick count differs from the VMM's)",
               m.pv_halts_match_vmm.value_or(true) ? "" : "  (!!! guest halt count differs from the VMM's)");
  if (run.wake) fmt::print(out, "  {}\n", wake_line(*run.wake));
}

}  // namespace lockvisor::lockstat
