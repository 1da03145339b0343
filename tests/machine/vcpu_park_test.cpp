// VcpuPark: the injector's and the control socket's way of holding a vCPU
// thread out of the guest. Each test runs the "vCPU thread" side on its own
// std::thread, as VcpuRunner does.
#include "vmm/machine/vcpu_park.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <thread>

namespace lockvisor::machine {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Waits until the "vCPU thread" sleeps in the park (an observable state, not
// a sleep: a loaded host only makes it longer).
bool until_held(const VcpuPark& park) {
  const auto deadline = Clock::now() + 60s;
  while (!park.held() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  return park.held();
}

TEST(VcpuPark, NothingPendingReturnsAtOnce) {
  VcpuPark park;
  EXPECT_FALSE(park.pending());
  EXPECT_FALSE(park.wait_while_parked().has_value());
  EXPECT_EQ(park.counts().parks, 0u);
}

TEST(VcpuPark, InjectedPreemptionLastsItsDuration) {
  VcpuPark park;
  // The park ends 20 ms after the request, however late the thread comes to
  // it: measured from before the request, not from the wait.
  const auto before = Clock::now();
  ASSERT_TRUE(park.inject(20ms));
  EXPECT_TRUE(park.pending());
  const auto interval = park.wait_while_parked();
  ASSERT_TRUE(interval.has_value());
  EXPECT_EQ(interval->cause, ParkCause::kInjected);
  EXPECT_GE(interval->end - before, 20ms);
  EXPECT_FALSE(park.pending());
  const ParkCounts counts = park.counts();
  EXPECT_EQ(counts.requested, 1u);
  EXPECT_EQ(counts.parks, 1u);
  EXPECT_EQ(counts.parked_ns,
            static_cast<std::uint64_t>(std::chrono::nanoseconds(interval->end - interval->begin).count()));
}

TEST(VcpuPark, OverlappingRequestsExtendOnePark) {
  VcpuPark park;
  ASSERT_TRUE(park.inject(10ms));
  const auto before = Clock::now();
  ASSERT_TRUE(park.inject(30ms));
  ASSERT_TRUE(park.inject(1ms));  // inside the longer one: no effect on the end
  ASSERT_TRUE(park.wait_while_parked().has_value());
  EXPECT_GE(Clock::now() - before, 30ms);
  EXPECT_EQ(park.counts().requested, 3u);
  EXPECT_EQ(park.counts().parks, 1u);
}

// A request that lands while the thread sleeps in a park moves that park's
// end; one that lands after it ended (this thread kept off its CPU for the
// whole first park) is a park of its own. Either way it ends 40 ms after the
// request.
TEST(VcpuPark, InjectionWhileParkedMovesTheEndLater) {
  VcpuPark park;
  ASSERT_TRUE(park.inject(100ms));
  auto parked = std::async(std::launch::async, [&] { return park.wait_while_parked(); });
  ASSERT_TRUE(until_held(park));
  const auto second = Clock::now();
  ASSERT_TRUE(park.inject(40ms));
  const auto first = parked.get();
  ASSERT_TRUE(first.has_value());
  if (!park.pending()) {
    EXPECT_GE(first->end - second, 40ms);
    EXPECT_EQ(park.counts().parks, 1u);
  } else {
    const auto own = park.wait_while_parked();
    ASSERT_TRUE(own.has_value());
    EXPECT_GE(own->end - second, 40ms);
    EXPECT_EQ(park.counts().parks, 2u);
  }
  EXPECT_EQ(park.counts().requested, 2u);
}

TEST(VcpuPark, PauseHoldsUntilResume) {
  VcpuPark park;
  ASSERT_TRUE(park.pause());
  EXPECT_TRUE(park.paused());
  std::atomic<bool> left{false};
  auto parked = std::async(std::launch::async, [&] {
    auto interval = park.wait_while_parked();
    left = true;
    return interval;
  });
  ASSERT_TRUE(until_held(park));
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(left.load()) << "a pause ended without resume()";
  park.resume();
  const auto interval = parked.get();
  ASSERT_TRUE(interval.has_value());
  EXPECT_EQ(interval->cause, ParkCause::kPaused);
  EXPECT_GE(interval->end - interval->begin, 30ms);
  EXPECT_EQ(park.counts().pauses, 1u);
  EXPECT_FALSE(park.pending());
}

// A pause asked for is not a pause taken: held() turns true only once the
// vCPU thread sleeps in wait_while_parked(), and false again when it leaves.
TEST(VcpuPark, HeldSaysWhetherTheThreadSleepsInThePark) {
  VcpuPark park;
  ASSERT_TRUE(park.pause());
  EXPECT_TRUE(park.paused());
  EXPECT_FALSE(park.held()) << "nobody sleeps in the park yet";
  auto parked = std::async(std::launch::async, [&] { return park.wait_while_parked(); });
  const auto deadline = Clock::now() + 10s;
  while (!park.held() && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(park.held());
  park.resume();
  ASSERT_TRUE(parked.get().has_value());
  EXPECT_FALSE(park.held());
  ASSERT_TRUE(park.inject(1ms));
  EXPECT_FALSE(park.held());
  ASSERT_TRUE(park.wait_while_parked().has_value());
  EXPECT_FALSE(park.held());
}

TEST(VcpuPark, StopEndsAPauseAndRefusesLaterParks) {
  VcpuPark park;
  ASSERT_TRUE(park.pause());
  auto parked = std::async(std::launch::async, [&] { return park.wait_while_parked(); });
  std::this_thread::sleep_for(10ms);
  park.stop();
  ASSERT_EQ(parked.wait_for(60s), std::future_status::ready) << "stop() did not end the pause";
  EXPECT_FALSE(park.inject(1s));
  EXPECT_FALSE(park.pause());
  EXPECT_FALSE(park.pending());
  EXPECT_FALSE(park.wait_while_parked().has_value());
}

TEST(VcpuPark, StopEndsALongInjectedPreemption) {
  VcpuPark park;
  ASSERT_TRUE(park.inject(1h));
  auto parked = std::async(std::launch::async, [&] { return park.wait_while_parked(); });
  std::this_thread::sleep_for(10ms);
  park.stop();
  ASSERT_EQ(parked.wait_for(60s), std::future_status::ready) << "stop() did not end the injected preemption";
}

TEST(VcpuPark, InjectionThenPauseAreTwoIntervals) {
  VcpuPark park;
  ASSERT_TRUE(park.inject(5ms));
  ASSERT_TRUE(park.pause());
  const auto first = park.wait_while_parked();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->cause, ParkCause::kInjected);
  EXPECT_TRUE(park.pending());
  auto second = std::async(std::launch::async, [&] { return park.wait_while_parked(); });
  ASSERT_TRUE(until_held(park));
  park.resume();
  const auto interval = second.get();
  ASSERT_TRUE(interval.has_value());
  EXPECT_EQ(interval->cause, ParkCause::kPaused);
}

}  // namespace
}  // namespace lockvisor::machine
