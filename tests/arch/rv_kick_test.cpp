// Tests for the RISC-V kick: the sticky latch raises the line once and the
// acknowledgement lowers it; proposed latches nothing, counts a kick to a hart
// not blocking in WFI as dropped, and always takes the target out of KVM_RUN.
#include "vmm/arch/riscv64/rv_kick.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lockvisor::arch::riscv64 {
namespace {

struct FakeKvm {
  std::vector<int> line = std::vector<int>(4, 0);
  std::vector<int> raises = std::vector<int>(4, 0);
  std::vector<int> interrupts = std::vector<int>(4, 0);
  std::vector<bool> blocking = std::vector<bool>(4, false);
  RvKicks::Hooks hooks() {
    return {.set_line =
                [this](unsigned h, bool up) {
                  line[h] = up ? 1 : 0;
                  if (up) ++raises[h];
                },
            .interrupt_run = [this](unsigned h) { ++interrupts[h]; },
            .blocking = [this](unsigned h) { return bool(blocking[h]); }};
  }
};

TEST(RvKicks, StickyKickRaisesTheLineUntilAcknowledged) {
  FakeKvm kvm;
  RvKicks kicks(4, KickMode::kSticky, kvm.hooks());
  kicks.kick(0, 1);
  EXPECT_TRUE(kicks.latched(1));
  EXPECT_EQ(kvm.line[1], 1);
  kicks.kick(2, 1);  // coalesced: the line is already up
  EXPECT_EQ(kvm.raises[1], 1);
  EXPECT_EQ(kicks.counts(1).kicks_received, 1u);
  EXPECT_EQ(kicks.counts(1).kicks_coalesced, 1u);
  EXPECT_EQ(kicks.counts(0).kicks_sent, 1u);
  EXPECT_EQ(kicks.counts(2).kicks_sent, 1u);
  EXPECT_TRUE(kicks.acknowledge(1));  // this wait was ended by a kick
  EXPECT_FALSE(kicks.latched(1));
  EXPECT_EQ(kvm.line[1], 0);
  EXPECT_EQ(kicks.acks(1), 1u);
  EXPECT_FALSE(kicks.acknowledge(1));  // a WFI that returned with nothing latched
  EXPECT_EQ(kicks.acks(1), 1u);
  EXPECT_EQ(kvm.line[1], 0);
  EXPECT_EQ(kvm.interrupts[1], 0);  // the interrupt wakes a blocked WFI: no signal needed
  kicks.kick(1, 1);                  // a self-kick latches as any other
  EXPECT_EQ(kvm.line[1], 1);
}

TEST(RvKicks, ProposedKickLatchesNothingAndDropsOneToARunningHart) {
  FakeKvm kvm;
  RvKicks kicks(4, KickMode::kProposed, kvm.hooks());
  kicks.kick(0, 1);  // hart 1 spinning: lost
  EXPECT_FALSE(kicks.latched(1));
  EXPECT_EQ(kvm.line[1], 0);
  EXPECT_EQ(kvm.interrupts[1], 1);
  EXPECT_EQ(kicks.counts(1).kicks_dropped, 1u);
  EXPECT_EQ(kicks.counts(1).kicks_received, 0u);
  kvm.blocking[1] = true;  // hart 1 in WFI: the signal wakes it
  kicks.kick(0, 1);
  EXPECT_EQ(kvm.interrupts[1], 2);
  EXPECT_EQ(kicks.counts(1).kicks_received, 1u);
  EXPECT_EQ(kicks.counts(1).kicks_dropped, 1u);
  EXPECT_EQ(kvm.raises[1], 0);
}

// Kicks and acknowledgements from several threads: every acknowledgement
// that finds the latch set lowers the line, and the line ends up as the latch
// says (the per-hart mutex orders them).
TEST(RvKicks, LineFollowsTheLatchUnderConcurrentKicksAndAcks) {
  FakeKvm kvm;
  RvKicks kicks(4, KickMode::kSticky, kvm.hooks());
  std::vector<std::thread> threads;
  for (unsigned from = 0; from < 3; ++from)
    threads.emplace_back([&, from] {
      for (int i = 0; i < 2000; ++i) kicks.kick(from, 3);
    });
  std::uint64_t consumed = 0;
  threads.emplace_back([&] {
    for (int i = 0; i < 2000; ++i) consumed += kicks.acknowledge(3) ? 1 : 0;
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(kvm.line[3], kicks.latched(3) ? 1 : 0);
  const auto c = kicks.counts(3);
  EXPECT_EQ(c.kicks_received + c.kicks_coalesced, 6000u);
  // Every latched kick was either consumed by one acknowledgement or is still latched.
  EXPECT_EQ(c.kicks_received, consumed + (kicks.latched(3) ? 1 : 0));
  EXPECT_EQ(kicks.acks(3), consumed);
  EXPECT_EQ(static_cast<std::uint64_t>(kvm.raises[3]), c.kicks_received);
}

}  // namespace
}  // namespace lockvisor::arch::riscv64
