// Guest-reported lock statistics are untrusted numbers: sums saturate instead
// of wrapping (vmm/lockstat/lock_run.cpp), malformed records are refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "lockvisor/abi/workload.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/util/error.h"

namespace lockvisor::lockstat {
namespace {

abi::WorkloadStats forged() {
  abi::WorkloadStats s{};
  s.version = abi::kWorkloadStatsVersion;
  s.ops = 1ull << 63;
  s.violations = 1ull << 63;
  s.elapsed_cycles = ~0ull;
  s.tsc_khz = 0;
  s.latency_count = ~0ull;
  s.latency_max = ~0ull;
  s.latency_sum = ~0ull;
  for (auto& e : s.lock_events) e = ~0ull;
  for (auto& b : s.latency_buckets) b = ~0ull;
  return s;
}

TEST(LockStats, TwoTimesTwoToThe63ViolationsIsNotZero) {
  LockRun run;
  run.mode = "guest";
  run.lock = "ticket";
  run.workload = "lockbench";
  run.cpus = 2;
  run.samples = {{forged(), 1.0, 0, 1, 1}, {forged(), 1.0, ~0ull, ~0ull, ~0ull}};
  const auto m = to_json(run);
  EXPECT_EQ(m["violations"].get<std::uint64_t>(), ~0ull);
  EXPECT_EQ(m["ops_total"].get<std::uint64_t>(), ~0ull);
  EXPECT_EQ(m["latency_ns"]["count"].get<std::uint64_t>(), ~0ull);
  EXPECT_EQ(m["host_preemptions"].get<std::uint64_t>(), ~0ull);
  EXPECT_EQ(m["steal_ns"].get<std::uint64_t>(), ~0ull);
  EXPECT_EQ(m["involuntary_context_switches"].get<std::uint64_t>(), ~0ull);
  for (const auto& [name, value] : m["pv"].items()) EXPECT_EQ(value.get<std::uint64_t>(), ~0ull) << name;
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  EXPECT_NO_THROW(print_summary(run, m, sink));
  std::fclose(sink);
}

TEST(LockStats, MalformedRecordsAreGuestErrors) {
  machine::RunResult run;
  run.vcpus.resize(2);
  auto record = [](std::size_t words, std::uint64_t version) {
    machine::ResultValue r{abi::kWorkloadStatsKey, std::vector<std::uint64_t>(words, 0), 0};
    if (!r.values.empty()) r.values[0] = version;
    return r;
  };
  auto expect_guest_error = [&](const char* what) {
    try {
      workload_stats_from(run);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kGuest) << what;
    }
  };
  expect_guest_error("no records");
  run.vcpus[0].results = {record(abi::kWorkloadStatsWords, abi::kWorkloadStatsVersion)};
  expect_guest_error("one vCPU without a record");
  run.vcpus[1].results = {record(0, 0)};
  expect_guest_error("an empty array");
  run.vcpus[1].results = {record(abi::kWorkloadStatsWords + 1, abi::kWorkloadStatsVersion)};
  expect_guest_error("a word too many");
  run.vcpus[1].results = {record(abi::kWorkloadStatsWords, 99)};
  expect_guest_error("a wrong version");
  run.vcpus[1].results = {record(abi::kWorkloadStatsWords, abi::kWorkloadStatsVersion)};
  EXPECT_EQ(workload_stats_from(run).size(), 2u);
}

}  // namespace
}  // namespace lockvisor::lockstat
