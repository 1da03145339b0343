#include "vmm/lockstat/lock_run.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "locks/lock_events.h"
#include "vmm/metrics/summary.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"

namespace lockvisor::lockstat {
namespace {

// Every count in a WorkloadStats record is the guest's word: sums saturate
// at 2^64 - 1 instead of wrapping, so that no total can come out smaller
// than one of its parts (two vCPUs reporting 2^63 violations each must not
// add up to 0).
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}
void add_to(std::uint64_t& total, std::uint64_t value) { total = saturating_add(total, value); }

double cycles_to_ns(double cycles, std::uint64_t tsc_khz) {
  return tsc_khz ? cycles * 1e6 / static_cast<double>(tsc_khz) : 0;
}

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

}  // namespace

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

nlohmann::json vmm_counters(const machine::RunResult& run) {
  pvlock::PvCounts pv;
  std::uint64_t exits = 0;
  for (const auto& v : run.vcpus) {
    pv += v.pv;
    for (const auto& [name, value] : v.exits) add_to(exits, value);
  }
  return {{"halts", pv.halts},
          {"halts_immediate", pv.halts_immediate},
          {"halts_woken", saturating_add(pv.halts_woken, pv.halts_polled)},
          {"kicks", pv.kicks_sent},
          {"kicks_received", pv.kicks_received},
          {"kicks_coalesced", pv.kicks_coalesced},
          {"kicks_dropped", pv.kicks_dropped},
          {"wake_latency_ns", report::wake_latency_json(run)},
          {"exits", exits}};
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
  return {{"kvm", kvm_kind}, {"cpu_model", model}, {"kernel", uts.release}, {"lockvisor_version", LOCKVISOR_VERSION}};
}

nlohmann::json to_json(const LockRun& run) {
  nlohmann::json j;
  j["mode"] = run.mode;
  j["lock"] = run.lock;
  j["workload"] = run.workload;
  j["vcpus"] = run.cpus;
  j["pcpus"] = run.pcpus;
  j["params"] = run.params;

  std::uint64_t ops_total = 0, violations = 0, latency_count = 0, latency_max = 0, tsc_khz = 0, max_elapsed = 0;
  double latency_sum = 0, cpu_seconds = 0;
  std::vector<std::uint64_t> per_cpu_ops, buckets(abi::kLatencyBuckets, 0);
  std::map<std::string, std::uint64_t> pv;
  nlohmann::json pv_per_cpu = nlohmann::json::array();
  std::optional<std::uint64_t> preemptions, steal;
  std::uint64_t involuntary = 0;
  for (const auto& s : run.samples) {
    const auto& st = s.stats;
    add_to(ops_total, st.ops);
    add_to(violations, st.violations);
    per_cpu_ops.push_back(st.ops);
    add_to(latency_count, st.latency_count);
    latency_max = std::max(latency_max, st.latency_max);
    latency_sum += static_cast<double>(st.latency_sum);
    tsc_khz = st.tsc_khz ? st.tsc_khz : tsc_khz;
    max_elapsed = std::max(max_elapsed, st.elapsed_cycles);
    for (std::uint32_t b = 0; b < abi::kLatencyBuckets; ++b) add_to(buckets[b], st.latency_buckets[b]);
    nlohmann::json cpu_events;
    for (unsigned e = 0; e < locks::kLockEventCount; ++e) {
      const char* name = locks::kLockEventNames[e];
      add_to(pv[name], st.lock_events[e]);
      if (st.lock_events[e]) cpu_events[name] = st.lock_events[e];
    }
    pv_per_cpu.push_back(cpu_events.is_null() ? nlohmann::json::object() : cpu_events);
    cpu_seconds += s.cpu_seconds;
    add_to(involuntary, s.involuntary_switches);
    if (s.host_preemptions) preemptions = saturating_add(preemptions.value_or(0), *s.host_preemptions);
    if (s.runqueue_wait_ns) steal = saturating_add(steal.value_or(0), *s.runqueue_wait_ns);
  }
  const double duration_s = cycles_to_ns(static_cast<double>(max_elapsed), tsc_khz) * 1e-9;
  j["duration_s"] = duration_s;
  j["ops_total"] = ops_total;
  j["ops_per_sec"] = duration_s > 0 ? static_cast<double>(ops_total) / duration_s : 0.0;
  j["per_vcpu_ops"] = per_cpu_ops;
  if (const auto f = metrics::compute_fairness(per_cpu_ops)) {
    j["fairness"] = {{"jain", f->jain}, {"cv", f->cv}, {"imbalanced", metrics::imbalanced(per_cpu_ops)}};
    j["fairness"]["max_min_ratio"] = f->max_min_ratio ? nlohmann::json(*f->max_min_ratio) : nlohmann::json(nullptr);
  }
  auto pct = [&](double p) { return cycles_to_ns(bucket_percentile(buckets, latency_count, latency_max, p), tsc_khz); };
  j["latency_ns"] = {{"p50", pct(50)},
                     {"p90", pct(90)},
                     {"p99", pct(99)},
                     {"p999", pct(99.9)},
                     {"max", cycles_to_ns(static_cast<double>(latency_max), tsc_khz)},
                     {"mean", latency_count ? cycles_to_ns(latency_sum / static_cast<double>(latency_count), tsc_khz) : 0.0},
                     {"count", latency_count}};
  if (run.workload == "uncontended" && !run.samples.empty() && run.samples[0].stats.ops > 0)
    j["ns_per_lock_unlock"] = cycles_to_ns(static_cast<double>(run.samples[0].stats.elapsed_cycles), tsc_khz) /
                              static_cast<double>(run.samples[0].stats.ops);
  j["violations"] = violations;
  j["pv"] = pv;
  j["pv_per_vcpu"] = pv_per_cpu;
  j["vmm"] = run.vmm;
  if (!run.vmm.is_null()) {
    // The guest's own pv_kick count must equal the kicks the VMM received.
    j["pv_kicks_match_vmm"] = pv["pv_kick"] == run.vmm["kicks"].get<std::uint64_t>();
  }
  j["cpu_seconds"] = cpu_seconds;
  j["ops_per_cpu_second"] = cpu_seconds > 0 ? static_cast<double>(ops_total) / cpu_seconds : 0.0;
  j["involuntary_context_switches"] = involuntary;
  j["host_preemptions"] = preemptions ? nlohmann::json(*preemptions) : nlohmann::json(nullptr);
  j["steal_ns"] = steal ? nlohmann::json(*steal) : nlohmann::json(nullptr);
  j["host"] = run.host;
  return j;
}

