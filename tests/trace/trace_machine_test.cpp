// The timeline of real runs (label "kvm"): an overcommitted ping-pong shows
// halts, kicks as paired flows and host preemptions,
// and a traced lockbench has one wait and one hold slice per acquisition the
// guest counted, placed inside the vCPU's own time in the guest.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/kvm_required.h"
#include "tests/support/run_failure.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/guest_image.h"
#include "locks/lock_events.h"
#include "vmm/lockstat/lock_metrics.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/trace/lock_time.h"
#include "vmm/trace/trace.h"
#include "vmm/trace/trace_reader.h"
#include "vmm/trace/trace_service.h"
#include "vmm/trace/trace_writer.h"

namespace lockvisor::trace {
namespace {
using machine::MachineConfig;
using machine::Outcome;

machine::RunResult traced_run(const kvm::KvmSystem& kvm, MachineConfig config, Trace& trace) {
  config.echo_guest_prints = false;
  config.capture_serial = true;
  config.timeout_s = 120;
  machine::Machine vm(kvm, std::move(config), embedded_guest_image());
  vm.add_service(std::make_unique<trace::TraceService>(trace));
  return vm.run();
}

// lockbench with `lock`, `vcpus` on host CPUs 0-1, `iterations` acquisitions each.
MachineConfig lockbench_config(const char* lock, unsigned vcpus, std::uint64_t iterations) {
  experiment::WorkloadSettings w;
  w.lock = lock;
  w.workload = "lockbench";
  w.iterations = iterations;
  MachineConfig config;
  config.vcpus = vcpus;
  config.pcpus = {0, 1};
  config.program = "lockbench";
  config.workload = experiment::workload_params(w, 1, config.vcpus);
  return config;
}

std::size_t count_named(const nlohmann::json& doc, const std::string& ph, const std::string& name) {
  return static_cast<std::size_t>(std::count_if(doc["traceEvents"].begin(), doc["traceEvents"].end(), [&](const auto& e) {
    return e["ph"] == ph && e["name"] == name;
  }));
}

// Complete events on one tid must nest: each either ends before the next
// starts or contains it (what trace viewers require of "X" events).
void expect_well_nested(const nlohmann::json& doc) {
  std::map<int, std::vector<std::pair<double, double>>> by_tid;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") {
      ASSERT_GE(e["dur"].get<double>(), 0.0);
      by_tid[e["tid"].get<int>()].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    }
  std::size_t bad = 0;
  for (auto& [tid, slices] : by_tid) {
    std::stable_sort(slices.begin(), slices.end(), [](auto a, auto b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open;  // ends of the enclosing slices
    for (const auto& [begin, end] : slices) {
      // ts and dur are printed with nanosecond decimals: allow their rounding.
      while (!open.empty() && open.back() <= begin + 1e-3) open.pop_back();
      if (!open.empty() && end > open.back() + 1e-3) ++bad;  // overlaps its parent's end
      open.push_back(end);
    }
  }
  EXPECT_EQ(bad, 0u) << "slices that overlap without nesting";
}

TEST(TraceMachine, OvercommittedPingPongShowsHaltsKicksAndPreemptions) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  MachineConfig config;
  config.vcpus = 8;
  config.pcpus = {0};
  config.program = "pingpong";
  config.args = "rounds=200";
  Trace trace(TraceOptions{});
  const auto result = traced_run(*kvm, config, trace);
  ASSERT_EQ(result.outcome, Outcome::kCompleted) << test::run_failure(result);
  const auto doc = nlohmann::json::parse(to_trace_json(trace));
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  const auto& meta = doc["metadata"];
  EXPECT_EQ(meta["dropped_events"], 0);

  std::uint64_t halts = 0;
  for (const auto& v : result.vcpus) halts += v.pv.halts;
  EXPECT_EQ(count_named(doc, "X", "halted"), halts) << "one slice per halt the backend counted";
  EXPECT_GT(halts, 0u);

  // Every flow start has its end, with the same id, and the end is not before the start.
  std::map<std::uint64_t, double> starts, ends;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") {
      EXPECT_TRUE(starts.emplace(e["id"].get<std::uint64_t>(), e["ts"].get<double>()).second);
    }
    if (e["ph"] == "f") {
      EXPECT_TRUE(ends.emplace(e["id"].get<std::uint64_t>(), e["ts"].get<double>()).second);
    }
  }
  EXPECT_GT(starts.size(), 0u);
  EXPECT_EQ(starts.size(), ends.size());
  for (const auto& [id, ts] : starts) {
    ASSERT_TRUE(ends.count(id)) << "flow " << id << " has no end";
    EXPECT_LE(ts, ends[id]);
  }
  std::uint64_t woken = 0;
  for (const auto& v : result.vcpus) woken += v.pv.halts_woken;
  std::printf("[ measured ] 8 vCPUs on 1 CPU, 200 rounds: %zu halts, %llu woken, %zu kick flows (%llu unpaired), "
              "%zu preemption slices (page counted %s)\n",
              count_named(doc, "X", "halted"), static_cast<unsigned long long>(woken), starts.size(),
              static_cast<unsigned long long>(meta["kick_flows_unpaired"].get<std::uint64_t>()),
              count_named(doc, "X", "preempted"), meta["host_preemptions"].value("preemptions_counted", nlohmann::json()).dump().c_str());
  // Most woken halts are ended by a traced kick (a kick can ride on another's
  // pending flow: see docs/trace.md).
  EXPECT_GE(starts.size() * 10, woken * 9);

