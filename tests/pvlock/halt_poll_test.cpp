// Halt polling (vmm/pvlock/halt_poll.h) without KVM: the adaptive window's
// grow / shrink / cap rules, the option's spelling, and what the userspace
// backend counts when a poll succeeds or fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "vmm/pvlock/halt_poll.h"
#include "vmm/pvlock/userspace_backend.h"
#include "vmm/util/error.h"

namespace lockvisor::pvlock {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t kUs = 1000;

TEST(HaltPollWindow, OffAndFixedNeverChange) {
  HaltPollWindow off(HaltPollSetting::off());
  HaltPollWindow fixed(HaltPollSetting::fixed(50));
  for (const std::uint64_t blocked : {1 * kUs, 60 * kUs, 10'000 * kUs}) {
    off.update(blocked);
    fixed.update(blocked);
  }
  EXPECT_EQ(off.window_ns(), 0u);
  EXPECT_EQ(fixed.window_ns(), 50 * kUs);
  EXPECT_EQ(fixed.grown() + fixed.shrunk() + off.grown() + off.shrunk(), 0u);
}

TEST(HaltPollWindow, AdaptiveStartsClosedAndOpensAtTheStartValue) {
  HaltPollWindow w(HaltPollSetting::adaptive(200));
  EXPECT_EQ(w.window_ns(), 0u);
  w.update(30 * kUs);  // a short block: polling would have paid off
  EXPECT_EQ(w.window_ns(), 10 * kUs);  // KVM's halt_poll_ns_grow_start
  EXPECT_EQ(w.grown(), 1u);
}

TEST(HaltPollWindow, GrowsByTheFactorWhenTheWakeCameJustAfterTheWindow) {
  HaltPollWindow w(HaltPollSetting::adaptive(200));
  std::vector<std::uint64_t> seen;
  for (int i = 0; i < 5; ++i) {
    w.update(w.window_ns() + 5 * kUs);  // the kick came 5 us after the window closed
    seen.push_back(w.window_ns() / kUs);
  }
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{10, 20, 40, 80, 160}));
}

TEST(HaltPollWindow, IsCappedAtTheMaximum) {
  HaltPollWindow w(HaltPollSetting::adaptive(100));
  // Blocks just after the window, but shorter than the maximum: 10, 20, 40, 80, then 100 (not 160).
  for (int i = 0; i < 20; ++i) w.update(std::min(w.window_ns() + 1 * kUs, 99 * kUs));
  EXPECT_EQ(w.window_ns(), 100 * kUs);
  EXPECT_EQ(w.grown(), 5u);
  w.update(100 * kUs);  // exactly the window: kept
  EXPECT_EQ(w.window_ns(), 100 * kUs);
  w.update(101 * kUs);  // longer than the maximum: closed
  EXPECT_EQ(w.window_ns(), 0u);
}

TEST(HaltPollWindow, KeepsTheWindowWhenTheKickCameInsideIt) {
  HaltPollWindow w(HaltPollSetting::adaptive(200));
  for (int i = 0; i < 3; ++i) w.update(w.window_ns() + 1 * kUs);  // 10, 20, 40
  w.update(15 * kUs);
  EXPECT_EQ(w.window_ns(), 40 * kUs);
}

