// pv_confer_test.cpp: pvconfer's own rules (guest/locks/pv_confer.h) and the
// qspinlock family's run-time options (q_pending, pvq_unfair;
// guest/locks/pvbounded_tuning.h):
//   * the holder is recorded at every acquisition and cleared at release;
//   * a waiter confers (pv_confer, YIELD_TO the holder) exactly when the
//     hint says the recorded holder is preempted, then halts and is woken by
//     the unlock's kick; a running holder gets no confer;
//   * exclusion holds with a hint that always says "preempted";
//   * q_pending=0: the second contender queues instead of taking pending;
//   * pvq_unfair=1: a newcomer steals past a spinning queue head's pending
//     bit, which the PV lock's own trylock never does; exclusion holds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "harness.h"
#include "locks/pv_confer.h"
#include "locks/pv_qspinlock.h"
#include "locks/qspinlock.h"
#include "locks/registry.h"
#include "native_env.h"

namespace lockvisor::test {
namespace {

namespace q = locks::q;
namespace pvb = locks::pvb;
using locks::LockEvent;

// An Env whose preemption hint the test sets and which records YIELD_TOs.
template <int kTag>
struct ConferEnv : NativeEnvT<kTag> {
  static inline std::atomic<bool> preempted[locks::kMaxCpus];
  static inline std::atomic<unsigned> yields{0};
  static inline std::atomic<unsigned> last_target{~0u};
  static bool vcpu_is_preempted(unsigned cpu) { return preempted[cpu].load(std::memory_order_relaxed); }
  static void yield_to(unsigned cpu) {
    yields.fetch_add(1, std::memory_order_relaxed);
    last_target.store(cpu, std::memory_order_relaxed);
  }
  static void set_all(bool p) {
    for (auto& f : preempted) f.store(p, std::memory_order_relaxed);
    yields = 0;
    last_target = ~0u;
  }
};

template <class L>
L with_word(u32 v) {
  L l{};
  static_assert(sizeof(L) == sizeof(u32));
  std::memcpy(static_cast<void*>(&l), &v, sizeof v);
  return l;
}

using RecEnv = ConferEnv<60>;
using RecLock = locks::PvConferLock<RecEnv>;

TEST(PvConfer, RecordsTheHolderUntilRelease) {
  RecEnv::reset();
  RecEnv::set_nr_cpus(4);
  RecEnv::bind_cpu(2);
  RecLock a{}, b{};
  using Rec = locks::pvc::Records<RecEnv>;
  a.lock();
  EXPECT_EQ(Rec::holder_of(a.word(), 0), 2u);
  EXPECT_EQ(Rec::holder_of(a.word(), 2), locks::kMaxCpus) << "a CPU is never its own holder to confer to";
  b.lock();  // nested: the innermost is recorded
  EXPECT_EQ(Rec::holder_of(b.word(), 0), 2u);
  EXPECT_EQ(Rec::holder_of(a.word(), 0), locks::kMaxCpus);
  b.unlock();
  EXPECT_EQ(Rec::holder_of(b.word(), 0), locks::kMaxCpus);
  a.unlock();
  EXPECT_EQ(Rec::holder_of(a.word(), 0), locks::kMaxCpus);
  ASSERT_TRUE(a.try_lock());
  EXPECT_EQ(Rec::holder_of(a.word(), 1), 2u) << "try_lock records too";
  a.unlock();
  EXPECT_FALSE(a.is_locked());
}

// One holder (CPU 0), one waiter (CPU 1).  The waiter's first check (at once:
// the spin loop starts on a check) finds the holder; what it does depends
// only on the hint.
template <class Env>
void holder_and_one_waiter(bool holder_preempted) {
  using L = locks::PvConferLock<Env>;
  Env::reset();
  Env::set_all(false);
  Env::set_nr_cpus(2);
  Env::bind_cpu(0);
  L lock{};
  lock.lock();
  Env::preempted[0] = holder_preempted;
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    Env::bind_cpu(1);
    lock.lock();
    got = true;
    lock.unlock();
  });
  // Until the waiter is queued (the tail is set) and, if it confers, has done so.
  while (!(lock.value() & q::kTailMask)) std::this_thread::yield();
  // A waiter that conferred goes on to hash itself and set _Q_SLOW_VAL: wait
  // for that, so that our unlock is the one that must kick it.
  if (holder_preempted)
    while ((lock.value() & q::kLockedMask) != q::kSlowVal) std::this_thread::yield();
  EXPECT_FALSE(got.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_FALSE(lock.is_locked());
}

using PreEnv = ConferEnv<61>;
TEST(PvConfer, AWaiterConfersToAPreemptedHolderAndIsKickedAwake) {
  holder_and_one_waiter<PreEnv>(true);
  EXPECT_GE(PreEnv::event_total(LockEvent::pv_confer), 1u);
  EXPECT_EQ(PreEnv::yields.load(), PreEnv::event_total(LockEvent::pv_confer)) << "one YIELD_TO per confer";
  EXPECT_EQ(PreEnv::last_target.load(), 0u) << "conferred to the holder";
  EXPECT_GE(PreEnv::event_total(LockEvent::pv_wait), 1u) << "a waiter that conferred halts";
  EXPECT_GE(PreEnv::event_total(LockEvent::pv_kick), 1u) << "and the unlock kicks it";
}

using RunEnv = ConferEnv<62>;
TEST(PvConfer, NoConferToARunningHolder) {
  holder_and_one_waiter<RunEnv>(false);
  EXPECT_EQ(RunEnv::event_total(LockEvent::pv_confer), 0u);
  EXPECT_EQ(RunEnv::yields.load(), 0u);
}

// Exclusion with confers on every chance: the hint says everyone is
// preempted all the time.
using LieEnv = ConferEnv<63>;
TEST(PvConfer, ExcludesWithAHintThatAlwaysSaysPreempted) {
  LieEnv::reset();
  LieEnv::set_all(true);
  locks::PvConferLock<LieEnv> lock{};
  const u64 n = scaled(6000);
  const StressResult r = stress<locks::PvConferLock<LieEnv>, LieEnv>(lock, 8, n);
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 8 * n);
  EXPECT_FALSE(lock.is_locked());
  EXPECT_GT(LieEnv::event_total(LockEvent::pv_confer), 0u) << "8 threads never met a recorded holder";
}

