// Injected preemptions of native runs (vmm/native/thread_parks.h,
// native_injector.h): a park stops its thread for at least its length and
// shows it, a request during a park extends it, a kick sent to a thread
// parked in its futex wait is not lost, only armed threads are parked, the
// periodic schedule stops at its count, a holder schedule parks exactly the
// acquisitions the guest's seeded choice picks, and a waiter schedule parks
// first waiters at its chosen events.
//
// No wall-clock bound on the host scheduler: each test waits for the event
// it needs (the handler entered, a request counted), and the park's own
// length is a lower bound clock_nanosleep guarantees.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "lockvisor/abi/lock_probe.h"
#include "native_env.h"
#include "vmm/host/cpu_set.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/native/native_injector.h"
#include "vmm/native/native_runner.h"
#include "vmm/native/thread_parks.h"
#include "vmm/util/error.h"

namespace lockvisor::test {
namespace {

using namespace std::chrono_literals;
using native::ThreadParks;

// The show callback of these tests: records that the handler entered and,
// while `hold` is set, keeps it there (a spin on an atomic: async-signal-safe),
// so that the test acts while the park is certainly in progress.
// steady_clock is CLOCK_MONOTONIC, the clock the parks end by.
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Shown {
  static inline std::atomic<bool> hold{false};
  static inline std::atomic<unsigned> entered{0};
  static inline std::atomic<bool> up{false};
  static inline std::atomic<std::int64_t> ended_ns{0};  // when the last park ended
  static void show(unsigned, bool parked) {
    if (!parked) ended_ns.store(now_ns());
    up.store(parked);
    if (!parked) return;
    entered.fetch_add(1);
    while (hold.load()) {
    }
  }
  static void reset() {
    hold = false;
    entered = 0;
    up = false;
    ended_ns = 0;
  }
};

template <class Pred>
void wait_for(Pred pred) {
  while (!pred()) std::this_thread::yield();
}

// A worker that counts while it runs, armed for parks as thread 0.
struct Counter {
  ThreadParks& parks;
  std::atomic<unsigned long> count{0};
  std::atomic<bool> stop{false};
  std::thread thread;
  explicit Counter(ThreadParks& p) : parks(p) {
    thread = std::thread([this] {
      parks.arm(0);
      while (!stop.load(std::memory_order_relaxed)) count.fetch_add(1, std::memory_order_relaxed);
      parks.disarm(0);
    });
  }
  ~Counter() {
    stop = true;
    thread.join();
  }
};

TEST(ThreadParks, AParkStopsTheThreadForAtLeastItsLengthAndShowsIt) {
  Shown::reset();
  ThreadParks parks(1, &Shown::show);
  unsigned long before_park = 0;
  std::int64_t requested_ns = 0;
  {
    Counter worker(parks);
    wait_for([&] { return worker.count.load() > 0; });
    Shown::hold = true;
    requested_ns = now_ns();
    ASSERT_TRUE(parks.park(0, 20ms));
    wait_for([] { return Shown::entered.load() == 1; });
    // The thread is in the handler: it does not count.
    before_park = worker.count.load();
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(worker.count.load(), before_park) << "a parked thread ran";
    EXPECT_TRUE(Shown::up.load());
    Shown::hold = false;
    wait_for([] { return !Shown::up.load(); });
    wait_for([&] { return worker.count.load() > before_park; });  // and runs again after
  }
  const auto c = parks.counts(0);
  EXPECT_EQ(c.requested, 1u);
  EXPECT_EQ(c.parks, 1u);
  // A park ends at request + its length (the signal's delivery is not slept
  // again): never before.
  EXPECT_GE(Shown::ended_ns.load() - requested_ns, 20'000'000) << "the park ended early";
  EXPECT_GT(c.parked_ns, 0u);
}

TEST(ThreadParks, ARequestDuringAParkExtendsItInsteadOfAddingOne) {
  Shown::reset();
  ThreadParks parks(1, &Shown::show);
  std::int64_t requested_ns = 0;
  {
    Counter worker(parks);
    wait_for([&] { return worker.count.load() > 0; });
    Shown::hold = true;
    ASSERT_TRUE(parks.park(0, 1us));
    wait_for([] { return Shown::entered.load() == 1; });
    requested_ns = now_ns();
    ASSERT_TRUE(parks.park(0, 30ms));  // while the first one is being served
    Shown::hold = false;
    wait_for([] { return !Shown::up.load(); });
  }
  const auto c = parks.counts(0);
  EXPECT_EQ(c.requested, 2u);
  EXPECT_EQ(c.parks, 1u) << "the second request made a park of its own";
  EXPECT_EQ(Shown::entered.load(), 1u);
  EXPECT_GE(Shown::ended_ns.load() - requested_ns, 30'000'000) << "the extension was not served";
}

TEST(ThreadParks, OnlyAnArmedThreadIsParked) {
  Shown::reset();
  ThreadParks parks(2, &Shown::show);
  EXPECT_FALSE(parks.park(0, 1ms)) << "a thread that never armed";
  EXPECT_FALSE(parks.park(2, 1ms)) << "no such thread";
  std::thread t([&] {
    parks.arm(0);
    parks.disarm(0);
  });
  t.join();
  EXPECT_FALSE(parks.park(0, 1ms)) << "a thread that disarmed";
  EXPECT_EQ(parks.counts(0).requested, 0u);
  EXPECT_EQ(Shown::entered.load(), 0u);
}

// A thread parked in the Env's futex wait: a kick sent while it is parked
// stays in the futex word, and the restarted wait returns with it.
using ParkEnv = NativeEnvT<0x7a01>;

TEST(ThreadParks, AKickSentToAThreadParkedInItsWaitIsNotLost) {
  Shown::reset();
  ParkEnv::reset();
  ParkEnv::set_nr_cpus(2);
  struct Show {
    static void show(unsigned thread, bool parked) {
      ParkEnv::set_preempted(thread, parked);
      Shown::show(thread, parked);
    }
  };
  ThreadParks parks(1, &Show::show);
  volatile u8 word = 0;
  std::thread waiter([&] {
    ParkEnv::bind_cpu(0);
    parks.arm(0);
    ParkEnv::wait(&word, 0);
    parks.disarm(0);
  });
  ParkEnv::bind_cpu(1);
  wait_for([] { return ParkEnv::stats().sleeps == 1; });
  Shown::hold = true;
  ASSERT_TRUE(parks.park(0, 1ms));
  wait_for([] { return Shown::entered.load() == 1; });
  EXPECT_TRUE(ParkEnv::vcpu_is_preempted(0)) << "the lock Env does not show the park";
  EXPECT_FALSE(ParkEnv::vcpu_is_preempted(1));
  ParkEnv::kick(0);
  Shown::hold = false;
  waiter.join();  // returns only if the kick was kept
  const auto s = ParkEnv::stats();
  EXPECT_EQ(s.kicks_received, 1u);
  EXPECT_EQ(s.timeouts, 0u);
  EXPECT_FALSE(ParkEnv::vcpu_is_preempted(0));
  EXPECT_EQ(parks.counts(0).parks, 1u);
}

TEST(NativeInjector, APeriodicScheduleStopsAtItsCount) {
  Shown::reset();
  ThreadParks parks(2, &Shown::show);
  native::NativeInjector injector({inject::parse_inject_spec("periodic:vcpu=all,every=2ms,for=100us,count=3")}, 1,
                                  parks);
  std::atomic<bool> stop{false};
  std::atomic<unsigned> armed{0};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 2; i++)
    threads.emplace_back([&, i] {
      parks.arm(i);
      armed.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
      }
      parks.disarm(i);
    });
  wait_for([&] { return armed.load() == 2; });  // a request to an unarmed thread is dropped
  injector.start();
  wait_for([&] { return parks.counts(0).requested == 3 && parks.counts(1).requested == 3; });
  // Three more periods: a schedule without its count would ask again.
  std::this_thread::sleep_for(10ms);
  injector.stop();
  stop = true;
  for (auto& t : threads) t.join();
  for (unsigned i = 0; i < 2; i++) {
    SCOPED_TRACE(i);
    EXPECT_EQ(parks.counts(i).requested, 3u);
    EXPECT_EQ(injector.counts(i)[static_cast<unsigned>(inject::InjectKind::kRandom)].count, 0u);
    const auto k = injector.counts(i)[static_cast<unsigned>(inject::InjectKind::kPeriodic)];
    EXPECT_EQ(k.count, 3u);
    EXPECT_EQ(k.ns, 300'000u);
    EXPECT_GE(parks.counts(i).parks, 1u);
    EXPECT_LE(parks.counts(i).parks, 3u);
  }
}

// A lockbench run of 3 threads on (at most) two CPUs, 3000 acquisitions
// each, under one --inject schedule.
native::NativeRunConfig lockbench_under(const char* lock, const char* spec, u64 seed) {
  native::NativeRunConfig cfg;
  cfg.lock = lock;
  std::vector<int> cpus = host::allowed_cpus();
  if (cpus.size() > 2) cpus.resize(2);
  cfg.pcpus = cpus;
  cfg.params = abi::default_workload_params(abi::WorkloadKind::kLockbench);
  cfg.params.cpus = 3;
  cfg.params.iterations = 3000;
  cfg.params.duration_ns = 0;
  cfg.inject = {inject::parse_inject_spec(spec)};
  cfg.inject_seed = seed;
  return cfg;
}

u64 violations_of(const std::vector<abi::WorkloadStats>& stats) {
  u64 violations = 0;
  for (const auto& s : stats) violations += s.violations;
  return violations;
}

// The holder schedule natively: every acquisition of slot 0 is an event,
// and exactly the events abi::preempt_point_chosen picks for (seed, thread)
// are parks -- the choice a guest makes with the same seed.
TEST(NativeInjector, AHolderScheduleParksTheAcquisitionsTheSeededChoicePicks) {
  const auto cfg = lockbench_under("tas", "holder:lock=0,every=50,for=20us", 7);
  std::vector<native::NativeThreadUsage> usage;
  const auto stats = native::run_native(cfg, &usage);
  const auto probe = inject::lock_probe_config(cfg.inject, cfg.inject_seed);
  ASSERT_TRUE(probe);
  const auto& target = probe->targets[static_cast<unsigned>(abi::PreemptKind::kHolder)];
  constexpr unsigned kHolder = static_cast<unsigned>(inject::InjectKind::kHolder);
  u64 parked = 0;
  for (unsigned i = 0; i < 3; i++) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(usage.at(i).injected);
    const auto& in = *usage[i].injected;
    const auto& k = in.kinds[kHolder];
    EXPECT_GE(k.events, stats[i].ops) << "an acquisition was not seen";
    EXPECT_EQ(k.points, k.count);
    u64 chosen = 0;
    for (u64 e = 0; e < k.events; e++) chosen += abi::preempt_point_chosen(7, i, abi::PreemptKind::kHolder, e, target);
    EXPECT_EQ(k.count, chosen);
    EXPECT_EQ(in.park.requested, chosen);
    EXPECT_EQ(in.park.parks, chosen) << "a holder parks itself: one park per request";
    EXPECT_EQ(k.ns, chosen * 20'000);
    parked += in.park.parks;
  }
  EXPECT_GT(parked, 0u) << "nothing parked: nothing tested";
  EXPECT_EQ(violations_of(stats), 0u);
}

// The waiter schedule natively: the guest's probe rules on host threads. A
// first waiter behind a holder parks itself at the chosen events; each
// point is a park, and no more points than events. Whether a thread ever
// arrives behind exactly one holder is the host scheduler's doing (on a
// loaded host the threads may never overlap): runs repeat until one has a
// point, checking every run.
TEST(NativeInjector, AWaiterScheduleParksFirstWaitersAtTheSeededChoice) {
  constexpr unsigned kWaiter = static_cast<unsigned>(inject::InjectKind::kWaiter);
  u64 points = 0;
  for (u64 seed = 5; points == 0 && !HasFailure(); seed++) {
    const auto cfg = lockbench_under("ticket", "waiter:lock=0,every=2,for=20us", seed);
    std::vector<native::NativeThreadUsage> usage;
    const auto stats = native::run_native(cfg, &usage);
    for (unsigned i = 0; i < 3; i++) {
      SCOPED_TRACE(i);
      ASSERT_TRUE(usage.at(i).injected);
      const auto& in = *usage[i].injected;
      const auto& k = in.kinds[kWaiter];
      // At most one waiter event per acquisition; every second one a point.
      EXPECT_LE(k.events, stats[i].ops + 1);
      EXPECT_LE(k.points, k.events / 2 + 1);
      EXPECT_EQ(k.count, k.points) << "a chosen point that did not park";
      EXPECT_EQ(in.park.parks, k.points);
      EXPECT_EQ(k.ns, k.points * 20'000);
      points += k.points;
    }
    EXPECT_EQ(violations_of(stats), 0u);
  }
}

TEST(NativeInjector, AScheduleForAThreadBeyondTheRunIsRefused) {
  native::NativeRunConfig cfg;
  cfg.lock = "tas";
  cfg.params = abi::default_workload_params(abi::WorkloadKind::kLockbench);
  cfg.params.cpus = 2;
  cfg.inject = {inject::parse_inject_spec("periodic:vcpu=2,every=1ms,for=10us")};
  EXPECT_THROW(native::run_native(cfg), Error);
}

}  // namespace
}  // namespace lockvisor::test
