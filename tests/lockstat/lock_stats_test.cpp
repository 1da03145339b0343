// Guest-reported lock statistics are untrusted numbers: sums saturate instead
// of wrapping (vmm/lockstat/lock_run.cpp), malformed records are refused.
// And the figures mean what they say: fixed-work runs are judged by rates and
// finish times, window costs only when every CPU was sampled, a missing VMM
// counter is an error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "locks/lock_events.h"
#include "lockvisor/abi/workload.h"
#include "vmm/lockstat/lock_metrics.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/report/run_report.h"
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

// handoff_locality is local / (local + remote) over all CPUs, self-handoffs
// left out; per-node throughput sums the node's CPUs over the duration.
TEST(LockStats, HandoffLocalityAndPerNodeThroughput) {
  LockRun run;
  run.mode = "guest";
  run.lock = "cna";
  run.workload = "lockbench";
  run.cpus = 3;
  run.vcpu_node = {0, 0, 1};
  auto stats = [](std::uint64_t ops, std::uint64_t local, std::uint64_t remote, std::uint64_t self) {
    abi::WorkloadStats s{};
    s.version = abi::kWorkloadStatsVersion;
    s.tsc_khz = 1000000;          // 1 GHz: cycles are ns
    s.elapsed_cycles = 2000000000;  // 2 s
    s.ops = ops;
    s.handoffs_local = local;
    s.handoffs_remote = remote;
    s.handoffs_self = self;
    return s;
  };
  run.samples = {{stats(100, 30, 10, 5), 1.0, 0, 0, 0},
                 {stats(300, 50, 10, 0), 1.0, 0, 0, 0},
                 {stats(600, 0, 20, 7), 1.0, 0, 0, 0}};
  const LockMetrics m = analyse(run);
  EXPECT_EQ(m.handoffs_local, 80u);
  EXPECT_EQ(m.handoffs_remote, 40u);
  EXPECT_EQ(m.handoffs_self, 12u);
  ASSERT_TRUE(m.handoff_locality.has_value());
  EXPECT_DOUBLE_EQ(*m.handoff_locality, 80.0 / 120.0);
  EXPECT_EQ(m.per_node_ops_per_sec, (std::vector<double>{200.0, 300.0}));
  const auto j = to_json(run);
  EXPECT_DOUBLE_EQ(j["handoff_locality"].get<double>(), 80.0 / 120.0);
  EXPECT_EQ(j["handoffs"]["self"], 12u);
  EXPECT_EQ(j["per_node_ops_per_sec"].size(), 2u);
  // The fairness-factor readings sit beside Jain, over rates and over counts
  // (every CPU ran equally long, so both see 100 : 300 : 600).
  for (const char* view : {"fairness", "fairness_ops"}) {
    EXPECT_DOUBLE_EQ(j[view]["min_over_max"].get<double>(), 1.0 / 6.0) << view;
    EXPECT_DOUBLE_EQ(j[view]["mean_over_max"].get<double>(), 1000.0 / 3.0 / 600.0) << view;
    EXPECT_DOUBLE_EQ(j[view]["slowest_half_share"].get<double>(), 250.0 / 1000.0) << view;  // 100 + 300/2
  }

  // No handoff between two CPUs at all: no locality, and forged counts do
  // not wrap into one.
  run.vcpu_node.clear();
  run.samples = {{stats(10, 0, 0, 9), 1.0, 0, 0, 0}};
  EXPECT_FALSE(analyse(run).handoff_locality.has_value());
  EXPECT_TRUE(to_json(run)["handoff_locality"].is_null());
  EXPECT_FALSE(to_json(run).contains("per_node_ops_per_sec"));
  run.samples = {{stats(10, ~0ull, 1, 0), 1.0, 0, 0, 0}, {stats(10, 1, 0, 0), 1.0, 0, 0, 0}};
  ASSERT_TRUE(analyse(run).handoff_locality.has_value());
  EXPECT_GT(*analyse(run).handoff_locality, 0.99);
}