void print_summary(const LockRun& run, const nlohmann::json& m, std::FILE* out) {
  const auto ops = m["per_vcpu_ops"].get<std::vector<std::uint64_t>>();
  const bool imbalanced = m.contains("fairness") && m["fairness"]["imbalanced"].get<bool>();
  const auto violations = m["violations"].get<std::uint64_t>();
  fmt::print(out, "{} {} on {} {}: {} ops in {:.3f} s = {:.0f} ops/s{}{}\n", run.lock, run.workload, run.cpus,
             run.mode == "guest" ? "vCPUs" : "threads", m["ops_total"].get<std::uint64_t>(),
             m["duration_s"].get<double>(), m["ops_per_sec"].get<double>(), imbalanced ? " ???" : "",
             violations ? fmt::format(" !!! {} VIOLATIONS", violations) : "");
  std::string per_cpu;
  for (std::size_t i = 0; i < ops.size(); ++i) per_cpu += fmt::format("{}{}", i ? " " : "", ops[i]);
  fmt::print(out, "  per-{} ops: {}\n", run.mode == "guest" ? "vCPU" : "thread", per_cpu);
  if (m.contains("fairness")) {
    const auto& f = m["fairness"];
    fmt::print(out, "  fairness: Jain {:.3f}, max/min {}, cv {:.3f}\n", f["jain"].get<double>(),
               f["max_min_ratio"].is_null() ? std::string("inf") : fmt::format("{:.2f}", f["max_min_ratio"].get<double>()),
               f["cv"].get<double>());
  }
  const auto& l = m["latency_ns"];
  if (l["count"].get<std::uint64_t>() > 0)
    fmt::print(out, "  acquisition latency: p50 {:.0f} ns, p90 {:.0f}, p99 {:.0f}, p99.9 {:.0f}, max {:.0f}\n",
               l["p50"].get<double>(), l["p90"].get<double>(), l["p99"].get<double>(), l["p999"].get<double>(),
               l["max"].get<double>());
  if (m.contains("ns_per_lock_unlock"))
    fmt::print(out, "  uncontended: {:.2f} ns per lock/unlock pair\n", m["ns_per_lock_unlock"].get<double>());
  fmt::print(out, "  CPU: {:.3f} s of {} time, {:.0f} ops per CPU-second, {} involuntary context switches\n",
             m["cpu_seconds"].get<double>(), run.mode == "guest" ? "vCPU-thread" : "thread",
             m["ops_per_cpu_second"].get<double>(), m["involuntary_context_switches"].get<std::uint64_t>());
  std::string events;
  for (const auto& [name, value] : m["pv"].items())
    if (value.get<std::uint64_t>() > 0) events += fmt::format(" {}={}", name, value.get<std::uint64_t>());
  if (!events.empty()) fmt::print(out, "  lock events:{}\n", events);
  if (!run.vmm.is_null())
    fmt::print(out, "  VMM: {} halts ({} returned at once), {} kicks, {} exits{}\n", run.vmm["halts"].get<std::uint64_t>(),
               run.vmm["halts_immediate"].get<std::uint64_t>(), run.vmm["kicks"].get<std::uint64_t>(),
               run.vmm["exits"].get<std::uint64_t>(),
               m.value("pv_kicks_match_vmm", true) ? "" : "  (!!! guest pv_kick count differs from the VMM's)");
}

}  // namespace lockvisor::lockstat
