// The NUMA locks' bound oracle (vmm/trace/numa_bound_check.h) on synthetic
// timelines: vCPUs 0, 1 on node 0 and 2, 3 on node 1; vCPU 2 waits from 0
// to 10 ms while others take the lock. It must fail a run of bypasses by one
// node longer than the handoff threshold, or one that went on past the time
// threshold, and pass the same waits within them, bypasses by waiters that
// arrived earlier, and same-node ones.
#include "vmm/trace/numa_bound_check.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "locks/lock_events.h"
#include "locks/pvbounded_tuning.h"

namespace lockvisor::trace {
namespace {

constexpr std::uint64_t kUs = 1000, kMs = 1000 * kUs;
using locks::AcqPath;

// Four vCPUs on two nodes, vCPU 2's wait from 0 to 10 ms, and `args` as the
// run's guest arguments.
struct OneWait {
  TraceTimeline t;
  explicit OneWait(const std::string& args, bool topology = true) {
    t.vcpus = 4;
    t.vcpu.resize(4);
    t.end_ns = 20 * kMs;
    t.metadata = {{"vcpus", 4}, {"args", args}};
    if (topology) t.metadata["vcpu_node"] = {0, 0, 1, 1};
    acq(2, 0, 10 * kMs);  // the waiter
  }
  OneWait& acq(unsigned vcpu, std::uint64_t arrive, std::uint64_t acquired, AcqPath path = AcqPath::queue) {
    t.acquisitions.push_back({vcpu, 0, arrive, acquired, acquired + 10 * kUs, static_cast<std::uint8_t>(path)});
    return *this;
  }
  NumaBoundReport check() const { return check_numa_bound(t, numa_bound_rules_from(t.metadata)); }
};

TEST(NumaBoundCheck, ReadsTheRunsThresholdsAndTopology) {
  const NumaBoundRules r = numa_bound_rules_from(
      {{"args", "lock=pvcna cna_threshold=7 cna_threshold_us=250 hq_fairness_threshold=3"}, {"vcpu_node", {0, 1}}});
  EXPECT_TRUE(r.judged);
  EXPECT_EQ(r.holders, 7u);
  EXPECT_EQ(r.time_ns, 250 * kUs);
  EXPECT_FALSE(r.per_node_extra);
  EXPECT_EQ(r.vcpu_node, (std::vector<unsigned>{0, 1}));
  const NumaBoundRules hq = numa_bound_rules_from({{"args", "lock=hq"}, {"vcpu_node", {0, 1}}});
  EXPECT_EQ(hq.holders, locks::pvb::kDefaultHqFairness);
  EXPECT_EQ(hq.time_ns, 0u);
  EXPECT_TRUE(hq.per_node_extra);
  EXPECT_FALSE(numa_bound_rules_from({{"args", "lock=qspinlock"}, {"vcpu_node", {0, 1}}}).judged);
  EXPECT_FALSE(numa_bound_rules_from({{"args", "lock=cna"}}).judged) << "no topology";
}

TEST(NumaBoundCheck, ARunLongerThanTheHandoffThresholdIsAViolation) {
  OneWait b("lock=cna cna_threshold=2 cna_threshold_us=0");
  b.acq(0, 1 * kMs, 2 * kMs).acq(1, 1 * kMs, 3 * kMs).acq(0, 2 * kMs, 4 * kMs);
  const NumaBoundReport r = b.check();
  EXPECT_EQ(r.checked, 4u);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_TRUE(r.violations[0].over_holders);
  EXPECT_EQ(r.violations[0].holders, 3u);
  EXPECT_EQ(r.longest_run, 3u);
  EXPECT_EQ(r.longest_wait_ns, 10 * kMs);
}

TEST(NumaBoundCheck, RunsWithinTheThresholdPass) {
  OneWait b("lock=cna cna_threshold=2 cna_threshold_us=0");
  // Two runs of two, split by a holder of the waiter's own node (vCPU 3),
  // and a node-0 holder that arrived before the waiter (queued ahead).
  b.acq(0, 0, 1 * kMs).acq(1, 1 * kMs, 2 * kMs).acq(0, 1 * kMs, 3 * kMs).acq(3, 0, 4 * kMs);
  b.acq(1, 3 * kMs, 5 * kMs).acq(0, 4 * kMs, 6 * kMs);
  const NumaBoundReport r = b.check();
  EXPECT_TRUE(r.violations.empty());
  EXPECT_EQ(r.longest_run, 2u);
}

TEST(NumaBoundCheck, ARunThatWentOnPastTheTimeThresholdIsAViolation) {
  {
    OneWait b("lock=pvcna cna_threshold_us=1000");
    // The second-to-last holder came 0.5 ms after the first: within 1 ms,
    // however long the last one took to come.
    b.acq(0, 1 * kMs, 1 * kMs).acq(1, 1 * kMs, 1500 * kUs).acq(0, 1 * kMs, 4 * kMs);
    EXPECT_TRUE(b.check().violations.empty());
  }
  OneWait b("lock=pvcna cna_threshold_us=1000");
  b.acq(0, 1 * kMs, 1 * kMs).acq(1, 1 * kMs, 2200 * kUs).acq(0, 1 * kMs, 2500 * kUs);
  const NumaBoundReport r = b.check();
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_TRUE(r.violations[0].over_time);
  EXPECT_FALSE(r.violations[0].over_holders);
  EXPECT_EQ(r.violations[0].decided_ns, 1200 * kUs);
}

// The arrival is stamped before the lock's enqueue: a waiter preempted
// before the run ended may not have queued, so its run is not judged.
TEST(NumaBoundCheck, ARunWhileTheWaiterWasOffItsCpuIsNotJudged) {
  OneWait b("lock=cna cna_threshold=2 cna_threshold_us=0");
  b.acq(0, 1 * kMs, 2 * kMs).acq(1, 1 * kMs, 3 * kMs).acq(0, 2 * kMs, 4 * kMs);
  b.t.vcpu[2].preempted.push_back({500 * kUs, 1500 * kUs});
  const NumaBoundReport r = b.check();
  EXPECT_TRUE(r.violations.empty());
  EXPECT_EQ(r.explained, 1u);
}

// cna: a fast-path acquisition needs a word without a queue, so the waiter
// had not queued before it; only the run after it is judged (2 holders).
TEST(NumaBoundCheck, CnaJudgesOnlyWhatFollowsAFastPathAcquisition) {
  OneWait b("lock=cna cna_threshold=2 cna_threshold_us=0");
  b.acq(0, 1 * kMs, 2 * kMs).acq(1, 1 * kMs, 3 * kMs, AcqPath::fast).acq(0, 2 * kMs, 4 * kMs).acq(1, 3 * kMs, 5 * kMs);
  EXPECT_TRUE(b.check().violations.empty());
  b.acq(0, 4 * kMs, 6 * kMs);
  EXPECT_EQ(b.check().violations.size(), 1u) << "three handoffs after it";
}

TEST(NumaBoundCheck, HqAllowsOneQspinlockModeHolderPerVcpuOfTheNode) {
  OneWait b("lock=hq hq_fairness_threshold=1");
  b.acq(0, 1 * kMs, 2 * kMs).acq(1, 1 * kMs, 3 * kMs).acq(0, 2 * kMs, 4 * kMs);
  EXPECT_TRUE(b.check().violations.empty()) << "1 + 2 vCPUs of node 0";
  b.acq(1, 3 * kMs, 5 * kMs);
  EXPECT_EQ(b.check().violations.size(), 1u);
}

TEST(NumaBoundCheck, WithoutATopologyNothingIsJudged) {
  OneWait b("lock=cna cna_threshold=1", false);
  b.acq(0, 1 * kMs, 2 * kMs).acq(1, 1 * kMs, 3 * kMs);
  const NumaBoundReport r = b.check();
  EXPECT_FALSE(r.rules.judged);
  EXPECT_EQ(r.checked, 0u);
  EXPECT_NE(format_numa_bound_report(b.t, r, 10).find("not judged"), std::string::npos);
}

}  // namespace
}  // namespace lockvisor::trace