// ---- q_pending ---------------------------------------------------------------

// CPU 0 holds a qspinlock, CPU 1 contends: with the pending path it takes
// the pending bit; with q_pending=0 it queues (the head of an empty queue).
template <class Env>
void second_contender(bool pending) {
  using L = locks::QSpinLock<Env>;
  ParamScope p({pending ? "q_pending=1" : "q_pending=0"});
  Env::reset();
  Env::set_nr_cpus(2);
  Env::bind_cpu(0);
  L lock{};
  lock.lock();
  std::thread second([&] {
    Env::bind_cpu(1);
    lock.lock();
    lock.unlock();
  });
  // Pending set, or a tail: the contender is waiting in the one or the other.
  while (!(lock.value() & ~q::kLockedMask)) std::this_thread::yield();
  EXPECT_EQ((lock.value() & q::kPendingMask) != 0, pending);
  EXPECT_EQ((lock.value() & q::kTailMask) != 0, !pending);
  lock.unlock();
  second.join();
  EXPECT_EQ(Env::event_total(LockEvent::lock_pending), pending ? 1u : 0u);
  EXPECT_EQ(Env::event_total(LockEvent::lock_queue), pending ? 0u : 1u);
}

using PendEnv = NativeEnvT<64>;
TEST(QSpinLockOptions, PendingPathByDefaultAndNoneWithQPendingZero) {
  EXPECT_EQ(pvb::g_tuning.q_pending, 1u) << "the default keeps Linux's pending path";
  second_contender<PendEnv>(true);
  second_contender<PendEnv>(false);
}

using NoPendEnv = NativeEnvT<65>;
TEST(QSpinLockOptions, ExcludesWithoutThePendingPath) {
  ParamScope p({"q_pending=0"});
  NoPendEnv::reset();
  locks::QSpinLock<NoPendEnv> lock{};
  const u64 n = scaled(15000);
  const StressResult r = stress<locks::QSpinLock<NoPendEnv>, NoPendEnv>(lock, 4, n);
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 4 * n);
  EXPECT_EQ(NoPendEnv::event_total(LockEvent::lock_pending), 0u);
}

// ---- pvq_unfair ---------------------------------------------------------------