TEST(HaltPollWindow, ALongBlockClosesIt) {
  HaltPollWindow w(HaltPollSetting::adaptive(200));
  for (int i = 0; i < 4; ++i) w.update(w.window_ns() + 1 * kUs);
  ASSERT_EQ(w.window_ns(), 80 * kUs);
  w.update(201 * kUs);  // longer than the maximum: not worth polling for
  EXPECT_EQ(w.window_ns(), 0u);  // KVM's default shrink factor 0
  EXPECT_EQ(w.shrunk(), 1u);
  w.update(5'000 * kUs);  // already closed: nothing to shrink, and too long to grow
  EXPECT_EQ(w.window_ns(), 0u);
  EXPECT_EQ(w.shrunk(), 1u);
}

TEST(HaltPollWindow, AShrinkFactorDividesAndClosesBelowTheStart) {
  HaltPollWindow w(HaltPollSetting::adaptive(200), HaltPollTuning{10'000, 2, 4});
  for (int i = 0; i < 4; ++i) w.update(w.window_ns() + 1 * kUs);  // 80 us
  w.update(1'000 * kUs);
  EXPECT_EQ(w.window_ns(), 20 * kUs);
  w.update(1'000 * kUs);  // 5 us < start: closed
  EXPECT_EQ(w.window_ns(), 0u);
}

TEST(HaltPollSetting, ParsesEveryForm) {
  EXPECT_EQ(parse_halt_poll("off"), HaltPollSetting::off());
  EXPECT_EQ(parse_halt_poll("fixed:50"), HaltPollSetting::fixed(50));
  EXPECT_EQ(parse_halt_poll("fixed:0"), HaltPollSetting::off());
  EXPECT_EQ(parse_halt_poll("adaptive"), HaltPollSetting::adaptive(200));
  EXPECT_EQ(parse_halt_poll("adaptive:500"), HaltPollSetting::adaptive(500));
  EXPECT_EQ(format_halt_poll(parse_halt_poll("adaptive")), "adaptive:200");
  EXPECT_EQ(format_halt_poll(parse_halt_poll("fixed:7")), "fixed:7");
  for (const char* bad : {"", "on", "fixed", "fixed:", "fixed:-1", "fixed:1000001", "adaptive:0", "adaptive:x",
                          "fixed:5us", "adaptive:99999999999999999999"})
    EXPECT_THROW(parse_halt_poll(bad), Error) << bad;
}

// Kicks vCPU 1 of `backend` from another thread, `delay` after it has
// announced its halt: the delay then runs from the halt's start however late
// the host runs the halting thread.
std::thread kick_later(UserspaceBackend& backend, std::chrono::microseconds delay) {
  return std::thread([&backend, delay] {
    while ((backend.latch_state(1) & KickLatch::kHalted) == 0) std::this_thread::yield();
    std::this_thread::sleep_for(delay);
    backend.kick(0, 1);
  });
}

TEST(UserspaceBackendHaltPoll, AKickInsideTheWindowIsCaughtByPolling) {
  BackendOptions options;
  options.halt_poll = HaltPollSetting::fixed(1'000'000);  // 1 s: the kick comes long before
  UserspaceBackend backend(2, options);
  auto kicker = kick_later(backend, 20ms);
  EXPECT_EQ(backend.halt(1, 0), HaltOutcome::kPolled);
  kicker.join();
  const PvCounts c = backend.counters(1).snapshot();
  EXPECT_EQ(c.halts_polled, 1u);
  EXPECT_EQ(c.halt_polls_failed, 0u);
  EXPECT_GE(c.halt_poll_ns, 15'000'000u);  // it spun until the kick (~20 ms)
  EXPECT_LT(c.halt_poll_ns, 1'000'000'000u);
}

TEST(UserspaceBackendHaltPoll, AKickAfterTheWindowCostsTheWholeWindow) {
  BackendOptions options;
  options.halt_poll = HaltPollSetting::fixed(2'000);  // 2 ms
  UserspaceBackend backend(2, options);
  auto kicker = kick_later(backend, 100ms);
  EXPECT_EQ(backend.halt(1, 0), HaltOutcome::kWoken);
  kicker.join();
  const PvCounts c = backend.counters(1).snapshot();
  EXPECT_EQ(c.halts_woken, 1u);
  EXPECT_EQ(c.halt_polls_failed, 1u);
  EXPECT_GE(c.halt_poll_ns, 2'000'000u);
  EXPECT_LT(c.halt_poll_ns, 100'000'000u);
}

TEST(UserspaceBackendHaltPoll, NoPollingWhenOff) {
  UserspaceBackend backend(2, BackendOptions{});
  auto kicker = kick_later(backend, 10ms);
  EXPECT_EQ(backend.halt(1, 0), HaltOutcome::kWoken);
  kicker.join();
  const PvCounts c = backend.counters(1).snapshot();
  EXPECT_EQ(c.halt_poll_ns, 0u);
  EXPECT_EQ(c.halt_polls_failed, 0u);
}

}  // namespace
}  // namespace lockvisor::pvlock
