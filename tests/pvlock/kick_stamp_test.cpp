// The VMM's wake latency comes from the kick that actually woke the
// halt; a later coalesced or dropped kick must not overwrite its time.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "tests/support/ci_required.h"
#include "vmm/pvlock/kick_latch.h"
#include "vmm/pvlock/userspace_backend.h"
#include "vmm/util/monotonic_clock.h"

namespace lockvisor::pvlock {
namespace {

using namespace std::chrono_literals;

TEST(KickStamp, TheFirstKickSinceTheLastConsumeOwnsIt) {
  KickStamp stamp;
  EXPECT_TRUE(stamp.on_send(100));
  EXPECT_FALSE(stamp.on_send(200));  // coalesced behind the first
  EXPECT_EQ(stamp.take(), 100u);     // the old single "last kick" time said 200
  EXPECT_EQ(stamp.take(), 0u);
}

TEST(KickStamp, ADroppedKickTakesItsStampBack) {
  KickStamp stamp;
  EXPECT_TRUE(stamp.on_send(300));
  stamp.on_drop(300, true);
  EXPECT_EQ(stamp.take(), 0u);
  EXPECT_TRUE(stamp.on_send(400));
  EXPECT_FALSE(stamp.on_send(500));
  stamp.on_drop(500, false);  // did not own it: leaves the owner's time alone
  EXPECT_EQ(stamp.take(), 400u);
}

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Whether thread `tid` of this process is asleep (state S in its stat line).
bool asleep(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto name_end = stat.rfind(')');  // the name may hold spaces and parentheses
  return name_end != std::string::npos && stat.size() > name_end + 2 && stat[name_end + 2] == 'S';
}

// A real halt, woken by kick 1, while kick 2 arrives 30 ms later but before
// the halter could run (the kicker holds their shared CPU as SCHED_FIFO):
// the latency the VMM records is kick 1's, ~30 ms, not ~0 from kick 2.
TEST(UserspaceBackendWakeLatency, ComesFromTheKickThatWokeNotALaterCoalescedOne) {
  const int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  UserspaceBackend backend(2, BackendOptions{});
  std::atomic<pid_t> halter_tid{0};
  std::thread halter([&] {
    pin_to(cpu);
    halter_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    EXPECT_EQ(backend.halt(1, 0), HaltOutcome::kWoken);
  });
  while ((backend.latch_state(1) & KickLatch::kHalted) == 0) std::this_thread::yield();
  while (!asleep(halter_tid.load())) std::this_thread::sleep_for(1ms);  // on the futex, a real halt
  std::atomic<bool> skipped{false};
  std::uint64_t first_kick_ns = 0;
  std::thread kicker([&] {
    const sched_param fifo{1};
    if (!pin_to(cpu) || sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) {
      skipped = true;
      backend.kick(0, 1);
      return;
    }
    first_kick_ns = monotonic_ns();
    backend.kick(0, 1);
    const auto until = std::chrono::steady_clock::now() + 30ms;
    while (std::chrono::steady_clock::now() < until) {
    }
    backend.kick(0, 1);  // coalesced: the halter has not run yet
    const sched_param other{0};
    sched_setscheduler(0, SCHED_OTHER, &other);
  });
  kicker.join();
  halter.join();
  const std::uint64_t joined_ns = monotonic_ns();
  if (skipped) LOCKVISOR_SKIP_OUTSIDE_CI("needs SCHED_FIFO and CPU affinity (CAP_SYS_NICE) to hold the halter off");
  EXPECT_EQ(backend.counters(1).kicks_coalesced.load(), 1u);
  const auto latencies = backend.wake_latencies(1);
  ASSERT_EQ(latencies.size(), 1u);
  EXPECT_GE(latencies[0], 25'000'000u) << "the coalesced kick's time was used";
  EXPECT_LE(latencies[0], joined_ns - first_kick_ns) << "longer than from kick 1 to the halter's end";
}

// A lossy kick that is dropped leaves no time behind for the next real one:
// the latency recorded fits between the real kick and the halter's end,
// which the 50 ms after the dropped kick do not.
TEST(UserspaceBackendWakeLatency, ADroppedKickLeavesNoStamp) {
  BackendOptions options;
  options.mode = KickMode::kLossy;
  UserspaceBackend backend(2, options);
  EXPECT_EQ(backend.kick(0, 1), KickResult::kDropped);
  std::this_thread::sleep_for(50ms);
  std::thread halter([&] { EXPECT_EQ(backend.halt(1, 0), HaltOutcome::kWoken); });
  while ((backend.latch_state(1) & KickLatch::kHalted) == 0) std::this_thread::yield();
  const std::uint64_t kick_ns = monotonic_ns();
  backend.kick(0, 1);
  halter.join();
  const std::uint64_t joined_ns = monotonic_ns();
  const auto latencies = backend.wake_latencies(1);
  ASSERT_EQ(latencies.size(), 1u);
  EXPECT_LE(latencies[0], joined_ns - kick_ns) << "the dropped kick's time was used";
}

}  // namespace
}  // namespace lockvisor::pvlock
