// pv_lock_test.cpp: the PV locks really halt and every halt is paired with a
// kick; the deferred kick of pv_kick_node; the native Env's sticky kicks.
#include <gtest/gtest.h>

#include "harness.h"
#include "locks/pv_qspinlock.h"
#include "locks/pv_ticket.h"
#include "native_env.h"

namespace lockvisor::test {
namespace {

using locks::LockEvent;
namespace q = locks::q;

template <class Env>
void print_events(const char* what) {
  std::printf("[ events   ] %s:", what);
  for (unsigned i = 0; i < locks::kLockEventCount; i++) {
    const u64 v = Env::event_total(static_cast<LockEvent>(i));
    if (v) std::printf(" %s=%llu", locks::kLockEventNames[i], static_cast<unsigned long long>(v));
  }
  const EnvStats s = Env::stats();
  std::printf(" | env: waits=%llu sleeps=%llu sent=%llu received=%llu coalesced=%llu pending=%llu\n",
              static_cast<unsigned long long>(s.waits), static_cast<unsigned long long>(s.sleeps),
              static_cast<unsigned long long>(s.kicks_sent), static_cast<unsigned long long>(s.kicks_received),
              static_cast<unsigned long long>(s.kicks_coalesced), static_cast<unsigned long long>(s.kicks_pending));
}

// Kick/wait bookkeeping that must hold for any PV lock run.
template <class Env>
void expect_kicks_balance() {
  const EnvStats s = Env::stats();
  EXPECT_EQ(Env::event_total(LockEvent::pv_kick), s.kicks_sent) << "lock pv_kick vs Env kicks";
  EXPECT_EQ(Env::event_total(LockEvent::pv_wait), s.waits) << "lock pv_wait vs Env::wait calls";
  EXPECT_EQ(s.kicks_sent, s.kicks_received + s.kicks_coalesced + s.kicks_pending)
      << "a kick vanished: neither received, coalesced nor pending";
  EXPECT_EQ(s.timeouts, 0u) << "lost wake-up: a halted CPU was never kicked";
}

// ---- Native Env: the sticky-kick contract itself ---------------------------

using KickEnv = NativeEnvT<30>;

TEST(NativeEnv, KickBeforeWaitIsSticky) {
  KickEnv::reset();
  u8 byte = 1;
  run_on_cpus<KickEnv>(2, [&](unsigned cpu) {
    if (cpu == 0) return;
    KickEnv::kick(1);  // a kick to ourselves before "halting"
  });
  KickEnv::bind_cpu(1);
  KickEnv::wait(&byte, 0);  // *ptr != val: returns without halting or consuming
  EXPECT_EQ(KickEnv::stats().kicks_pending, 1u);
  KickEnv::wait(&byte, 1);  // halts: the pending kick makes it return at once
  const EnvStats s = KickEnv::stats();
  EXPECT_EQ(s.kicks_received, 1u);
  EXPECT_EQ(s.sleeps, 0u) << "a pending kick must not let the waiter sleep";
  EXPECT_EQ(s.kicks_pending, 0u) << "the halt consumes the kick";
}

TEST(NativeEnv, KickWakesSleepingWaiter) {
  KickEnv::reset();
  u8 byte = 1;
  run_on_cpus<KickEnv>(2, [&](unsigned cpu) {
    if (cpu == 1) {
      KickEnv::wait(&byte, 1);
    } else {
      while (__atomic_load_n(&KickEnv::percpu[1].sleeps, __ATOMIC_RELAXED) == 0) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      KickEnv::kick(1);
    }
  });
  const EnvStats s = KickEnv::stats();
  EXPECT_EQ(s.sleeps, 1u);
  EXPECT_EQ(s.kicks_received, 1u);
  EXPECT_EQ(s.timeouts, 0u);
}

// ---- pvqspinlock -------------------------------------------------------------

using PvEnv = NativeEnvT<31>;
constexpr u32 kSmallSpin = 64;

// 8 threads on 2 cores with a 64-iteration spin threshold: waiters must halt,
// and every halt must end with a kick (or a spurious wake that re-waits).
TEST(PvQSpinLock, HaltsUnderOvercommitAndEveryKickIsReceived) {
  PvEnv::reset();
  locks::PvQSpinLock<PvEnv, kSmallSpin> lock{};
  const u64 n = scaled(6000);
  const StressResult r = stress<decltype(lock), PvEnv>(lock, 8, n);
  print_events<PvEnv>("pvqspinlock x8 spin=64");
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 8 * n);
  EXPECT_FALSE(lock.is_locked());

