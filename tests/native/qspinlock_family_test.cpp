// qspinlock_family_test.cpp: path-specific behaviour of qspinlock, unfair and
// the shared word helpers, driven into exact states and checked through the
// lock word and the lock-event counters.
#include <gtest/gtest.h>

#include "harness.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"
#include "locks/unfair_qspinlock.h"
#include "native_env.h"

namespace lockvisor::test {
namespace {

using Env = NativeEnvT<1>;
namespace q = locks::q;
using locks::LockEvent;

class QSpinLockFamily : public ::testing::Test {
 protected:
  void SetUp() override {
    Env::reset();
    Env::bind_cpu(0);
  }
};

// Spin until pred(word) holds (bounded; fails the test on timeout).
template <class Pred>
bool wait_word(const u32& word, Pred pred) {
  const auto start = std::chrono::steady_clock::now();
  while (!pred(__atomic_load_n(&word, __ATOMIC_ACQUIRE))) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST_F(QSpinLockFamily, WordLayoutMatchesLinux) {
  EXPECT_EQ(q::kLockedMask, 0x000000ffu);
  EXPECT_EQ(q::kPendingVal, 0x00000100u);
  EXPECT_EQ(q::kTailIdxMask, 0x00030000u);
  EXPECT_EQ(q::kTailCpuMask, 0xfffc0000u);
  EXPECT_EQ(q::encode_tail(0, 0), 1u << 18) << "tail 0 must mean 'no queue'";
  EXPECT_EQ(q::tail_cpu(q::encode_tail(5, 2)), 5u);
  EXPECT_EQ(q::tail_idx(q::encode_tail(5, 2)), 2u);
  EXPECT_EQ(q::kSlowVal, 3u);
}

TEST_F(QSpinLockFamily, ByteHelpersPreserveOtherFields) {
  q::QSpinWord w{q::encode_tail(3, 1) | q::kPendingVal};
  EXPECT_EQ(q::cmpxchg_locked(&w, 0, 1, locks::Order::acquire), 0);
  EXPECT_EQ(w.val, q::encode_tail(3, 1) | q::kPendingVal | 1u);
  EXPECT_EQ(q::cmpxchg_locked(&w, 0, 1, locks::Order::acquire), 1) << "byte cmpxchg must fail when locked";
  EXPECT_EQ(q::xchg_locked(&w, 3, locks::Order::relaxed), 1);
  EXPECT_EQ(w.val & q::kLockedMask, 3u);
  EXPECT_EQ(q::xchg_tail(&w, q::encode_tail(9, 0)), q::encode_tail(3, 1) | q::kPendingVal | 3u);
  EXPECT_EQ(w.val, q::encode_tail(9, 0) | q::kPendingVal | 3u);
  q::clear_pending(&w);
  q::clear_locked_release(&w);
  EXPECT_EQ(w.val, q::encode_tail(9, 0));
}

// Two contenders use the pending bit, the third queues:
//   cpu0 holds (0,0,1); cpu1 -> (0,1,1) pending; cpu2 -> (n,1,1) queued;
//   cpu0 unlocks -> cpu1 takes it via (n,1,0)->(n,0,1); cpu2 via the queue.
TEST_F(QSpinLockFamily, SecondContenderUsesPendingThirdQueues) {
  locks::QSpinLock<Env> lock{};
  const u32& word = lock.word()->val;
  std::atomic<int> step{0};
  u32 seen_tail = 0;
  run_on_cpus<Env>(3, [&](unsigned cpu) {
    if (cpu == 0) {
      lock.lock();
      EXPECT_EQ(lock.value(), q::kLockedVal) << "fast path: (0,0,1)";
      step.store(1);
      EXPECT_TRUE(wait_word(word, [](u32 v) { return (v & q::kPendingMask) != 0; })) << "cpu1 never set pending";
      step.store(2);
      EXPECT_TRUE(wait_word(word, [](u32 v) { return (v & q::kTailMask) != 0; })) << "cpu2 never queued";
      seen_tail = __atomic_load_n(&word, __ATOMIC_RELAXED);
      EXPECT_EQ(seen_tail & q::kLockedPendingMask, q::kPendingVal | q::kLockedVal) << "(n,1,1)";
      lock.unlock();
    } else if (cpu == 1) {
      while (step.load() < 1) std::this_thread::yield();
      lock.lock();
      lock.unlock();
    } else {
      while (step.load() < 2) std::this_thread::yield();
      lock.lock();
      lock.unlock();
    }
  });
  EXPECT_EQ(q::tail_cpu(seen_tail), 2u);
  EXPECT_EQ(q::tail_idx(seen_tail), 0u);
  EXPECT_EQ(Env::ev[1].get(LockEvent::lock_pending), 1u) << "cpu1 should win via the pending bit";
  EXPECT_EQ(Env::ev[1].get(LockEvent::lock_slowpath), 0u);
  EXPECT_EQ(Env::ev[2].get(LockEvent::lock_slowpath), 1u) << "cpu2 should go through the MCS queue";
  EXPECT_EQ(Env::ev[2].get(LockEvent::lock_pending), 0u);
  EXPECT_EQ(Env::ev[0].get(LockEvent::lock_pending) + Env::ev[0].get(LockEvent::lock_slowpath), 0u);
  EXPECT_EQ(lock.value(), 0u) << "queue fully drained";
}

// A CPU already using one nesting level queues on node 1 (lock_use_node2)
// and encodes idx 1 in the tail.
TEST_F(QSpinLockFamily, NestedQueueingUsesNextNode) {
  locks::QSpinLock<Env> lock{};
  const u32& word = lock.word()->val;
  std::atomic<int> step{0};
  u32 seen = 0;
  run_on_cpus<Env>(3, [&](unsigned cpu) {
    if (cpu == 0) {
      lock.lock();
      step.store(1);
      EXPECT_TRUE(wait_word(word, [](u32 v) { return (v & q::kPendingMask) != 0; }));
      step.store(2);
      EXPECT_TRUE(wait_word(word, [](u32 v) { return (v & q::kTailMask) != 0; }));
      seen = __atomic_load_n(&word, __ATOMIC_RELAXED);
      lock.unlock();
    } else if (cpu == 1) {
      while (step.load() < 1) std::this_thread::yield();
      lock.lock();
      lock.unlock();
    } else {
      *q::QNodePool<Env>::nesting(2) = 1;  // pretend an outer context is queued
      while (step.load() < 2) std::this_thread::yield();
      lock.lock();
      lock.unlock();
      EXPECT_EQ(*q::QNodePool<Env>::nesting(2), 1u) << "node not released";
      *q::QNodePool<Env>::nesting(2) = 0;
    }
  });
  EXPECT_EQ(q::tail_idx(seen), 1u);
  EXPECT_EQ(q::tail_cpu(seen), 2u);
  EXPECT_EQ(Env::ev[2].get(LockEvent::lock_use_node2), 1u);
}

// All four nodes busy: fall back to trylock spinning (lock_no_node).
TEST_F(QSpinLockFamily, NodeExhaustionFallsBackToTrylock) {
  locks::QSpinLock<Env> lock{};
  const u32& word = lock.word()->val;
  std::atomic<int> step{0};
  run_on_cpus<Env>(3, [&](unsigned cpu) {
    if (cpu == 0) {
      lock.lock();
      step.store(1);
      EXPECT_TRUE(wait_word(word, [](u32 v) { return (v & q::kPendingMask) != 0; }));
      step.store(2);
      // cpu2 cannot queue, so no tail ever appears; give it time to spin.
      while (Env::ev[2].get(LockEvent::lock_no_node) == 0) std::this_thread::yield();
      EXPECT_EQ(__atomic_load_n(&word, __ATOMIC_RELAXED) & q::kTailMask, 0u);
      lock.unlock();
    } else if (cpu == 1) {
      while (step.load() < 1) std::this_thread::yield();
      lock.lock();
      lock.unlock();
    } else {
      *q::QNodePool<Env>::nesting(2) = q::kMaxNodes;
      while (step.load() < 2) std::this_thread::yield();
      lock.lock();
      EXPECT_TRUE(lock.is_locked());
      lock.unlock();
      EXPECT_EQ(*q::QNodePool<Env>::nesting(2), q::kMaxNodes);
      *q::QNodePool<Env>::nesting(2) = 0;
    }
  });
  EXPECT_EQ(Env::ev[2].get(LockEvent::lock_no_node), 1u);
  EXPECT_EQ(lock.value(), 0u);
}

// Fairness of the native lock: with a waiter queued (tail set) but the lock
// free, try_lock refuses.  The unfair lock's single steal takes it, and the
// steal is counted.  The queued waiter is simulated by writing a tail.
TEST_F(QSpinLockFamily, UnfairStealsPastQueueFairDoesNot) {
  const u32 fake_tail = q::encode_tail(7, 0);

  locks::QSpinLock<Env> fair{};
  __atomic_store_n(&fair.word()->val, fake_tail, __ATOMIC_RELAXED);
  EXPECT_TRUE(fair.is_locked()) << "queued waiter: not free for a fair lock";
  EXPECT_FALSE(fair.try_lock()) << "fair trylock must not jump the queue";

  locks::UnfairQSpinLock<Env> unfair{};
  __atomic_store_n(&unfair.word()->val, fake_tail, __ATOMIC_RELAXED);
  EXPECT_FALSE(unfair.is_locked());
  unfair.lock();  // fast path fails (word != 0), the steal succeeds: (n,0,0) -> (n,0,1)
  EXPECT_EQ(unfair.value(), fake_tail | q::kLockedVal);
  EXPECT_EQ(Env::ev[0].get(LockEvent::pv_lock_stealing), 1u);
  EXPECT_EQ(Env::ev[0].get(LockEvent::lock_slowpath), 0u) << "a successful steal never queues";
  EXPECT_FALSE(unfair.try_lock());
  unfair.unlock();
  EXPECT_EQ(unfair.value(), fake_tail) << "unlock must leave the queue alone";
  EXPECT_TRUE(unfair.try_lock()) << "unfair trylock also steals";
  EXPECT_EQ(Env::ev[0].get(LockEvent::pv_lock_stealing), 2u);
  unfair.unlock();

  // Uncontended acquisitions are not steals.
  locks::UnfairQSpinLock<Env> plain{};
  plain.lock();
  plain.unlock();
  EXPECT_TRUE(plain.try_lock());
  plain.unlock();
  EXPECT_EQ(Env::ev[0].get(LockEvent::pv_lock_stealing), 2u);
}

// The unfair lock has no pending path (a stealer could break the pending
// owner's (*,1,0) -> (*,0,1) add): a second contender queues directly.
TEST_F(QSpinLockFamily, UnfairSecondContenderQueues) {
  locks::UnfairQSpinLock<Env> lock{};
  const u32& word = lock.word()->val;
  run_on_cpus<Env>(2, [&](unsigned cpu) {
    if (cpu == 0) {
      lock.lock();
      EXPECT_TRUE(wait_word(word, [](u32 v) { return (v & q::kTailMask) != 0; }));
      EXPECT_EQ(__atomic_load_n(&word, __ATOMIC_RELAXED) & q::kPendingMask, 0u);
      lock.unlock();
    } else {
      while (!lock.is_locked()) std::this_thread::yield();
      lock.lock();
      lock.unlock();
    }
  });
  EXPECT_EQ(Env::ev[1].get(LockEvent::lock_slowpath), 1u);
  EXPECT_EQ(Env::ev[1].get(LockEvent::lock_pending), 0u);
}

}  // namespace
}  // namespace lockvisor::test