  if (result.runstate != "bpf") {
    if (test::in_ci()) FAIL() << "the run-state page must be live in CI: " << result.runstate_detail;
    GTEST_SKIP() << "no run-state page here (" << result.runstate_detail << "): host preemptions not sampled";
  }
  EXPECT_GT(count_named(doc, "X", "preempted"), 0u) << "8 vCPUs on one CPU are preempted by the host";
  expect_well_nested(doc);
}

// Each record's path (the guest's trace hook, from the path counter that
// moved since its previous record) adds up per vCPU to the path counts of its
// statistics (fast = acquisitions - counted paths): an acquisition that
// counted two paths would make them differ. Two vCPUs on two CPUs: both run,
// so slow paths are taken, and a fair lock does not wait for a descheduled
// turn.
TEST(TraceMachine, EveryRecordsPathAddsUpToTheLocksPathCounts) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  std::uint64_t slow = 0;
  for (const char* lock : {"pvbounded", "pvqspinlock", "ticket", "tas"}) {
    const MachineConfig config = lockbench_config(lock, 2, 20000);
    Trace trace(TraceOptions{});
    const auto result = traced_run(*kvm, config, trace);
    ASSERT_EQ(result.outcome, Outcome::kCompleted) << lock << ": " << result.reason;
    const auto stats = lockstat::workload_stats_from(result);
    const auto doc = nlohmann::json::parse(to_trace_json(trace));
    const auto& meta = doc["metadata"]["locks"];
    ASSERT_EQ(meta["dropped_in_guest"], 0) << lock;
    EXPECT_EQ(meta["invalid_path"], 0) << lock;
    std::map<unsigned, std::map<std::string, std::uint64_t>> traced;
    for (const auto& e : doc["traceEvents"])
      if (e["ph"] == "X" && e["name"] == "hold")
        ++traced[e["tid"].get<unsigned>() - kLockTidBase][e["args"]["path"].get<std::string>()];
    std::array<std::uint64_t, locks::kAcqPathCount> all{};
    for (unsigned i = 0; i < stats.size(); ++i) {
      const lockstat::PathFigures f = lockstat::path_figures(stats[i]);
      EXPECT_EQ(f.invalid, 0u) << lock << " vCPU " << i;
      for (unsigned p = 0; p < locks::kAcqPathCount; ++p) {
        EXPECT_EQ(traced[i][locks::kAcqPathNames[p]], f.by_path[p]) << lock << " vCPU " << i << " " << locks::kAcqPathNames[p];
        all[p] += f.by_path[p];
      }
    }
    // trace-check's per-path lines (lock_time) read the same counts back from the file.
    std::istringstream file(doc.dump());
    const auto by_lock = lock_time(read_trace_json(file, lock), 20000);
    ASSERT_EQ(by_lock.size(), 1u) << lock;
    for (unsigned p = 0; p < locks::kAcqPathCount; ++p)
      EXPECT_EQ(by_lock[0].paths[p].acquisitions, all[p]) << lock << " " << locks::kAcqPathNames[p];
    std::string seen;
    for (unsigned p = 0; p < locks::kAcqPathCount; ++p)
      if (all[p] != 0) seen += fmt::format(" {} {}", locks::kAcqPathNames[p], all[p]);
    std::printf("[ measured ] %s, 2 vCPUs on 2 CPUs:%s\n", lock, seen.c_str());
    slow += 2u * 20000u - all[0];
  }
  // A host busy elsewhere may run one vCPU's loop before the other's, so one
  // lock's run may stay on the fast path; four cannot all have.
  EXPECT_GT(slow, 0u) << "no acquisition of any lock left the fast path: nothing was compared";
}