  const u64 waits = PvEnv::event_total(LockEvent::pv_wait);
  EXPECT_GT(waits, 0u) << "no waiter ever halted";
  EXPECT_GT(PvEnv::stats().sleeps, 0u) << "no waiter ever actually slept";
  EXPECT_EQ(waits, PvEnv::event_total(LockEvent::pv_wait_node) + PvEnv::event_total(LockEvent::pv_wait_head));
  // pvqspinlock kicks only from the unlock slow path, once per slow unlock.
  EXPECT_EQ(PvEnv::event_total(LockEvent::pv_kick), PvEnv::event_total(LockEvent::pv_kick_unlock));
  EXPECT_GT(PvEnv::event_total(LockEvent::pv_kick), 0u);
  // Every slow unlock removed one hash entry that cost >= 1 probe to insert.
  EXPECT_GE(PvEnv::event_total(LockEvent::pv_hash_hops), PvEnv::event_total(LockEvent::pv_kick_unlock));
  EXPECT_EQ(PvEnv::event_total(LockEvent::lock_pending), 0u) << "PV never uses the pending path";
  EXPECT_EQ(locks::pv::Diag<PvEnv>::corrupted_unlocks, 0u);
  expect_kicks_balance<PvEnv>();
  for (const auto& e : locks::pv::Hash<PvEnv>::table) EXPECT_EQ(e.lock, nullptr) << "stale hash entry";
}

// pv_kick_node's deferred kick, step by step:
//   cpu0 holds.  cpu1 queues as head and spins with pending set; cpu2 arrives
//   during that spin, so it queues behind cpu1 (with no pending bit it would
//   stay in the hybrid trylock instead).  Both exhaust the spin threshold and
//   halt: cpu1 hashed with locked = _Q_SLOW_VAL, cpu2 on its node state.
//   cpu0 unlocks: slow path, kicks cpu1.  cpu1 takes the lock and passes
//   headship to the HALTED cpu2: it must not kick it, but hash it and set
//   _Q_SLOW_VAL so that cpu1's own unlock kicks cpu2.  cpu2 is woken once.
// The interleaving needs cpu2 to arrive inside cpu1's spin window (~1M
// pauses); if the scheduler makes it miss, the attempt is repeated.
TEST(PvQSpinLock, HandOffToHaltedSuccessorDefersKickToUnlock) {
  using Env = NativeEnvT<32>;
  constexpr u32 kSpin = 1u << 20;
  using Lock = locks::PvQSpinLock<Env, kSpin>;
  auto load = [](const u32& w) { return __atomic_load_n(&w, __ATOMIC_RELAXED); };
  auto sleeping = [](unsigned c) { return __atomic_load_n(&Env::percpu[c].sleeps, __ATOMIC_RELAXED) > 0; };

  bool reached = false;
  for (int attempt = 0; attempt < 5 && !reached; attempt++) {
    Env::reset();
    Lock lock{};
    const u32& word = lock.word()->val;
    std::atomic<int> step{0};
    run_on_cpus<Env>(3, [&](unsigned cpu) {
      if (cpu == 0) {
        lock.lock();
        step.store(1);
        // cpu1 is the queue head and is spinning (pending set).
        while (q::tail_cpu(load(word)) != 1 || !(load(word) & q::kPendingMask)) std::this_thread::yield();
        step.store(2);
        const auto start = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
          if (q::tail_cpu(load(word)) == 2 && sleeping(1) && sleeping(2)) {
            reached = true;
            break;
          }
          std::this_thread::yield();
        }
        if (reached) {
          EXPECT_EQ(load(word) & q::kLockedMask, q::kSlowVal) << "halted head must have set _Q_SLOW_VAL";
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        lock.unlock();
      } else {
        while (step.load() < static_cast<int>(cpu)) std::this_thread::yield();
        lock.lock();
        lock.unlock();
      }
    });
    if (!reached) continue;
    print_events<Env>("deferred kick");
    EXPECT_EQ(Env::ev[0].get(LockEvent::pv_kick_unlock), 1u) << "cpu0's unlock kicks the halted head";
    EXPECT_EQ(Env::ev[1].get(LockEvent::pv_wait_head), 1u);
    EXPECT_EQ(Env::ev[2].get(LockEvent::pv_wait_node), 1u);
    EXPECT_EQ(Env::ev[1].get(LockEvent::pv_kick_unlock), 1u)
        << "cpu1's unlock must be slow: pv_kick_node hashed the halted cpu2 instead of kicking it";
    EXPECT_EQ(Env::ev[1].get(LockEvent::pv_kick), 1u);
    EXPECT_EQ(Env::stats().kicks_sent, 2u) << "exactly one kick per halted CPU";
    EXPECT_EQ(__atomic_load_n(&Env::percpu[2].kicks_received, __ATOMIC_RELAXED), 1u);
    EXPECT_EQ(Env::ev[2].get(LockEvent::pv_spurious_wakeup), 0u) << "cpu2 was woken before it could run";
    EXPECT_EQ(lock.value(), 0u);
    expect_kicks_balance<Env>();
  }
  EXPECT_TRUE(reached) << "could not produce the head-halted/successor-halted interleaving";
}

// Hybrid unfair trylock: with a queue but no spinning head (no pending bit),
// a newcomer steals the free lock instead of queueing behind a halted head.
TEST(PvQSpinLock, StealsWhileQueueHeadIsNotSpinning) {
  using Env = NativeEnvT<33>;
  Env::reset();
  Env::bind_cpu(0);
  locks::PvQSpinLock<Env> lock{};
  const u32 fake_tail = q::encode_tail(9, 0);
  __atomic_store_n(&lock.word()->val, fake_tail, __ATOMIC_RELAXED);
  lock.lock();
  EXPECT_EQ(lock.value(), fake_tail | q::kLockedVal);
  EXPECT_EQ(Env::ev[0].get(LockEvent::pv_lock_stealing), 1u);
  lock.unlock();  // fast unlock: cmpxchg 1 -> 0
  EXPECT_EQ(lock.value(), fake_tail);
  EXPECT_EQ(Env::ev[0].get(LockEvent::pv_kick_unlock), 0u);
  EXPECT_EQ(*q::QNodePool<Env>::nesting(0), 0u) << "node released after stealing";
}

// ---- pvticket ------------------------------------------------------------------

TEST(PvTicketLock, HaltsUnderOvercommitAndEveryKickIsReceived) {
  using Env = NativeEnvT<34>;
  Env::reset();
  locks::PvTicketLock<Env, kSmallSpin> lock{};
  const u64 n = scaled(3000);
  const StressResult r = stress<decltype(lock), Env>(lock, 8, n);
  print_events<Env>("pvticket x8 spin=64");
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 8 * n);
  EXPECT_FALSE(lock.is_locked());
  EXPECT_GT(Env::event_total(LockEvent::pv_wait), 0u) << "no waiter ever halted";
  EXPECT_GT(Env::stats().sleeps, 0u);
  EXPECT_GT(Env::event_total(LockEvent::pv_kick), 0u);
  EXPECT_LE(Env::event_total(LockEvent::pv_kick), Env::event_total(LockEvent::pv_kick_unlock))
      << "at most one kick per slow-path unlock";
  EXPECT_EQ(lock.value() & locks::pvt::kSlowFlag, 0u) << "SLOWPATH flag left set with no waiters";
  expect_kicks_balance<Env>();
  for (unsigned w = 0; w < locks::pvt::Waiters<Env>::kMaskWords; w++)
    EXPECT_EQ(locks::pvt::Waiters<Env>::mask[w], 0u) << "waiting mask not cleared";
}

