// Waits that end when the run stops, and the process-wide stop signals,
// without KVM: the StopFlag behind --kick-delay-us, the backend's delayed
// kick cut short by stop(), and StopSignals/StopScope (in death-test children,
// since a recorded stop signal is process-wide and permanent).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "vmm/machine/machine.h"
#include "vmm/native/native_runner.h"
#include "vmm/pvlock/userspace_backend.h"

namespace lockvisor {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(StopFlag, SleepsTheWholeDurationWhenNotSet) {
  pvlock::StopFlag flag;
  const auto t0 = Clock::now();
  EXPECT_FALSE(flag.sleep_for(50ms));
  EXPECT_GE(seconds_since(t0), 0.049);
}

TEST(StopFlag, ReturnsAtOnceWhenAlreadySet) {
  pvlock::StopFlag flag;
  flag.set();
  const auto t0 = Clock::now();
  EXPECT_TRUE(flag.sleep_for(std::chrono::hours(1)));
  EXPECT_LT(seconds_since(t0), 1.0);
}

TEST(StopFlag, SetWakesALongSleeper) {
  pvlock::StopFlag flag;
  std::atomic<bool> woke{false};
  const auto t0 = Clock::now();
  std::thread sleeper([&] { woke = flag.sleep_for(std::chrono::hours(1)); });
  std::this_thread::sleep_for(50ms);
  flag.set();
  sleeper.join();
  EXPECT_TRUE(woke.load());
  EXPECT_LT(seconds_since(t0), 5.0);  // not an hour
}

// --kick-delay-us is a wait the end of the run cuts short: a kicker in a
// 30 s delay leaves as soon as the backend stops (watchdog, signal, ...).
TEST(UserspaceBackendStop, StopCutsAKickDelayShort) {
  pvlock::BackendOptions options;
  options.kick_delay_us = 30'000'000;
  pvlock::UserspaceBackend backend(2, options);
  std::atomic<int> result{-1};
  const auto t0 = Clock::now();
  std::thread kicker([&] { result = static_cast<int>(backend.kick(0, 1)); });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(result.load(), -1);  // still delaying
  backend.stop();
  kicker.join();
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(result.load(), static_cast<int>(pvlock::KickResult::kDelivered));
  // After stop() every later delay and halt returns at once, for good.
  const auto t1 = Clock::now();
  backend.kick(1, 0);
  EXPECT_EQ(backend.halt(0, 0), pvlock::HaltOutcome::kStopped);
  EXPECT_LT(seconds_since(t1), 1.0);
}

TEST(UserspaceBackendStop, StopReleasesAHalterAndAKickerTogether) {
  pvlock::BackendOptions options;
  options.kick_delay_us = 30'000'000;
  options.halt_poll = pvlock::HaltPollSetting::fixed(4'000'000'000u);  // would spin for ~66 minutes
  pvlock::UserspaceBackend backend(3, options);
  const auto t0 = Clock::now();
  std::thread halter([&] { EXPECT_EQ(backend.halt(1, 0), pvlock::HaltOutcome::kStopped); });
  std::thread kicker([&] { backend.kick(0, 2); });
  while ((backend.latch_state(1) & pvlock::KickLatch::kHalted) == 0) std::this_thread::yield();
  backend.stop();
  halter.join();
  kicker.join();
  EXPECT_LT(seconds_since(t0), 5.0);
}

// ---- StopSignals, each in a child process of its own (death tests).

class StopSignalsDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// The first signal is recorded and handed to the current scope; the process
// is not killed by it, and SIGHUP counts like SIGTERM.
TEST_F(StopSignalsDeathTest, FirstSignalIsRecordedAndHandedToTheScope) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    EXPECT_EXIT(
        {
          machine::StopSignals signals;
          std::atomic<int> seen{0};
          machine::StopScope scope([&](int s) { seen = s; });
          ::kill(::getpid(), sig);
          const auto give_up = Clock::now() + 2s;
          while (seen.load() == 0 && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
          const bool ok = seen.load() == sig && machine::stop_signal() == sig;
          bool thrown = false;
          try {
            machine::throw_if_stop_signalled();
          } catch (const machine::Interrupted& e) {
            thrown = e.signal() == sig;
          }
          std::_Exit(ok && thrown ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
  }
}

// A signal that came before the scope is handed over when the scope starts.
TEST_F(StopSignalsDeathTest, ScopeStartedAfterTheSignalIsCalledAtOnce) {
  EXPECT_EXIT(
      {
        machine::StopSignals signals;
        ::kill(::getpid(), SIGTERM);
        const auto give_up = Clock::now() + 2s;
        while (machine::stop_signal() == 0 && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
        int seen = 0;
        machine::StopScope scope([&](int s) { seen = s; });
        std::_Exit(seen == SIGTERM ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(StopSignalsDeathTest, SecondSignalEndsTheProcessWith130) {
  EXPECT_EXIT(
      {
        machine::StopSignals signals;
        ::kill(::getpid(), SIGINT);
        const auto give_up = Clock::now() + 2s;
        while (machine::stop_signal() == 0 && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(2s);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "stopped by SIGINT: second signal");
}

// Nothing met the signal: StopSignals ends the process after its grace.
TEST_F(StopSignalsDeathTest, UnmetSignalEndsTheProcessAfterTheGrace) {
  EXPECT_EXIT(
      {
        machine::StopSignals signals;
        ::kill(::getpid(), SIGHUP);
        std::this_thread::sleep_for(machine::StopSignals::kStopGrace + 5s);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "stopped by SIGHUP: still running 3 s later");
}

// A process that waits for lockvisor children outlives their grace and its
// kill of them: its own backstop comes later.
TEST_F(StopSignalsDeathTest, AParentOfChildrenEndsAfterTheLongerGrace) {
  static_assert(machine::StopSignals::kParentStopGrace > machine::StopSignals::kChildStopGrace &&
                machine::StopSignals::kChildStopGrace > machine::StopSignals::kStopGrace);
  EXPECT_EXIT(
      {
        machine::StopSignals signals;
        machine::wait_for_children_on_stop();
        ::kill(::getpid(), SIGHUP);
        std::this_thread::sleep_for(machine::StopSignals::kChildStopGrace);
        std::fprintf(stderr, "alive when its children are killed\n");
        std::this_thread::sleep_for(machine::StopSignals::kParentStopGrace);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "alive when its children are killed.*stopped by SIGHUP: still running 7 s later");
}

// Host threads of a native run cannot be stopped: a signal ends the process.
TEST_F(StopSignalsDeathTest, SignalDuringANativeRunEndsTheProcessAtOnce) {
  EXPECT_EXIT(
      {
        machine::StopSignals signals([] { return native::runs_in_progress().load() > 0; });
        native::runs_in_progress().fetch_add(1);
        ::kill(::getpid(), SIGTERM);
        std::this_thread::sleep_for(2s);  // less than the grace: only the native rule can end it
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "stopped by SIGTERM: a native run");
}

// Once StopSignals is gone (main returned), the signals stay blocked: a late
// one cannot kill the process on its way out.
TEST_F(StopSignalsDeathTest, SignalsStayBlockedAfterTheWatcherEnds) {
  EXPECT_EXIT(
      {
        { machine::StopSignals signals; }
        ::kill(::getpid(), SIGTERM);
        std::this_thread::sleep_for(100ms);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace lockvisor