TEST(TraceMachine, LockbenchHasOneWaitAndHoldPerAcquisitionInsideGuestTime) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const MachineConfig config = lockbench_config("pvqspinlock", 4, 3000);
  Trace trace(TraceOptions{});
  const auto result = traced_run(*kvm, config, trace);
  ASSERT_EQ(result.outcome, Outcome::kCompleted) << test::run_failure(result);
  const auto stats = lockstat::workload_stats_from(result);
  const auto doc = nlohmann::json::parse(to_trace_json(trace));
  const auto& locks = doc["metadata"]["locks"];
  EXPECT_EQ(locks["rejected"], 0);
  EXPECT_EQ(locks["dropped_in_guest"], 0);
  std::uint64_t ops = 0;
  for (const auto& s : stats) ops += s.ops;
  EXPECT_EQ(ops, 4u * 3000u);
  EXPECT_EQ(count_named(doc, "X", "wait"), ops);
  EXPECT_EQ(count_named(doc, "X", "hold"), ops);
  EXPECT_EQ(locks["records"], ops);
  expect_well_nested(doc);

  // The time base: a guest timestamp (the wait's start, a guest rdtsc) must
  // fall inside one of its vCPU's KVM_RUN slices, give or take the error.
  std::map<int, std::vector<std::pair<double, double>>> guest;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "guest")
      guest[e["tid"].get<int>()].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  const double error_us = doc["metadata"]["guest_tsc"]["error_ns"].is_number()
                              ? doc["metadata"]["guest_tsc"]["error_ns"].get<double>() / 1000
                              : 0.0;
  std::size_t inside = 0, total = 0;
  double worst_outside_us = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (!(e["ph"] == "X" && e["name"] == "wait")) continue;
    const int vcpu = e["tid"].get<int>() - static_cast<int>(kLockTidBase);
    const double t = e["ts"].get<double>();
    const auto& slices = guest[vcpu];
    auto it = std::upper_bound(slices.begin(), slices.end(), std::make_pair(t, 1e300));
    double distance = 1e300;
    if (it != slices.begin()) {
      const auto& s = *std::prev(it);
      distance = t <= s.second ? 0 : t - s.second;
    }
    if (it != slices.end()) distance = std::min(distance, it->first - t);
    ++total;
    if (distance <= error_us + 0.1) ++inside;
    worst_outside_us = std::max(worst_outside_us, distance);
  }
  std::printf("[ measured ] lockbench pvqspinlock 4 vCPUs on 2 CPUs: %zu of %zu guest lock timestamps inside their "
              "vCPU's KVM_RUN slices (+- %.3f us error + 0.1 us); farthest outside %.3f us; %s clamped into the run; "
              "guest_tsc %s\n",
              inside, total, error_us, worst_outside_us, locks["clamped"].dump().c_str(),
              doc["metadata"]["guest_tsc"].dump().c_str());
  EXPECT_EQ(inside, total);
}