// The waiter for the next ticket is kicked by the unlock, exactly once.
TEST(PvTicketLock, UnlockKicksNextTicket) {
  using Env = NativeEnvT<35>;
  Env::reset();
  locks::PvTicketLock<Env, kSmallSpin> lock{};
  run_on_cpus<Env>(2, [&](unsigned cpu) {
    if (cpu == 0) {
      lock.lock();
      while (__atomic_load_n(&Env::percpu[1].sleeps, __ATOMIC_RELAXED) == 0) std::this_thread::yield();
      EXPECT_NE(lock.value() & locks::pvt::kSlowFlag, 0u) << "halted waiter must set SLOWPATH";
      lock.unlock();
    } else {
      while (!lock.is_locked()) std::this_thread::yield();
      lock.lock();
      lock.unlock();
    }
  });
  EXPECT_EQ(Env::ev[0].get(LockEvent::pv_kick_unlock), 1u);
  EXPECT_EQ(Env::ev[0].get(LockEvent::pv_kick), 1u);
  EXPECT_EQ(Env::ev[1].get(LockEvent::pv_wait), 1u);
  EXPECT_EQ(Env::ev[1].get(LockEvent::pv_spurious_wakeup), 0u);
  EXPECT_EQ(lock.value() & locks::pvt::kSlowFlag, 0u) << "new owner clears SLOWPATH when alone";
  expect_kicks_balance<Env>();
}

}  // namespace
}  // namespace lockvisor::test
