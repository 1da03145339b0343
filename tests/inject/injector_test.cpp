// The injector's check of a preemption point, on a fake guest memory: what
// a hostile or confused guest cannot make the VMM do.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "vmm/inject/injector.h"

namespace lockvisor::inject {
namespace {

class PreemptionPoint : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kSeed = 11;
  std::vector<std::byte> memory = std::vector<std::byte>(abi::kLockProbeAddr + abi::kLockProbeBytes);

  abi::LockProbeCpu& record(unsigned vcpu) {
    return *reinterpret_cast<abi::LockProbeCpu*>(memory.data() + abi::kLockProbeAddr +
                                                 vcpu * sizeof(abi::LockProbeCpu));
  }
  // The first index the seeded rule chooses at or after `from`.
  static std::uint64_t chosen_index(const abi::PreemptTarget& t, unsigned vcpu, abi::PreemptKind kind,
                                    std::uint64_t from = 0) {
    for (std::uint64_t i = from;; ++i)
      if (abi::preempt_point_chosen(kSeed, vcpu, kind, i, t)) return i;
  }
  // The record a well-behaved guest writes before its ucall.
  void publish(unsigned vcpu, abi::ProbeState state, unsigned lock, std::uint64_t ahead, abi::PreemptKind kind,
               std::uint64_t index) {
    auto& r = record(vcpu);
    r.state = static_cast<abi::u32>(state);
    r.lock = lock;
    r.ahead = ahead;
    r.events[static_cast<unsigned>(kind)] = index + 1;
  }
  machine::VcpuRunner::PreemptVerdict point(Injector& inj, unsigned vcpu, std::uint64_t kind, std::uint64_t lock,
                                           std::uint64_t index) {
    const std::uint64_t args[3] = {kind, lock, index};
    return inj.preemption_point(vcpu, memory, args);
  }
};

TEST_F(PreemptionPoint, AcceptsTheChosenHolderEventAndCountsIt) {
  Injector inj(parse_inject_specs("holder:lock=0,every=5,for=300us,seed=11"), 1, 2);
  const abi::PreemptTarget t{5, 0, 0, 300000};
  const auto k = abi::PreemptKind::kHolder;
  const std::uint64_t i = chosen_index(t, 1, k);
  publish(1, abi::ProbeState::kHolding, 0, 0, k, i);
  const auto v = point(inj, 1, 0, 0, i);
  EXPECT_TRUE(v.refused.empty()) << v.refused;
  EXPECT_EQ(v.park, std::chrono::microseconds(300));
  // The same index again, or an earlier one: refused.
  EXPECT_FALSE(point(inj, 1, 0, 0, i).refused.empty());
  machine::RunResult result;
  result.vcpus.resize(2);
  result.vcpus[1].index = 1;
  inj.report(result);
  EXPECT_EQ(result.vcpus[1].injected.at("holder").count, 1u);
  EXPECT_EQ(result.vcpus[1].injected.at("holder").ns, 300000u);
  EXPECT_EQ(result.vcpus[1].injected.at("holder").event_indices, std::vector<std::uint64_t>{i});
  EXPECT_EQ(result.vcpus[0].injected.at("holder").count, 0u);
  EXPECT_EQ(result.vcpus[0].injected.count("waiter"), 0u) << "only kinds with a schedule are reported";
}

TEST_F(PreemptionPoint, RefusesWhatTheScheduleOrTheRecordDoNotSay) {
  Injector inj(parse_inject_specs("waiter:lock=2,every=3,for=1ms,seed=11"), 1, 2);
  const abi::PreemptTarget t{3, 2, 0, 1000000};
  const auto k = abi::PreemptKind::kWaiter;
  const std::uint64_t i = chosen_index(t, 0, k);
  publish(0, abi::ProbeState::kWaiting, 2, 1, k, i);
  EXPECT_FALSE(point(inj, 0, 0, 2, i).refused.empty()) << "holder kind: no holder schedule";
  EXPECT_FALSE(point(inj, 0, 2, 2, i).refused.empty()) << "kind 2 does not exist";
  EXPECT_FALSE(point(inj, 0, 1, 1, i).refused.empty()) << "not the targeted lock";
  EXPECT_FALSE(point(inj, 0, 1, 99, i).refused.empty()) << "no such slot";
  EXPECT_FALSE(point(inj, 0, 1, 2, i + 1).refused.empty()) << "an index the schedule did not choose";
  EXPECT_FALSE(point(inj, 5, 1, 2, i).refused.empty()) << "no such vCPU";
  publish(0, abi::ProbeState::kWaiting, 2, 2, k, i);
  EXPECT_FALSE(point(inj, 0, 1, 2, i).refused.empty()) << "the record says it is not the first waiter";
  publish(0, abi::ProbeState::kHolding, 2, 1, k, i);
  EXPECT_FALSE(point(inj, 0, 1, 2, i).refused.empty()) << "the record says it holds the lock";
  publish(0, abi::ProbeState::kWaiting, 2, 1, k, i);
  EXPECT_TRUE(point(inj, 0, 1, 2, i).refused.empty()) << "and now everything agrees";
  std::vector<std::byte> tiny(16);
  const std::uint64_t args[3] = {1, 2, chosen_index(t, 0, k, i + 1)};
  EXPECT_FALSE(inj.preemption_point(0, tiny, args).refused.empty()) << "record outside guest memory";
}

TEST_F(PreemptionPoint, NoTargetedScheduleRefusesEverything) {
  Injector inj(parse_inject_specs("periodic:vcpu=0,every=1ms,for=10us"), 1, 1);
  publish(0, abi::ProbeState::kHolding, 0, 0, abi::PreemptKind::kHolder, 0);
  EXPECT_FALSE(point(inj, 0, 0, 0, 0).refused.empty());
}

}  // namespace
}  // namespace lockvisor::inject
