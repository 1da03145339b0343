// Where a lock's time went (vmm/trace/lock_time.h) on a synthetic timeline:
// the held and free shares, the free time by the path that ended each gap,
// and for a long gap what the vCPU that took the lock and the others were
// doing, each instant counted once by the lane that explains it best (a park
// over guest code is a park; a halt inside its exit is a halt).
#include "vmm/trace/lock_time.h"

#include <gtest/gtest.h>

#include "locks/lock_events.h"

namespace lockvisor::trace {
namespace {

using locks::AcqPath;
constexpr std::uint64_t kUs = 1000, kMs = 1000 * kUs;

TracedAcquisition hold(unsigned vcpu, std::uint64_t acquired, AcqPath path) {
  return {vcpu, 0, acquired, acquired, acquired + 100, static_cast<std::uint8_t>(path)};
}

unsigned idx(AcqPath p) { return static_cast<unsigned>(p); }
unsigned idx(VcpuActivity a) { return static_cast<unsigned>(a); }

TEST(LockTime, FreeGapsAreSplitByPathAndExplainedByEveryVcpusLanes) {
  TraceTimeline t;
  t.vcpus = 3;
  t.vcpu.resize(3);
  t.end_ns = 2 * kMs;
  // vCPU 0 runs throughout. vCPU 1 is parked for 750 us while in the guest,
  // then halted (inside its exit) until it takes the lock. vCPU 2 is halted.
  t.vcpu[0].guest = {{0, 2 * kMs}};
  t.vcpu[1].guest = {{0, 2 * kMs}};
  t.vcpu[1].parked = {{100, 750'100}};
  t.vcpu[1].exits = {{750'100, 1'000'100}};
  t.vcpu[1].halted = {{750'100, 1'000'100}};
  t.vcpu[2].guest = {{0, 50}, {1'000'250, 2 * kMs}};
  t.vcpu[2].exits = {{50, 1'000'250}};
  t.vcpu[2].halted = {{50, 1'000'200}};
  // 0: fast at 0; 1: reserved after 1 ms free; 2: steal 100 ns later.
  t.acquisitions = {hold(0, 0, AcqPath::fast), hold(2, 1'000'300, AcqPath::steal), hold(1, 1'000'100, AcqPath::reserved)};

  const auto locks = lock_time(t, 20 * kUs);
  ASSERT_EQ(locks.size(), 1u);
  const LockTime& r = locks[0];
  EXPECT_EQ(r.acquisitions, 3u);
  EXPECT_EQ(r.span_ns, 1'000'400u);
  EXPECT_EQ(r.held_ns, 300u);
  EXPECT_EQ(r.free_before_ns[idx(AcqPath::reserved)], 1 * kMs);
  EXPECT_EQ(r.free_before_ns[idx(AcqPath::steal)], 100u);
  EXPECT_EQ(r.gaps[idx(AcqPath::reserved)], 1u);
  // Only the 1 ms gap is long.
  EXPECT_EQ(r.long_gaps, 1u);
  EXPECT_EQ(r.long_total_ns, 1 * kMs);
  EXPECT_EQ(r.long_by_path_ns[idx(AcqPath::reserved)], 1 * kMs);
  EXPECT_EQ(r.acquirer_ns[idx(VcpuActivity::kParked)], 750 * kUs);
  EXPECT_EQ(r.acquirer_ns[idx(VcpuActivity::kHalted)], 250 * kUs);
  EXPECT_EQ(r.acquirer_ns[idx(VcpuActivity::kGuest)], 0u);
  EXPECT_EQ(r.acquirer_ns[idx(VcpuActivity::kExit)], 0u);
  EXPECT_EQ(r.others_ns[idx(VcpuActivity::kGuest)], 1 * kMs);
  EXPECT_EQ(r.others_ns[idx(VcpuActivity::kHalted)], 1 * kMs);
  EXPECT_EQ(r.others_ns[idx(VcpuActivity::kOther)], 0u);

  const std::string text = format_lock_time(locks);
  EXPECT_NE(text.find("held 0.0 %, free 100.0 %; free before: reserved 100.0 % (1 gaps, mean 1000.00 us), steal 0.0 %"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the vCPU that then took the lock was meanwhile parked 75.0 %, halted 25.0 %; the other vCPUs "
                      "were running guest code 50.0 %, halted 50.0 %"),
            std::string::npos)
      << text;
}

// A lane that filled up ends what can be judged: later holds are left out,
// and a lock with fewer than two holds kept has no entry.
TEST(LockTime, HoldsAfterAFullLockLaneAreLeftOut) {
  TraceTimeline t;
  t.vcpus = 2;
  t.vcpu.resize(2);
  t.end_ns = 10 * kMs;
  t.vcpu[1].lock_lane_until = 5 * kMs;
  t.acquisitions = {hold(0, 1 * kMs, AcqPath::fast), hold(1, 2 * kMs, AcqPath::queue), hold(0, 6 * kMs, AcqPath::fast)};
  const auto locks = lock_time(t, 20 * kUs);
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].acquisitions, 2u);
  EXPECT_EQ(locks[0].free_before_ns[idx(AcqPath::queue)], 1 * kMs - 100);
  EXPECT_EQ(locks[0].others_ns[idx(VcpuActivity::kOther)], 1 * kMs - 100) << "vCPU 0 has no lanes";
  t.vcpu[0].lock_lane_until = 1 * kMs + 500;
  EXPECT_TRUE(lock_time(t, 20 * kUs).empty());
}

}  // namespace
}  // namespace lockvisor::trace
