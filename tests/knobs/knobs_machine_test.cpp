// Host knobs (halt polling, kick yield, kick boost) and steal time in real
// runs of the pingpong program: what the backend counts is consistent, and
// the steal-time records the guest enables are read back by the VMM.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "tests/support/kvm_required.h"
#include "tests/support/run_failure.h"
#include "vmm/guest_image.h"
#include "vmm/machine/machine.h"
#include "vmm/report/run_report.h"

namespace lockvisor::machine {
namespace {

MachineConfig pingpong(unsigned vcpus, std::vector<int> pcpus, unsigned rounds = 300) {
  MachineConfig config;
  config.vcpus = vcpus;
  config.pcpus = std::move(pcpus);
  config.program = "pingpong";
  config.args = fmt::format("rounds={}", rounds);
  config.echo_guest_prints = false;
  config.capture_serial = true;
  config.timeout_s = 120;
  return config;
}

RunResult run(const kvm::KvmSystem& kvm, MachineConfig config) {
  Machine vm(kvm, std::move(config), embedded_guest_image());
  return vm.run();
}

pvlock::PvCounts total(const RunResult& r) {
  pvlock::PvCounts sum;
  for (const auto& v : r.vcpus) sum += v.pv;
  return sum;
}

// Two vCPUs that take turns on one host CPU are each runnable-but-waiting
// much of the time: the host's steal figure in their records must grow, and
// match the host's own runqueue wait (schedstat) to within a factor.
TEST(StealTimeMachine, RecordsAreEnabledAndReadBack) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = pingpong(2, {0});
  config.args = "rounds=300 spin=2000000";  // spin before halting: the two compete for the CPU
  const RunResult r = run(*kvm, config);
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  for (const auto& v : r.vcpus) {
    SCOPED_TRACE(fmt::format("vCPU {}", v.index));
    ASSERT_TRUE(v.steal_time_ns.has_value()) << "the guest did not enable its record";
    EXPECT_GT(*v.steal_time_ns, 0u);
    if (v.runqueue_wait_ns && *v.runqueue_wait_ns > 10'000'000) {
      EXPECT_GT(*v.steal_time_ns, *v.runqueue_wait_ns / 4);
      EXPECT_LT(*v.steal_time_ns, *v.runqueue_wait_ns * 4 + 10'000'000);
    }
  }
  const auto json = report::run_to_json(r, config);
  EXPECT_TRUE(json["vcpus"][0]["steal_time_ns"].is_number());
  EXPECT_EQ(json["settings"]["steal_time"], true);
}

TEST(StealTimeMachine, HiddenFeatureMeansNoRecord) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = pingpong(2, {0}, 50);
  config.steal_time = false;
  const RunResult r = run(*kvm, config);
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  for (const auto& v : r.vcpus) EXPECT_FALSE(v.steal_time_ns.has_value()) << "vCPU " << v.index;
  EXPECT_TRUE(report::run_to_json(r, config)["vcpus"][0]["steal_time_ns"].is_null());
}

// Every blocked halt is either caught by the poll or sleeps after it; the
// CPU spent polling is counted, and the halt accounting still adds up.
// Four vCPUs in a ring: after handing the turn on, a vCPU waits for three
// more hand-offs (three kick exits) before its turn comes back, so its halts
// really wait. With two, the partner's hand-back can land while the kicker
// is still returning from its own kick exit, and on a host where exits are
// slow every halt then returns at once, leaving nothing to count.
TEST(HaltPollMachine, PollCountersAddUp) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  for (const auto setting : {pvlock::HaltPollSetting::fixed(200), pvlock::HaltPollSetting::adaptive(500)}) {
    SCOPED_TRACE(pvlock::format_halt_poll(setting));
    auto config = pingpong(4, {});
    config.backend.halt_poll = setting;
    const RunResult r = run(*kvm, config);
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
    const auto c = total(r);
    EXPECT_EQ(c.halts, c.halts_immediate + c.halts_polled + c.halts_woken);
    EXPECT_LE(c.halt_polls_failed, c.halts_woken);
    ASSERT_GT(c.halts_polled + c.halts_woken, 0u) << "no halt waited: " << c.halts << " halts, all immediate";
    if (setting.mode == pvlock::HaltPollMode::kFixed) {
      EXPECT_EQ(c.halt_polls_failed, c.halts_woken);  // a fixed window polls before every sleep
      EXPECT_GT(c.halt_poll_ns, 0u);  // every halt that waited polled first
      EXPECT_GE(c.halt_poll_ns, c.halt_polls_failed * 200'000);
    }
    const auto json = report::run_to_json(r, config);
    EXPECT_EQ(json["settings"]["halt_poll"]["setting"], pvlock::format_halt_poll(setting));
    EXPECT_TRUE(json["vcpus"][0]["pv"].contains("halt_poll_ns"));
  }
}

// Four vCPUs on one host CPU: every woken vCPU last ran on the kicker's CPU,
// so with --kick-yield each delivered kick to a sleeper yields.
TEST(KickYieldMachine, KickersYieldWhenSharingTheCpu) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = pingpong(4, {0}, 200);
  config.backend.kick_yield = true;
  const RunResult r = run(*kvm, config);
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  const auto c = total(r);
  EXPECT_GT(c.kick_yields, 0u);
  EXPECT_LE(c.kick_yields, c.kicks_sent);
  EXPECT_EQ(report::run_to_json(r, config)["settings"]["kick_yield"], true);
}

// --kick-boost: boosts only when this process may use SCHED_FIFO.
TEST(KickBoostMachine, WokenVcpusAreBoostedAndReleased) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  if (pvlock::resolve_boost_mechanism(pvlock::BoostMechanism::kAuto) != pvlock::BoostMechanism::kFifo)
    LOCKVISOR_SKIP_OUTSIDE_CI("SCHED_FIFO not permitted here");
  auto config = pingpong(4, {0}, 200);
  config.backend.kick_boost = true;
  config.backend.boost = pvlock::BoostMechanism::kFifo;
  const RunResult r = run(*kvm, config);
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  const auto c = total(r);
  EXPECT_GT(c.boosts, 0u);
  EXPECT_LE(c.boosts, c.kicks_received);
  EXPECT_LE(c.boosts_expired, c.boosts);
}

}  // namespace
}  // namespace lockvisor::machine