// Four spinning vCPUs pinned to one host CPU (test-and-set: no halts, almost
// no exits, so each vCPU stays in one KVM_RUN across many host time slices).
// The host lane comes from the run-state program's preemption history, so
// every preemption is drawn at its real place: then at any moment at most
// one vCPU is not descheduled, i.e. the vCPUs' running intervals (the
// window minus their "preempted" slices) must not overlap, and together
// they must fill most of the CPU's time.
TEST(TraceMachine, SpinningVcpusOnOneCpuAreDrawnRunningOneAtATime) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  experiment::WorkloadSettings w;
  w.lock = "tas";
  w.workload = "lockbench";
  w.duration_s = 0.3;
  MachineConfig config;
  config.vcpus = 4;
  config.pcpus = {0};
  config.program = "lockbench";
  config.workload = experiment::workload_params(w, 1, config.vcpus);
  Trace trace(TraceOptions{});
  const auto result = traced_run(*kvm, config, trace);
  ASSERT_EQ(result.outcome, Outcome::kCompleted) << test::run_failure(result);
  if (result.runstate != "bpf") {
    if (test::in_ci()) FAIL() << "the run-state page must be live in CI: " << result.runstate_detail;
    GTEST_SKIP() << "no run-state page here (" << result.runstate_detail << ")";
  }
  const auto doc = nlohmann::json::parse(to_trace_json(trace));
  // Who competes with whom: every vCPU pinned to CPU 0.
  EXPECT_EQ(doc["metadata"]["vcpu_host_cpus"], nlohmann::json::parse("[[0],[0],[0],[0]]"));
  const auto& host = doc["metadata"]["host_preemptions"];
  ASSERT_NE(host["source"].get<std::string>().find("history"), std::string::npos) << host.dump();
  const auto counted = host["preemptions_counted"].get<std::uint64_t>();
  const auto exact = host["exact"].get<std::uint64_t>();
  EXPECT_GT(counted, 20u) << "4 vCPUs on one CPU for 0.3 s are preempted many times";
  EXPECT_EQ(host["missed"], 0);
  EXPECT_TRUE(host["switches_unseen"].is_number());
  EXPECT_GE(exact + 4, counted) << "every finished preemption drawn (one per vCPU may still be under way at the end)";

  // The measured window: the span of the lock waits, its middle 60%.
  double first = 1e300, last = 0;
  std::map<int, std::vector<std::pair<double, double>>> preempted;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double b = e["ts"].get<double>(), end = b + e["dur"].get<double>();
    if (e["name"] == "wait") {
      first = std::min(first, b);
      last = std::max(last, end);
    }
    if (e["name"] == "preempted") {
      EXPECT_EQ(e["args"]["exact"], true);
      preempted[e["tid"].get<int>() - static_cast<int>(kHostTidBase)].push_back({b, end});
    }
  }
  ASSERT_LT(first, last);
  const double lo = first + 0.2 * (last - first), hi = last - 0.2 * (last - first);
  // Running = [lo, hi] minus the vCPU's preemptions (sorted, disjoint on one thread).
  std::vector<std::vector<std::pair<double, double>>> running(4);
  for (int v = 0; v < 4; ++v) {
    auto& p = preempted[v];
    std::sort(p.begin(), p.end());
    double at = lo;
    for (const auto& [b, e] : p) {
      if (e <= at || b >= hi) continue;
      if (b > at) running[v].push_back({at, b});
      at = std::max(at, e);
    }
    if (at < hi) running[v].push_back({at, hi});
  }
  const auto overlap = [](const auto& a, const auto& b) {
    double total = 0;
    for (const auto& x : a)
      for (const auto& y : b) total += std::max(0.0, std::min(x.second, y.second) - std::max(x.first, y.first));
    return total;
  };
  // Exact only where the program saw every switch: a switch-in it never saw
  // (docs/runstate.md, "Accuracy and limits") leaves that vCPU's time off the
  // CPU before it undrawn, of any length, and the vCPU drawn running through
  // it. So the pairs checked are those of vCPUs whose every switch was seen.
  const auto& unseen = host["switches_unseen_by_vcpu"];
  ASSERT_EQ(unseen.size(), 4u) << host.dump();
  double busy = 0, busy_exact = 0, overlapping = 0;
  unsigned exact_vcpus = 0;
  for (int v = 0; v < 4; ++v) {
    double mine = 0;
    for (const auto& r : running[v]) mine += r.second - r.first;
    busy += mine;
    if (unseen[v] != 0) continue;
    ++exact_vcpus;
    busy_exact += mine;
    for (int u = v + 1; u < 4; ++u)
      if (unseen[u] == 0) overlapping += overlap(running[v], running[u]);
  }
  const double span = hi - lo;
  std::printf("[ measured ] 4 spinning vCPUs on one CPU, %.1f ms window: %llu preemptions counted, %llu drawn exact; "
              "vCPUs running %.1f%% of the window, running at once %.2f%% (among the %u vCPUs whose every "
              "switch the program saw)\n",
              span / 1e3, static_cast<unsigned long long>(counted), static_cast<unsigned long long>(exact),
              100 * busy / span, 100 * overlapping / span, exact_vcpus);
  EXPECT_LT(overlapping, 0.02 * span) << "two vCPUs drawn running at once on one CPU";
  // How much of the window some vCPU had the CPU is the host's business:
  // any other task on that CPU (a build, ctest -j, a hog) takes its share,
  // and every vCPU is then drawn preempted, rightly. What the drawing must
  // show is that some vCPU ran, and never two at once (above).
  EXPECT_GT(busy, 0.0) << "no vCPU drawn running in the whole window";
  EXPECT_LT(busy_exact, 1.02 * span) << "the exactly drawn vCPUs ran for longer than the window";
}

