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

TraceTimeline timeline(unsigned vcpus, std::uint64_t end_ns) {
  TraceTimeline t;
  t.vcpus = vcpus;
  t.vcpu.resize(vcpus);
  t.end_ns = end_ns;
  return t;
}
unsigned idx(VcpuActivity a) { return static_cast<unsigned>(a); }

TEST(LockTime, FreeGapsAreSplitByPathAndExplainedByEveryVcpusLanes) {
  TraceTimeline t = timeline(3, 2 * kMs);
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
  TraceTimeline t = timeline(2, 10 * kMs);
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

// Per path: how many acquisitions, each one's handoff latency (0 when the
// acquirer took the lock as it was released), and what the acquirer did
// while the lock was free for it and during its whole wait.
TEST(LockTime, EachPathHasItsHandoffLatenciesAndWhatItsAcquirerDidMeanwhile) {
  TraceTimeline t = timeline(3, 2 * kUs);
  t.vcpu[0].guest = {{0, 2 * kUs}};
  // vCPU 1 queues at 50, halts 100..600 (inside its exit), then spins.
  t.vcpu[1].guest = {{0, 100}, {600, 2 * kUs}};
  t.vcpu[1].exits = {{100, 600}};
  t.vcpu[1].halted = {{100, 600}};
  // vCPU 2 is preempted by the host 1300..1400 inside KVM_RUN.
  t.vcpu[2].guest = {{0, 2 * kUs}};
  t.vcpu[2].preempted = {{1300, 1400}};
  t.acquisitions = {
      {0, 0, 0, 0, 100, static_cast<std::uint8_t>(AcqPath::fast)},
      {1, 0, 50, 1100, 1200, static_cast<std::uint8_t>(AcqPath::queue)},     // 1000 ns after the release
      {0, 0, 1150, 1200, 1300, static_cast<std::uint8_t>(AcqPath::steal)},   // as it was released
      {2, 0, 1000, 1400, 1500, static_cast<std::uint8_t>(AcqPath::queue)},   // 100 ns after
  };
  const auto locks = lock_time(t, 20 * kUs);
  ASSERT_EQ(locks.size(), 1u);
  const PathTime& fast = locks[0].paths[idx(AcqPath::fast)];
  const PathTime& steal = locks[0].paths[idx(AcqPath::steal)];
  const PathTime& queue = locks[0].paths[idx(AcqPath::queue)];
  EXPECT_EQ(fast.acquisitions, 1u);
  EXPECT_EQ(fast.handoffs, 0u) << "the lock's first acquisition follows no release";
  EXPECT_EQ(fast.waits, 1u);
  EXPECT_EQ(fast.wait_ns, 0u);
  EXPECT_EQ(steal.acquisitions, 1u);
  EXPECT_EQ(steal.handoffs, 1u);
  EXPECT_EQ(steal.handoff_max_ns, 0u);
  EXPECT_EQ(steal.wait_activity_ns[idx(VcpuActivity::kGuest)], 50u);
  EXPECT_EQ(queue.acquisitions, 2u);
  EXPECT_EQ(queue.handoffs, 2u);
  EXPECT_EQ(queue.handoff_p50_ns, 100u);
  EXPECT_EQ(queue.handoff_p99_ns, 1000u);
  EXPECT_EQ(queue.handoff_max_ns, 1000u);
  EXPECT_EQ(queue.handoff_activity_ns[idx(VcpuActivity::kHalted)], 500u);
  EXPECT_EQ(queue.handoff_activity_ns[idx(VcpuActivity::kGuest)], 500u);
  EXPECT_EQ(queue.handoff_activity_ns[idx(VcpuActivity::kPreempted)], 100u);
  EXPECT_EQ(queue.handoff_activity_ns[idx(VcpuActivity::kExit)], 0u) << "the halt explains its exit";
  EXPECT_EQ(queue.waits, 2u);
  EXPECT_EQ(queue.wait_ns, 1050u + 400u);
  EXPECT_EQ(queue.wait_activity_ns[idx(VcpuActivity::kGuest)], 550u + 300u);
  EXPECT_EQ(queue.wait_activity_ns[idx(VcpuActivity::kHalted)], 500u);
  EXPECT_EQ(queue.wait_activity_ns[idx(VcpuActivity::kPreempted)], 100u);

  const std::string text = format_lock_time(locks);
  EXPECT_NE(text.find("  queue            2 acquisitions (50.0 %); handoff p50 0.10 us, p99 1.00 us, max 1.00 us; "
                      "while it was free the acquirer was running guest code 45.5 %, halted 45.5 %, preempted by "
                      "the host 9.1 %"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  steal            1 acquisitions (25.0 %); handoff p50 0.00 us"), std::string::npos) << text;

  const nlohmann::json j = lock_time_json(locks);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["paths"]["queue"]["acquisitions"], 2u);
  EXPECT_EQ(j[0]["paths"]["queue"]["handoff_p99_ns"], 1000u);
  EXPECT_EQ(j[0]["paths"]["queue"]["acquirer_during_handoff_ns"]["halted"], 500u);
  EXPECT_EQ(j[0]["paths"]["queue"]["acquirer_during_wait_ns"]["preempted"], 100u);
  EXPECT_FALSE(j[0]["paths"].contains("reserved")) << "only paths that were taken";
}

}  // namespace
}  // namespace lockvisor::trace
