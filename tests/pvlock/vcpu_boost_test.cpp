// Boosting a vCPU thread (vmm/pvlock/vcpu_boost.h): applied, released by the
// target, ended by the time bound; needs CAP_SYS_NICE (skipped without,
// failed in CI).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/support/ci_required.h"
#include "vmm/pvlock/vcpu_boost.h"
#include "vmm/util/error.h"

namespace lockvisor::pvlock {
namespace {

using namespace std::chrono_literals;

bool fifo_permitted() { return resolve_boost_mechanism(BoostMechanism::kAuto) == BoostMechanism::kFifo; }
constexpr const char* kNoFifo = "SCHED_FIFO not permitted here (needs CAP_SYS_NICE or RLIMIT_RTPRIO)";

// A thread standing in for a vCPU: attaches, then waits to be told to release or leave.
struct FakeVcpu {
  explicit FakeVcpu(VcpuBooster& booster) {
    thread = std::thread([this, &booster] {
      booster.attach(0);
      tid = static_cast<pid_t>(::syscall(SYS_gettid));
      while (!leave.load()) {
        if (release_now.exchange(false)) booster.release(0);
        std::this_thread::sleep_for(1ms);
      }
    });
    while (tid.load() == 0) std::this_thread::yield();
  }
  ~FakeVcpu() {
    leave = true;
    thread.join();
  }
  std::atomic<pid_t> tid{0};
  std::atomic<bool> release_now{false};
  std::atomic<bool> leave{false};
  std::thread thread;
};

void wait_until_boosted(const VcpuBooster& booster) {
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (!booster.boosted(0) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  ASSERT_TRUE(booster.boosted(0)) << "the booster did not apply the boost";
}

TEST(VcpuBooster, FifoBoostIsAppliedAndReleasedByTheTarget) {
  if (!fifo_permitted()) LOCKVISOR_SKIP_OUTSIDE_CI(kNoFifo);
  std::atomic<int> begun{0}, expired{0};
  VcpuBooster booster(1, BoostMechanism::kFifo, 1s, [&](unsigned, bool e) { ++(e ? expired : begun); });
  FakeVcpu vcpu(booster);
  ASSERT_TRUE(booster.boost(0));
  wait_until_boosted(booster);
  EXPECT_EQ(sched_getscheduler(vcpu.tid), SCHED_FIFO);
  vcpu.release_now = true;
  while (booster.boosted(0)) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(sched_getscheduler(vcpu.tid), SCHED_OTHER);
  EXPECT_EQ(begun.load(), 1);
  EXPECT_EQ(expired.load(), 0);
}

TEST(VcpuBooster, TheTimeBoundEndsABoostNobodyReleases) {
  if (!fifo_permitted()) LOCKVISOR_SKIP_OUTSIDE_CI(kNoFifo);
  std::atomic<int> begun{0}, expired{0};
  VcpuBooster booster(1, BoostMechanism::kFifo, 20ms, [&](unsigned, bool e) { ++(e ? expired : begun); });
  FakeVcpu vcpu(booster);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(booster.boost(0));
  wait_until_boosted(booster);
  while (booster.boosted(0)) std::this_thread::sleep_for(1ms);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 19ms);
  EXPECT_EQ(sched_getscheduler(vcpu.tid), SCHED_OTHER);
  EXPECT_EQ(expired.load(), 1);
}

// A guest that asks over and over gets at most every other slice: after a
// boost the bound ended, asking at once and again every millisecond, the
// next boost begins a whole bound after the first ended. The booster runs
// SCHED_FIFO and calls the observer as it acts, so the observer's clock
// readings are its decisions' times (less a policy change each, well under a
// millisecond), whenever the test thread gets to run; without the cool-down
// the second boost would begin within a millisecond or two.
TEST(VcpuBooster, AnExpiredBoostCoolsDownForOneBound) {
  if (!fifo_permitted()) LOCKVISOR_SKIP_OUTSIDE_CI(kNoFifo);
  constexpr auto kBound = 30ms;
  std::atomic<int> begun{0};
  std::atomic<std::int64_t> expired_at{0}, second_begun_at{0};
  const auto now_ns = [] { return std::chrono::steady_clock::now().time_since_epoch().count(); };
  VcpuBooster booster(1, BoostMechanism::kFifo, kBound, [&](unsigned, bool expired) {
    if (expired && expired_at.load() == 0) expired_at = now_ns();
    if (!expired && ++begun == 2) second_begun_at = now_ns();
  });
  FakeVcpu vcpu(booster);
  ASSERT_TRUE(booster.boost(0));
  wait_until_boosted(booster);
  EXPECT_TRUE(booster.boost(0));  // already boosted: not extended, not counted again
  while (expired_at.load() == 0) std::this_thread::sleep_for(100us);
  EXPECT_EQ(begun.load(), 1);
  const auto give_up = std::chrono::steady_clock::now() + 10s;  // a hang guard, not a bound on the cool-down
  while (second_begun_at.load() == 0 && std::chrono::steady_clock::now() < give_up) {
    booster.boost(0);
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_NE(second_begun_at.load(), 0) << "no boost after the cool-down";
  EXPECT_GE(std::chrono::nanoseconds(second_begun_at.load() - expired_at.load()), kBound - 1ms)
      << "boosted again " << (second_begun_at.load() - expired_at.load()) / 1e6 << " ms after the bound ended one";
  EXPECT_EQ(begun.load(), 2);
}

// The bound holds against a target that spins on a CPU it shares with
// another busy thread and never calls in (a vCPU spinning at CPL3): the
// reverter, itself SCHED_FIFO above the target, ends the boost in time.
TEST(VcpuBooster, TheBoundHoldsForASpinningTargetOnASharedCpu) {
  if (!fifo_permitted()) LOCKVISOR_SKIP_OUTSIDE_CI(kNoFifo);
  const int cpu = sched_getcpu();
  std::atomic<bool> leave{false};
  std::atomic<pid_t> tid{0};
  std::atomic<std::int64_t> ended_ns{0};
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  VcpuBooster booster(1, BoostMechanism::kFifo, 4ms, [&](unsigned, bool expired) {
    if (expired) ended_ns = now_ns();
  });
  const auto spin_on_cpu = [&](bool attach) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    if (attach) {
      booster.attach(0);
      tid = static_cast<pid_t>(::syscall(SYS_gettid));
    }
    while (!leave.load(std::memory_order_relaxed)) {
    }
  };
  std::thread target(spin_on_cpu, true), other(spin_on_cpu, false);
  while (tid.load() == 0) std::this_thread::yield();
  const std::int64_t t0 = now_ns();
  ASSERT_TRUE(booster.boost(0));
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (ended_ns.load() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  leave = true;
  target.join();
  other.join();
  ASSERT_NE(ended_ns.load(), 0) << "the boost never ended";
  EXPECT_LT(ended_ns.load() - t0, 20'000'000) << "boost held " << (ended_ns.load() - t0) / 1e6 << " ms";
}

TEST(VcpuBooster, StopEndsEveryBoostAndRefusesNewOnes) {
  if (!fifo_permitted()) LOCKVISOR_SKIP_OUTSIDE_CI(kNoFifo);
  VcpuBooster booster(1, BoostMechanism::kFifo, 10s, nullptr);
  FakeVcpu vcpu(booster);
  ASSERT_TRUE(booster.boost(0));
  wait_until_boosted(booster);
  booster.stop();
  EXPECT_FALSE(booster.boosted(0));
  EXPECT_EQ(sched_getscheduler(vcpu.tid), SCHED_OTHER);
  EXPECT_FALSE(booster.boost(0));
}

TEST(VcpuBooster, AnUnknownThreadOrMechanismOffBoostsNothing) {
  VcpuBooster off(2, BoostMechanism::kOff, 4ms, nullptr);
  off.attach(0);
  EXPECT_FALSE(off.boost(0));
  if (!fifo_permitted()) return;
  VcpuBooster fifo(2, BoostMechanism::kFifo, 4ms, nullptr);
  EXPECT_FALSE(fifo.boost(1));  // vCPU 1 never called in: no thread to boost
}

TEST(BoostMechanism, ParsesAndResolves) {
  EXPECT_EQ(parse_boost_mechanism("fifo"), BoostMechanism::kFifo);
  EXPECT_EQ(parse_boost_mechanism("off"), BoostMechanism::kOff);
  EXPECT_THROW(parse_boost_mechanism("rr"), Error);
  EXPECT_EQ(resolve_boost_mechanism(BoostMechanism::kOff), BoostMechanism::kOff);
  const auto resolved = resolve_boost_mechanism(BoostMechanism::kAuto);
  EXPECT_TRUE(resolved == BoostMechanism::kFifo || resolved == BoostMechanism::kOff);
}

}  // namespace
}  // namespace lockvisor::pvlock