// A cap far below the run's size: the lock lane keeps the first records,
// and records + the guest's dropped count still equal the acquisitions; the
// lanes that filled end with a "dropped N events" marker.
TEST(TraceMachine, CapKeepsTheFirstEventsAndCountsTheRest) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const MachineConfig config = lockbench_config("ticket", 2, 2000);
  Trace trace(TraceOptions{4000});  // per vCPU: 500 lock records
  const auto result = traced_run(*kvm, config, trace);
  ASSERT_EQ(result.outcome, Outcome::kCompleted) << test::run_failure(result);
  const auto doc = nlohmann::json::parse(to_trace_json(trace));
  const auto& locks = doc["metadata"]["locks"];
  const std::uint64_t capacity = locks["records_per_vcpu"].get<std::uint64_t>();
  EXPECT_EQ(capacity, lane_quota(4000, 2).lock_records);
  EXPECT_EQ(locks["records"].get<std::uint64_t>(), 2 * capacity);
  EXPECT_EQ(locks["records"].get<std::uint64_t>() + locks["dropped_in_guest"].get<std::uint64_t>(), 2u * 2000u);
  EXPECT_EQ(count_named(doc, "X", "wait"), 2 * capacity);
  std::size_t markers = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "i" && e["tid"].get<int>() >= static_cast<int>(kLockTidBase)) ++markers;
  EXPECT_EQ(markers, 2u) << "one dropped-events marker per vCPU's lock lane";
  EXPECT_GT(doc["metadata"]["dropped_events"].get<std::uint64_t>(), 0u);
  expect_well_nested(doc);
  // The run says what would have kept it whole, and that does.
  const auto& sizing = doc["metadata"]["sizing"];
  ASSERT_TRUE(sizing.is_object());
  const auto suggested = sizing["max_events"].get<std::uint64_t>();
  EXPECT_GE(lane_quota(suggested, 2).lock_records, 2000u);
  EXPECT_FALSE(sizing.contains("memory_mib")) << "the guest's free memory holds 2000 records per vCPU";
  EXPECT_NE(sizing_advice(doc["metadata"]).find(fmt::format("--trace-max-events {}", suggested)), std::string::npos);
  Trace whole(TraceOptions{suggested});
  ASSERT_EQ(traced_run(*kvm, config, whole).outcome, Outcome::kCompleted);
  EXPECT_EQ(whole.dropped_events(), 0u);
  EXPECT_TRUE(sizing_advice(whole.metadata()).empty());
}

}  // namespace
}  // namespace lockvisor::trace
