// Lock-workload results, guest or native: the per-CPU WorkloadStats plus
// what the host measured, turned into the metrics a reader compares lock
// strategies by (throughput, fairness, acquisition latency, CPU cost).
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockvisor/abi/workload.h"
#include "vmm/machine/run_result.h"
#include "vmm/lockstat/wake_check.h"
#include "vmm/metrics/thread_usage.h"

namespace lockvisor::lockstat {

struct CpuSample {
  abi::WorkloadStats stats{};
  double cpu_seconds = 0;                      // user+sys of the vCPU thread / host thread, whole life
  std::uint64_t involuntary_switches = 0;      // whole life
  std::optional<std::uint64_t> host_preemptions;  // KVM's preemption stats (guest runs), whole life
  std::optional<std::uint64_t> runqueue_wait_ns;  // time runnable but not running: steal, seen from the host; whole life
  // The same thread's usage over the measured window only (between the
  // workload's start and end marks); absent when it was not sampled.
  std::optional<metrics::ThreadUsage> window = std::nullopt;
};

// The VMM side of a guest run, summed over vCPUs.
struct VmmCounters {
  std::uint64_t halts = 0;
  std::uint64_t halts_immediate = 0;  // returned at once (a kick was pending)
  std::uint64_t halts_woken = 0;      // woken by a kick (or polled)
  std::uint64_t kicks = 0;            // sent
  std::uint64_t kicks_received = 0;
  std::uint64_t kicks_coalesced = 0;
  std::uint64_t kicks_dropped = 0;
  std::uint64_t exits = 0;
  nlohmann::json wake_latency_ns;     // report::wake_latency_json (output only)
};

struct LockRun {
  std::string mode;  // "guest" or "native"
  std::string lock;
  std::string workload;
  unsigned cpus = 0;
  std::string pcpus;
  // --vnuma: the virtual node of each CPU (empty: no topology; per-node
  // figures are then left out).
  std::vector<unsigned> vcpu_node;
  nlohmann::json params;
  std::vector<CpuSample> samples;
  std::optional<VmmCounters> vmm;  // guest runs only
  // Guest runs: the wake-up handlers' counts beside KVM's (--pv-wake). Its
  // mechanism also says whether the VMM's kicks (KICK_CPU) are the guest's.
  std::optional<WakeCheck> wake;
  nlohmann::json host;  // kvm kind, CPU model, kernel, version
};

// The window usage of a vCPU: its thread's usage between the guest's window
// marks, nullopt unless it marked both edges.
std::optional<metrics::ThreadUsage> window_usage(const machine::VcpuReport& vcpu);

// The WorkloadStats each vCPU reported; throws a guest lockvisor::Error if a
// record is missing or malformed (wrong length or version).
std::vector<abi::WorkloadStats> workload_stats_from(const machine::RunResult& run);

// Summary of the VMM side of a guest run (halts, kicks, wake latency, exits).
// A PV counter missing from a vCPU's report is a host error, never a 0.
VmmCounters vmm_counters(const machine::RunResult& run);

// The figures of lock_metrics.h as JSON (the only place they become JSON).
nlohmann::json to_json(const LockRun& run);
// locktorture-style human summary: totals, per-CPU ops with ??? when the
// fastest CPU's rate is over twice the slowest's and !!! on any violation,
// fairness over rates, finish times and short windows, latency
// percentiles, CPU cost over the window and the whole life. (`metrics` is
// not read: the figures are recomputed from `run`, typed.)
void print_summary(const LockRun& run, const nlohmann::json& metrics, std::FILE* out);

// Host description for reports: KVM kind, CPU model, kernel, lockvisor version.
nlohmann::json host_info(const std::string& kvm_kind);

}  // namespace lockvisor::lockstat
