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

namespace lockvisor::lockstat {

struct CpuSample {
  abi::WorkloadStats stats{};
  double cpu_seconds = 0;                      // user+sys of the vCPU thread / host thread
  std::uint64_t involuntary_switches = 0;
  std::optional<std::uint64_t> host_preemptions;  // KVM's preemption stats (guest runs)
  std::optional<std::uint64_t> runqueue_wait_ns;  // time runnable but not running: steal, seen from the host
};

struct LockRun {
  std::string mode;  // "guest" or "native"
  std::string lock;
  std::string workload;
  unsigned cpus = 0;
  std::string pcpus;
  nlohmann::json params;
  std::vector<CpuSample> samples;
  nlohmann::json vmm;   // VMM counters for guest runs, null for native
  nlohmann::json host;  // kvm kind, CPU model, kernel, version
};

// The WorkloadStats each vCPU reported; throws a guest lockvisor::Error if a
// record is missing or malformed (wrong length or version).
std::vector<abi::WorkloadStats> workload_stats_from(const machine::RunResult& run);

// Summary of the VMM side of a guest run (halts, kicks, wake latency, exits).
nlohmann::json vmm_counters(const machine::RunResult& run);

nlohmann::json to_json(const LockRun& run);
// locktorture-style human summary: totals, per-CPU ops with ??? when
// max > 2*min and !!! on any violation, latency percentiles, CPU cost.
void print_summary(const LockRun& run, const nlohmann::json& metrics, std::FILE* out);

// Host description for reports: KVM kind, CPU model, kernel, lockvisor version.
nlohmann::json host_info(const std::string& kvm_kind);

}  // namespace lockvisor::lockstat