// steal_fraction: the acquisitions that bypassed a queued waiter (steal and
// borrow; spin saw no queue) over all acquisitions, fast ones included; null
// without acquisitions and when the counts do not add up.
TEST(LockStats, StealFractionIsStealsAndBorrowsOverAcquisitions) {
  auto with = [](std::uint64_t ops, std::uint64_t steals, std::uint64_t borrows, std::uint64_t spins) {
    abi::WorkloadStats s{};
    s.version = abi::kWorkloadStatsVersion;
    s.ops = ops;
    s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_lock_stealing)] = steals;
    s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_lend)] = borrows;
    s.lock_events[static_cast<unsigned>(locks::LockEvent::lock_spin)] = spins;
    s.lock_events[static_cast<unsigned>(locks::LockEvent::lock_queue)] = ops / 10;
    return s;
  };
  LockRun run;
  run.mode = "guest";
  run.lock = "pvbounded";
  run.workload = "lockbench";
  run.cpus = 2;
  run.samples = {{with(100, 15, 5, 30), 1.0, 0, 1, 1}, {with(100, 5, 0, 0), 1.0, 0, 1, 1}};
  ASSERT_TRUE(analyse(run).steal_fraction.has_value());
  EXPECT_DOUBLE_EQ(*analyse(run).steal_fraction, 25.0 / 200.0);
  EXPECT_DOUBLE_EQ(to_json(run)["steal_fraction"].get<double>(), 25.0 / 200.0);

  run.samples = {{with(0, 0, 0, 0), 1.0, 0, 1, 1}};
  EXPECT_TRUE(to_json(run)["steal_fraction"].is_null()) << "no acquisitions";
  run.samples = {{with(10, 20, 0, 0), 1.0, 0, 1, 1}};
  EXPECT_TRUE(to_json(run)["steal_fraction"].is_null()) << "more steals than acquisitions";
}

