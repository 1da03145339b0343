// The sticky-kick latch under every interleaving we can force on the host,
// without KVM: the semantics the conformance suite checks through a guest.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "vmm/pvlock/userspace_backend.h"

namespace lockvisor::pvlock {
namespace {

TEST(KickLatch, KickBeforeHaltIsStickyAndConsumedOnce) {
  std::atomic<std::uint64_t> epoch{0};
  KickLatch latch(epoch);
  EXPECT_EQ(latch.kick(KickMode::kSticky), KickDelivery::kDelivered);
  EXPECT_EQ(latch.kick(KickMode::kSticky), KickDelivery::kCoalesced);
  EXPECT_EQ(latch.halt(0), HaltOutcome::kImmediate);
  EXPECT_EQ(latch.state(), 0u);  // consumed: the next halt would block
}

// A halt with a limit: it ends by itself with no kick (and says so), shows
// itself as timed while it waits, and leaves a kick that comes after it to
// the next halt; a kick before the limit ends it as any halt.
TEST(KickLatch, ALimitedHaltExpiresWithoutAKickAndAKickStillEndsIt) {
  std::atomic<std::uint64_t> epoch{0};
  KickLatch latch(epoch);
  EXPECT_EQ(latch.halt(0, nullptr, 1000000), HaltOutcome::kExpired);
  EXPECT_EQ(latch.state(), 0u) << "no halt flags left behind";
  EXPECT_EQ(latch.kick(KickMode::kSticky), KickDelivery::kDelivered);
  EXPECT_EQ(latch.halt(0, nullptr, 1000000), HaltOutcome::kImmediate) << "a kick after an expiry is kept";
  EXPECT_EQ(latch.halt(50000, nullptr, 20000), HaltOutcome::kExpired) << "the limit cuts the poll short";

  std::atomic<int> outcome{-1};
  std::thread halter([&] { outcome = static_cast<int>(latch.halt(0, nullptr, 60'000'000'000)); });
  while ((latch.state() & KickLatch::kHalted) == 0) std::this_thread::yield();
  EXPECT_NE(latch.state() & KickLatch::kTimed, 0u) << "a limited halt is marked timed";
  EXPECT_EQ(latch.kick(KickMode::kSticky), KickDelivery::kDelivered);
  halter.join();
  EXPECT_EQ(outcome.load(), static_cast<int>(HaltOutcome::kWoken));
  EXPECT_EQ(latch.state(), 0u);
}

TEST(KickLatch, LossyDropsKickToRunningVcpu) {
  std::atomic<std::uint64_t> epoch{0};
  KickLatch latch(epoch);
  EXPECT_EQ(latch.kick(KickMode::kLossy), KickDelivery::kDropped);
  EXPECT_EQ(latch.state(), 0u);
}

TEST(KickLatch, KickWakesSleeper) {
  std::atomic<std::uint64_t> epoch{0};
  KickLatch latch(epoch);
  std::atomic<int> outcome{-1};
  std::thread halter([&] { outcome = static_cast<int>(latch.halt(0)); });
  while ((latch.state() & KickLatch::kHalted) == 0) std::this_thread::yield();
  EXPECT_EQ(outcome.load(), -1);  // blocked
  EXPECT_EQ(latch.kick(KickMode::kLossy), KickDelivery::kDelivered);  // lossy still wakes a halted vCPU
  halter.join();
  EXPECT_EQ(outcome.load(), static_cast<int>(HaltOutcome::kWoken));
}

TEST(KickLatch, StopReleasesAndStaysReleased) {
  std::atomic<std::uint64_t> epoch{0};
  KickLatch latch(epoch);
  std::thread halter([&] { EXPECT_EQ(latch.halt(0), HaltOutcome::kStopped); });
  while ((latch.state() & KickLatch::kHalted) == 0) std::this_thread::yield();
  latch.stop();
  halter.join();
  EXPECT_EQ(latch.halt(0), HaltOutcome::kStopped);
}

TEST(KickLatch, PollingCatchesKick) {
  std::atomic<std::uint64_t> epoch{0};
  KickLatch latch(epoch);
  std::atomic<int> outcome{-1};
  std::thread halter([&] { outcome = static_cast<int>(latch.halt(5'000'000'000ull)); });
  while ((latch.state() & KickLatch::kHalted) == 0) std::this_thread::yield();
  latch.kick(KickMode::kSticky);
  halter.join();
  EXPECT_EQ(outcome.load(), static_cast<int>(HaltOutcome::kPolled));
}

// Ping-pong between two host threads through the backend, many rounds: a
// lost wakeup would hang (the test has a generous ctest timeout) and the
// counters must balance exactly.
TEST(UserspaceBackend, PingPongNeverLosesAWakeup) {
  constexpr int kRounds = 20000;
  UserspaceBackend backend(2, BackendOptions{});
  std::atomic<int> turn{0};
  auto player = [&](unsigned me) {
    for (int r = 0; r < kRounds; ++r) {
      while (turn.load() != static_cast<int>(me)) backend.halt(me, 0);
      turn.store(static_cast<int>(1 - me));
      backend.kick(me, static_cast<int>(1 - me));
    }
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  for (unsigned i = 0; i < 2; ++i) {
    const auto& c = backend.counters(i);
    EXPECT_EQ(c.kicks_sent.load(), static_cast<std::uint64_t>(kRounds));
    EXPECT_EQ(c.halts.load(), c.halts_immediate.load() + c.halts_woken.load() + c.halts_polled.load());
  }
}

TEST(UserspaceBackend, InvalidTargetCounted) {
  UserspaceBackend backend(2, BackendOptions{});
  EXPECT_EQ(backend.kick(0, 7), KickResult::kNoSuchTarget);
  EXPECT_EQ(backend.kick(0, -1), KickResult::kNoSuchTarget);
  EXPECT_EQ(backend.counters(0).kicks_invalid.load(), 2u);
  EXPECT_EQ(backend.counters(1).kicks_received.load(), 0u);
}

}  // namespace
}  // namespace lockvisor::pvlock
