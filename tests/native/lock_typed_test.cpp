// lock_typed_test.cpp: behaviour every registry lock must have, run once per
// lock type (typed tests over LOCKVISOR_LOCKS).
#include <gtest/gtest.h>

#include <type_traits>

#include "harness.h"
#include "locks/registry.h"
#include "native_env.h"

namespace lockvisor::test {
namespace {

using Env = NativeEnv;
using AllLocks = locks::LockTypes<::testing::Types, Env>;

template <class L>
class LockTest : public ::testing::Test {
 protected:
  // Two interleaved NUMA nodes (CPU c on node c % 2): the NUMA-aware locks
  // then reorder every queue (secondary queues, node handoffs); the others
  // ignore the node.
  void SetUp() override {
    Env::reset();
    Env::set_numa_nodes(2);
  }
  void TearDown() override {
    // Whatever the lock did, the PV plumbing must balance: every kick is
    // received, coalesced with another, or still pending (sticky), and no
    // wait ever hit the lost-wake-up timeout.
    const EnvStats s = Env::stats();
    EXPECT_EQ(s.kicks_sent, s.kicks_received + s.kicks_coalesced + s.kicks_pending);
    EXPECT_EQ(s.timeouts, 0u) << "a pv wait was never kicked (lost wake-up)";
    EXPECT_EQ(Env::event_total(locks::LockEvent::pv_kick), s.kicks_sent)
        << "lock's pv_kick counter disagrees with kicks the Env saw";
    EXPECT_EQ(Env::event_total(locks::LockEvent::pv_wait), s.waits)
        << "lock's pv_wait counter disagrees with Env::wait() calls";
    EXPECT_EQ(locks::pv::Diag<Env>::corrupted_unlocks, 0u);
  }

  // Modest iteration counts: 8 threads on 2 cores means most hand-offs of a
  // fair lock go to a descheduled thread.
  static u64 iters_for(unsigned threads) {
    switch (threads) {
      case 2: return scaled(50000);
      case 4: return scaled(15000);
      default: return scaled(6000);
    }
  }

  void run_stress(unsigned threads) {
    L lock{};
    const u64 n = iters_for(threads);
    const StressResult r = stress<L, Env>(lock, threads, n);
    EXPECT_EQ(r.violations, 0u) << "two holders seen inside the critical section";
    EXPECT_EQ(r.total, threads * n) << "lost updates to the protected counter";
    EXPECT_FALSE(lock.is_locked());
    RecordProperty("seconds", std::to_string(r.seconds));
    std::printf("[ stats    ] %s x%u: %.3f s, per-thread max/min %llu/%llu, pv_wait %llu, pv_kick %llu\n",
                L::kName, threads, r.seconds, static_cast<unsigned long long>(r.max_per_thread),
                static_cast<unsigned long long>(r.min_per_thread),
                static_cast<unsigned long long>(Env::event_total(locks::LockEvent::pv_wait)),
                static_cast<unsigned long long>(Env::event_total(locks::LockEvent::pv_kick)));
  }
};

TYPED_TEST_SUITE(LockTest, AllLocks, LockNameGenerator);

TYPED_TEST(LockTest, ModelsLockConceptAndIsPlainData) {
  static_assert(locks::Lock<TypeParam>);
  static_assert(std::is_trivially_default_constructible_v<TypeParam>,
                "locks must be usable as zero-initialised shared memory");
  static_assert(std::is_trivially_copyable_v<TypeParam>);
  static_assert(std::is_standard_layout_v<TypeParam>);
  static_assert(sizeof(TypeParam) == 4, "every lock in the registry is one 32-bit word");
  EXPECT_NE(std::string(TypeParam::kDescription), "");
}

TYPED_TEST(LockTest, ZeroInitialisedIsUnlocked) {
  Env::bind_cpu(0);  // a lock may ask Env::cpu() on its fast path (pvconfer records its holder)
  TypeParam lock{};
  EXPECT_FALSE(lock.is_locked());
  lock.lock();
  EXPECT_TRUE(lock.is_locked());
  lock.unlock();
  EXPECT_FALSE(lock.is_locked());
}

TYPED_TEST(LockTest, TryLockFailsWhenHeldSucceedsWhenFree) {
  Env::bind_cpu(0);
  TypeParam lock{};
  ASSERT_TRUE(lock.try_lock());
  EXPECT_TRUE(lock.is_locked());
  EXPECT_FALSE(lock.try_lock()) << "try_lock succeeded on a held lock";
  lock.unlock();
  EXPECT_FALSE(lock.is_locked());
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();

  // Held by one thread: another thread's try_lock fails, lock() waits.
  lock.lock();
  std::atomic<int> phase{0};
  run_on_cpus<Env>(2, [&](unsigned cpu) {
    if (cpu == 1) {
      EXPECT_FALSE(lock.try_lock());
      EXPECT_TRUE(lock.is_locked());
      phase.store(1);
      lock.lock();  // must block until cpu 0 (the test) releases
      EXPECT_EQ(phase.load(), 2) << "lock() returned while the lock was held";
      lock.unlock();
    } else {
      while (phase.load() != 1) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      phase.store(2);
      lock.unlock();  // released on behalf of the test's hold
    }
  });
  EXPECT_FALSE(lock.is_locked());
}

TYPED_TEST(LockTest, ManyUncontendedRoundsWrapCounters) {
  // 70000 > 65536: ticket counters wrap at least once (pvticket twice).
  Env::bind_cpu(0);
  TypeParam lock{};
  for (int i = 0; i < 70000; i++) {
    lock.lock();
    ASSERT_TRUE(lock.is_locked());
    lock.unlock();
    ASSERT_FALSE(lock.is_locked()) << "round " << i;
  }
  // And still correct under contention after the wrap.
  const StressResult r = stress<TypeParam, Env>(lock, 2, 5000);
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 10000u);
}

// Acquisition paths (lock_events.h): an uncontended acquisition counts no
// path event (the fast path costs nothing more), one that had to wait for a
// holder counts exactly one, on the waiting CPU.
TYPED_TEST(LockTest, CountsNoPathUncontendedAndOnePathPerContendedAcquisition) {
  const auto paths_counted = [](unsigned cpu) {
    u64 n = 0;
    for (unsigned p = 1; p < locks::kAcqPathCount; p++) n += Env::ev[cpu].get(locks::kAcqPathEvents[p]);
    return n;
  };
  Env::bind_cpu(0);
  TypeParam lock{};
  for (int i = 0; i < 1000; i++) {
    lock.lock();
    lock.unlock();
  }
  EXPECT_EQ(paths_counted(0), 0u) << "an uncontended acquisition must stay on the fast path";

  lock.lock();  // held for cpu 1 to wait on
  std::atomic<int> phase{0};
  run_on_cpus<Env>(2, [&](unsigned cpu) {
    if (cpu == 1) {
      phase.store(1);
      lock.lock();
      lock.unlock();
    } else {
      while (phase.load() != 1) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      lock.unlock();  // on behalf of the test's hold
    }
  });
  EXPECT_EQ(paths_counted(1), 1u) << "the waiter's acquisition counts exactly one path";
  EXPECT_EQ(paths_counted(0), 0u);
}

TYPED_TEST(LockTest, MutualExclusion2Threads) { this->run_stress(2); }
TYPED_TEST(LockTest, MutualExclusion4Threads) { this->run_stress(4); }
TYPED_TEST(LockTest, MutualExclusion8Threads) { this->run_stress(8); }

}  // namespace
}  // namespace lockvisor::test