// Acquisitions by path: fast is what the counted paths leave of a CPU's
// acquisitions; counts that add up to more than the acquisitions are the
// guest's error, reported as invalid (never a wrapped fast count).
TEST(LockStats, AcquisitionsByPathAddUpOrAreInvalid) {
  auto with = [](std::uint64_t ops, std::uint64_t steals, std::uint64_t reserved) {
    abi::WorkloadStats s{};
    s.version = abi::kWorkloadStatsVersion;
    s.ops = ops;
    s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_lock_stealing)] = steals;
    s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_reserved)] = reserved;
    s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_no_steal)] = 1000;  // not a path
    return s;
  };
  LockRun run;
  run.mode = "guest";
  run.lock = "pvbounded";
  run.workload = "lockbench";
  run.cpus = 3;
  run.samples = {{with(100, 30, 5), 1.0, 0, 1, 1}, {with(10, 20, 0), 1.0, 0, 1, 1}, {with(7, 0, 0), 1.0, 0, 1, 1}};
  const auto j = to_json(run);
  const auto& all = j["acquisitions_by_path"];
  EXPECT_EQ(all["fast"], 65u + 0u + 7u);
  EXPECT_EQ(all["steal"], 50u);
  EXPECT_EQ(all["reserved"], 5u);
  EXPECT_EQ(all["queue"], 0u);
  EXPECT_EQ(all["invalid"], 10u) << "vCPU 1 claims 20 steals in 10 acquisitions";
  ASSERT_EQ(j["per_vcpu_acquisitions_by_path"].size(), 3u);
  EXPECT_EQ(j["per_vcpu_acquisitions_by_path"][0]["fast"], 65u);
  EXPECT_EQ(j["per_vcpu_acquisitions_by_path"][1]["fast"], 0u);
  EXPECT_EQ(j["per_vcpu_acquisitions_by_path"][1]["invalid"], 10u);
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p) EXPECT_TRUE(all.contains(locks::kAcqPathNames[p]));

  // The human summary names the paths in one line and flags the invalid counts.
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  print_summary(run, j, sink);
  std::rewind(sink);
  std::string text;
  for (int c; (c = std::fgetc(sink)) != EOF;) text += static_cast<char>(c);
  std::fclose(sink);
  EXPECT_NE(text.find("acquisitions by path: fast 72 (61.5%) steal 50 (42.7%) reserved 5 (4.3%)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("!!! 10 path counts beyond the acquisitions"), std::string::npos) << text;

  // Saturating: forged counts never wrap into a small fast count.
  const PathFigures f = path_figures(forged());
  EXPECT_EQ(f.by_path[0], 0u);
  EXPECT_GT(f.invalid, 0u);
}

// Up to a screen of CPUs the summary lists every CPU's count; beyond it, the
// spread and the CPUs at the extremes (every CPU stays in the JSON).
TEST(LockStats, PerCpuCountsAreSummarisedBeyondAScreen) {
  const auto text_of = [](unsigned cpus) {
    LockRun run;
    run.mode = "guest";
    run.lock = "tas";
    run.workload = "lockbench";
    run.cpus = cpus;
    for (unsigned i = 0; i < cpus; ++i) {
      abi::WorkloadStats s{};
      s.version = abi::kWorkloadStatsVersion;
      s.ops = 1000 + i;
      s.elapsed_cycles = 1000;
      s.tsc_khz = 1000;
      run.samples.push_back({s, 1.0, 0, 1, 1});
    }
    std::FILE* sink = std::tmpfile();
    print_summary(run, to_json(run), sink);
    std::rewind(sink);
    std::string text;
    for (int c; (c = std::fgetc(sink)) != EOF;) text += static_cast<char>(c);
    std::fclose(sink);
    return text;
  };
  const auto small = text_of(report::kTableVcpus);
  EXPECT_NE(small.find("per-vCPU ops (finish time): 1000 ("), std::string::npos) << small;
  const auto big = text_of(report::kTableVcpus + 1);
  EXPECT_EQ(big.find("per-vCPU ops (finish time)"), std::string::npos) << big;
  EXPECT_NE(big.find(fmt::format("per-vCPU ops: min 1000 (vCPU 0), p50 {}, p90 {}, max {} (vCPU {}); every vCPU is "
                                 "in the JSON (--json)",
                                 1016, 1029, 1032, 32)),
            std::string::npos)
      << big;
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

// Two CPUs that each did 1000 acquisitions (--iterations), one finishing in
// 1 s, the other in 2 s (TSC at 1 GHz).
LockRun fixed_work_run() {
  LockRun run;
  run.mode = "native";
  run.lock = "ticket";
  run.workload = "lockbench";
  run.cpus = 2;
  for (std::uint64_t seconds : {1, 2}) {
    abi::WorkloadStats s{};
    s.version = abi::kWorkloadStatsVersion;
    s.ops = 1000;
    s.tsc_khz = 1000000;
    s.elapsed_cycles = seconds * 1000000000;
    s.window_cycles = 10000000;  // 10 ms
    for (unsigned w = 0; w < 100 * seconds && w < abi::kFairnessWindows; ++w) s.window_ops[w] = 10 / seconds;
    run.samples.push_back({s, 3.0, 7, std::nullopt, 100});
  }
  return run;
}

TEST(LockStats, FixedWorkRunsAreJudgedByRatesAndFinishTimes) {
  const LockMetrics m = analyse(fixed_work_run());
  ASSERT_TRUE(m.fairness_ops);
  EXPECT_EQ(m.fairness_ops->jain, 1.0) << "equal counts: Jain over counts says nothing here";
  ASSERT_TRUE(m.fairness_rate);
  EXPECT_NEAR(m.fairness_rate->jain, 0.9, 1e-12);  // rates 1000 and 500: 1500^2 / (2 * 1.25e6)
  ASSERT_TRUE(m.finish_spread && m.finish_spread->max_min_ratio);
  EXPECT_NEAR(*m.finish_spread->max_min_ratio, 2.0, 1e-12);
  EXPECT_NEAR(m.duration_s, 2.0, 1e-12);
  // Windows: only the 100 windows both CPUs ran through are analysed.
  ASSERT_TRUE(m.windows);
  EXPECT_EQ(m.windows->fairness.windows, 100u);
  EXPECT_NEAR(m.windows->window_ms, 10.0, 1e-9);
  EXPECT_EQ(m.windows->fairness.starved_windows, 0u);
  const auto j = to_json(fixed_work_run());
  EXPECT_NEAR(j["fairness"]["jain"].get<double>(), 0.9, 1e-12);
  EXPECT_EQ(j["fairness_ops"]["jain"].get<double>(), 1.0);
  EXPECT_EQ(j["window_fairness"]["windows"].get<std::size_t>(), 100u);
}

TEST(LockStats, WindowCostsNeedEveryCpusMarks) {
  LockRun run = fixed_work_run();
  const auto j0 = to_json(run);
  EXPECT_TRUE(j0["cpu_seconds_window"].is_null()) << "no CPU was sampled at its window marks";
  EXPECT_EQ(j0["cpu_seconds_total"].get<double>(), 6.0);
  metrics::ThreadUsage w;
  w.cpu_seconds = 1.0;
  w.involuntary_switches = 2;
  w.runqueue_wait_ns = 5;
  run.samples[0].window = w;
  EXPECT_TRUE(to_json(run)["cpu_seconds_window"].is_null()) << "one CPU sampled is not the window's cost";
  run.samples[1].window = w;
  const auto j = to_json(run);
  EXPECT_EQ(j["cpu_seconds_window"].get<double>(), 2.0);
  EXPECT_EQ(j["ops_per_cpu_second_window"].get<double>(), 1000.0);  // 2000 ops / 2 CPU-seconds
  EXPECT_EQ(j["ops_per_cpu_second_total"].get<double>(), 2000.0 / 6.0);
  EXPECT_EQ(j["involuntary_context_switches_window"].get<std::uint64_t>(), 4u);
  EXPECT_EQ(j["steal_ns_window"].get<std::uint64_t>(), 10u);
  EXPECT_EQ(j["steal_ns_total"].get<std::uint64_t>(), 200u);
}

// The PV counters are a typed list (vmm/pvlock/pv_counters.h): a renamed
// counter no longer compiles, so what is left to check is the summing.
TEST(LockStats, VmmCountersSumEveryVcpu) {
  machine::RunResult run;
  run.vcpus.resize(2);
  run.vcpus[0].pv.halts = 1;
  run.vcpus[0].pv.halts_woken = 1;
  run.vcpus[0].pv.kicks_sent = 2;
  run.vcpus[1].pv.halts = 3;
  run.vcpus[1].pv.halts_polled = 2;
  run.vcpus[1].pv.kicks_dropped = 1;
  const VmmCounters c = vmm_counters(run);
  EXPECT_EQ(c.halts, 4u);
  EXPECT_EQ(c.halts_woken, 3u);  // woken after sleeping, or while polling
  EXPECT_EQ(c.kicks, 2u);
  EXPECT_EQ(c.kicks_dropped, 1u);
}

TEST(LockStats, GuestAndVmmHaltsAndKicksAreCompared) {
  LockRun run = fixed_work_run();
  run.mode = "guest";
  for (auto& s : run.samples) {
    s.stats.pv_halts = 3;
    s.stats.lock_events[static_cast<unsigned>(locks::LockEvent::pv_kick)] = 4;
  }
  VmmCounters vmm;
  vmm.halts = 6;
  vmm.kicks = 8;
  run.vmm = vmm;
  EXPECT_TRUE(to_json(run)["pv_halts_match_vmm"].get<bool>());
  EXPECT_TRUE(to_json(run)["pv_kicks_match_vmm"].get<bool>());
  run.vmm->halts = 5;
  EXPECT_FALSE(to_json(run)["pv_halts_match_vmm"].get<bool>());
}

}  // namespace
}  // namespace lockvisor::lockstat