// (n,1,0): a queue whose head spins with pending set, the lock free.  The PV
// lock's hybrid trylock does not steal it; the unfair steal does.
using StealEnv = NativeEnvT<66>;
TEST(PvQSpinLockOptions, UnfairStealsPastASpinningHead) {
  StealEnv::reset();
  StealEnv::set_nr_cpus(4);
  StealEnv::bind_cpu(0);
  const u32 head_spinning = q::encode_tail(2, 0) | q::kPendingVal;
  using L = locks::PvQSpinLock<StealEnv>;
  L fair = with_word<L>(head_spinning);
  EXPECT_FALSE(L::Hooks::trylock(fair.word())) << "the hybrid trylock respects a spinning head";
  EXPECT_EQ(fair.value(), head_spinning);

  ParamScope p({"pvq_unfair=1"});
  L unfair = with_word<L>(head_spinning);
  unfair.lock();  // would queue behind the fake tail (and hang) without the steal
  EXPECT_EQ(unfair.value(), head_spinning | q::kLockedVal);
  EXPECT_EQ(StealEnv::event_total(LockEvent::pv_lock_stealing), 1u);
  locks::PvConferLock<StealEnv> confer = with_word<locks::PvConferLock<StealEnv>>(head_spinning);
  confer.lock();  // pvconfer shares the option
  EXPECT_EQ(confer.value(), head_spinning | q::kLockedVal);
  EXPECT_EQ(StealEnv::event_total(LockEvent::pv_lock_stealing), 2u);
}

using UnfairEnv = NativeEnvT<67>;
TEST(PvQSpinLockOptions, UnfairPvExcludes) {
  ParamScope p({"pvq_unfair=1"});
  UnfairEnv::reset();
  locks::PvQSpinLock<UnfairEnv> lock{};
  const u64 n = scaled(6000);
  const StressResult r = stress<locks::PvQSpinLock<UnfairEnv>, UnfairEnv>(lock, 8, n);
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 8 * n);
  EXPECT_FALSE(lock.is_locked());
}

TEST(LockOptions, RangesAreCheckedLikeEveryLockParameter) {
  const pvb::Tuning saved = pvb::g_tuning;
  EXPECT_STREQ(native::apply_lock_tuning({"q_pending=2"}), "q_pending") << "out of range";
  pvb::g_tuning = saved;
  EXPECT_STREQ(native::apply_lock_tuning({"pvq_unfair=yes"}), "pvq_unfair=yes") << "not a number";
  pvb::g_tuning = saved;
  EXPECT_EQ(native::apply_lock_tuning({"pvq_unfair=1", "q_pending=0"}), nullptr);
  EXPECT_EQ(pvb::g_tuning.pvq_unfair, 1u);
  EXPECT_EQ(pvb::g_tuning.q_pending, 0u);
  pvb::g_tuning = saved;
}

// A run reports the keys its lock reads, and only those.
TEST(LockOptions, EachKeyNamesTheLocksThatReadIt) {
  auto key = [](const char* name) { return *pvb::find_tuning_key(name, std::strlen(name)); };
  EXPECT_TRUE(pvb::tuning_key_used_by(key("q_pending"), "qspinlock"));
  EXPECT_TRUE(pvb::tuning_key_used_by(key("q_pending"), "auto"));
  EXPECT_FALSE(pvb::tuning_key_used_by(key("q_pending"), "qspin"));
  EXPECT_FALSE(pvb::tuning_key_used_by(key("q_pending"), "pvqspinlock"));
  EXPECT_TRUE(pvb::tuning_key_used_by(key("pvq_unfair"), "pvconfer"));
  EXPECT_TRUE(pvb::tuning_key_used_by(key("pvq_unfair"), "pvqspinlock"));
  EXPECT_FALSE(pvb::tuning_key_used_by(key("pvq_unfair"), "unfair"));
  EXPECT_TRUE(pvb::tuning_key_used_by(key("pvb_bound_us"), "pvbounded"));
  EXPECT_FALSE(pvb::tuning_key_used_by(key("pvb_bound_us"), "pvconfer"));
  for (const auto& k : pvb::kTuningKeys)
    for (const char* w = k.used_by; *w != '\0'; w += std::strcspn(w, " "), w += std::strspn(w, " ")) {
      const std::string name(w, std::strcspn(w, " "));
      EXPECT_NE(locks::find_lock(name.c_str()), nullptr) << k.key << " names " << name << ", not a registry lock";
    }
}

}  // namespace
}  // namespace lockvisor::test
