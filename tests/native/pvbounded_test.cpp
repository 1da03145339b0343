// pvbounded_test.cpp: the pvbounded lock's own rules (guest/locks/pvbounded.h):
// stealing is refused while the no-steal bit N is set, N is cleared only by
// the reserved head's acquisition, the unlock kicks a halted reserved head,
// and no waiter waits much longer than T even when the holder keeps
// re-acquiring (which starves a waiter of a test-and-set lock); with
// pvb_handoff=running, a reserved lock is lent only while its head is
// preempted and silent, exclusion holds with a lying hint, and a hint stuck
// at "preempted" does not starve the head.
// One file (over 500 lines): each test pins one of the lock's rules
// (pvbounded.h's numbering) on host threads through the same harness, tuning
// scopes and lock-word helpers; together they are the lock's specification,
// read in one place.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <tuple>
#include <utility>

#include "harness.h"
#include "locks/pvbounded.h"
#include "locks/tas.h"
#include "native_env.h"

namespace lockvisor::test {
namespace {

namespace q = locks::q;
namespace pvb = locks::pvb;
using locks::LockEvent;

// Sets a fixed T (the adaptive bound off: T_max below T) and the spin
// thresholds for one test, restores the defaults after.
class TuningScope {
 public:
  TuningScope(u64 bound_us, u64 head_spins = pvb::g_tuning.head_spins) : saved_(pvb::g_tuning) {
    const std::vector<std::string> p = {"pvb_bound_us=" + std::to_string(bound_us),
                                        "pvb_head_spins=" + std::to_string(head_spins), "pvb_bound_max_us=1"};
    EXPECT_EQ(native::apply_lock_tuning(p), nullptr);
  }
  ~TuningScope() { pvb::g_tuning = saved_; }

 private:
  pvb::Tuning saved_;
};

template <class L>
L with_word(u32 v) {
  L l{};
  static_assert(sizeof(L) == sizeof(u32));
  std::memcpy(static_cast<void*>(&l), &v, sizeof v);
  return l;
}

using WordEnv = NativeEnvT<40>;
using Word = locks::PvBoundedLock<WordEnv>;

TEST(PvBounded, StealsPastAQueueOnlyWhileNoStealIsClear) {
  WordEnv::reset();
  WordEnv::bind_cpu(0);
  const u32 tail = q::encode_tail<pvb::Tail>(1, 0);

  Word free_with_queue = with_word<Word>(tail);  // (n,0,0): a queue, head not reserved
  EXPECT_TRUE(free_with_queue.try_lock()) << "a free lock with an unreserved queue is stealable";
  EXPECT_EQ(free_with_queue.value(), tail | q::kLockedVal) << "a steal leaves tail and head field alone";

  const u32 reserved = tail | pvb::kNoSteal | pvb::head_cpu_bits(1);  // (n,N|1,0)
  Word l = with_word<Word>(reserved);
  EXPECT_FALSE(l.try_lock()) << "a lock reserved for the head must not be stolen";
  EXPECT_EQ(l.value(), reserved) << "a refused steal must not touch the word";
  EXPECT_FALSE(l.is_locked()) << "reserved is not held";
}

// The word names every CPU a VM may have: the highest CPU's tail, its
// nesting index, the head field (N and the head cpu) and the locked byte
// read back apart, and a steal past that queue leaves all but the locked
// byte as they were.
TEST(PvBounded, TheWordNamesEveryCpuAVmMayHave) {
  const unsigned top = locks::kMaxCpus - 1;
  const u32 tail = q::encode_tail<pvb::Tail>(top, q::kMaxNodes - 1);
  const u32 w = tail | pvb::kNoSteal | pvb::head_cpu_bits(top) | q::kSlowVal;
  EXPECT_EQ(q::tail_cpu<pvb::Tail>(w), top);
  EXPECT_EQ(q::tail_idx<pvb::Tail>(w), q::kMaxNodes - 1);
  EXPECT_EQ(pvb::head_cpu(w), top);
  EXPECT_TRUE(pvb::no_steal(w));
  EXPECT_EQ(w & q::kLockedMask, q::kSlowVal);
  EXPECT_FALSE(pvb::no_steal(tail | pvb::head_cpu_bits(top))) << "the head cpu does not reach N";

  WordEnv::reset();
  WordEnv::bind_cpu(0);
  const u32 queued = q::encode_tail<pvb::Tail>(top, 0) | pvb::head_cpu_bits(top);
  Word l = with_word<Word>(queued);
  EXPECT_TRUE(l.try_lock());
  EXPECT_EQ(l.value(), queued | q::kLockedVal);
}

// On host threads bound to every CPU number a VM may have (0..1023), each
// taking the lock 16 times and giving up its host CPU while it holds it every
// fourth time (so the others find it held, spin out their steal phase and
// queue): exclusion holds, and threads numbered above what a byte could name
// head the queue and take the lock from it (their CPU in the head field and
// in the tail).
TEST(PvBounded, ExcludesAndQueuesAcrossEveryCpuNumber) {
  using Env = NativeEnvT<48>;
  Env::reset();
  locks::PvBoundedLock<Env> lock{};
  CsState cs;
  constexpr u64 kIters = 16;
  run_on_cpus<Env>(
      locks::kMaxCpus,
      [&](unsigned cpu) {
        for (u64 i = 0; i < kIters; ++i) {
          lock.lock();
          critical_section(cs, cpu, i);
          if (i % 4 == 0) sched_yield();
          lock.unlock();
        }
      },
      "pvbounded on every CPU number");
  EXPECT_EQ(cs.violations.load(), 0u);
  EXPECT_EQ(cs.counter, u64{locks::kMaxCpus} * kIters);
  u64 high_heads = 0;
  for (unsigned cpu = 256; cpu < locks::kMaxCpus; ++cpu)
    high_heads += Env::ev[cpu].get(LockEvent::lock_queue) + Env::ev[cpu].get(LockEvent::pv_reserved);
  EXPECT_GT(high_heads, 0u) << "no thread above 255 took the lock as the queue head";
  std::printf("[ measured ] pvbounded, %u threads: %llu acquisitions from the queue head by threads 256 and up\n",
              locks::kMaxCpus, static_cast<unsigned long long>(high_heads));
}

// Rule 5: each head acquisition steers the working bound T_now with the
// time the lock sat free reserved for that head, over windows of kWindow
// acquisitions: idle for a quarter of the window's time or more doubles it
// (never past T_max), a sixteenth or less lowers it a sixteenth of the way
// back to T, anything between holds; T_max <= T is a fixed bound.  A window
// that reaches a quarter idle after kRaiseAfter acquisitions ends there and
// doubles at once; lowering always takes the whole window.  Heads that take
// the lock at once (idle 0), however old, never raise it.  A head's
// reservation uses T_now (older_than_bound, the stamp).
TEST(PvBounded, TheWorkingBoundDoublesWhileReservedLocksSitIdleAndReturnsToT) {
  using A = pvb::Arrival<WordEnv>;
  WordEnv::reset();
  WordEnv::bind_cpu(0);
  const pvb::Tuning saved = pvb::g_tuning;
  ASSERT_EQ(native::apply_lock_tuning({"pvb_bound_us=1000", "pvb_bound_max_us=16000"}), nullptr);
  const u64 t = pvb::g_tuning.bound_ticks;
  const u64 t_max = pvb::g_tuning.bound_max_ticks;
  ASSERT_EQ(t_max, 16 * t);
  static_assert(A::kRaiseAfter > 1 && A::kRaiseAfter < A::kWindow);
  // A synthetic clock: each acquisition 1000 cycles after the last, each
  // after `per_mille` of those 1000 cycles of idle time.  window() feeds
  // acquisitions until the window closes and says how many it took.
  constexpr u64 kStep = 1000;
  u64 clock = u64{1} << 32;
  A::working = {};
  A::window = {};
  A::window.since = clock;
  u64 taken = 0;
  const auto window = [&](u64 per_mille) {
    taken = 0;
    do {
      clock += kStep;
      A::steer_bound(kStep * per_mille / 1000, clock);
      ++taken;
    } while (A::window.handoffs != 0);
    return A::bound_now();
  };
  EXPECT_EQ(A::bound_now(), t) << "starts at T";
  for (u64 i = 0; i + 1 < A::kRaiseAfter; ++i) A::steer_bound(kStep, clock += kStep);
  EXPECT_EQ(A::bound_now(), t) << "fewer than kRaiseAfter acquisitions never move it, however idle";
  A::steer_bound(kStep, clock += kStep);
  EXPECT_EQ(A::bound_now(), 2 * t) << "the lock sat reserved and free all the time of kRaiseAfter acquisitions: doubles";
  EXPECT_EQ(A::window.handoffs, 0u) << "and a new window begins";
  EXPECT_EQ(window(250), 4 * t) << "a quarter idle: doubles again";
  EXPECT_EQ(taken, A::kRaiseAfter) << "as soon as the window has kRaiseAfter acquisitions";
  EXPECT_EQ(window(1000), 8 * t);
  EXPECT_EQ(window(1000), t_max);
  EXPECT_EQ(window(1000), t_max) << "never past T_max";
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_bound_up), 4u);
  // Idle late in a window: the raise comes when the whole window so far
  // reaches a quarter, not before.
  ASSERT_EQ(native::apply_lock_tuning({"pvb_bound_max_us=64000"}), nullptr);
  for (u64 i = 0; i < 30; ++i) A::steer_bound(0, clock += kStep);
  u64 late = 0;
  while (A::bound_now() == t_max && late < A::kWindow) {
    A::steer_bound(kStep, clock += kStep);
    ++late;
  }
  EXPECT_EQ(late, 10u) << "30 busy then 10 idle acquisitions: a quarter of 40";
  EXPECT_EQ(A::bound_now(), 2 * t_max);
  ASSERT_EQ(native::apply_lock_tuning({"pvb_bound_max_us=16000"}), nullptr);
  EXPECT_EQ(A::bound_now(), t_max) << "a T_max lowered below T_now caps it";
  EXPECT_EQ(window(249), t_max) << "just under a quarter: holds";
  EXPECT_EQ(taken, A::kWindow) << "a window that does not raise runs its kWindow acquisitions";
  EXPECT_EQ(window(63), t_max) << "just over a sixteenth: holds";
  const u64 lowered = window(62);
  EXPECT_EQ(lowered, t_max - (t_max - t + 15) / 16) << "a sixteenth or less: a sixteenth of the way back to T";
  EXPECT_EQ(taken, A::kWindow) << "lowering takes the whole window";
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_bound_down), 1u);
  for (int i = 0; i < 2000 && A::bound_now() > t; ++i) window(0);
  EXPECT_EQ(A::bound_now(), t) << "handoffs that cost nothing bring T_now back to T, and not below";
  const u64 downs = WordEnv::ev[0].get(LockEvent::pv_bound_down);
  window(0);
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_bound_down), downs) << "at T nothing is written";

  // The reservation follows T_now: a node 2 T old is not old at 4 T.
  q::QNode* node = q::QNodePool<WordEnv>::node(0, 0);
  node->cpu = 0;
  *A::of(node) = locks::read_lock_clock() - 2 * t;
  EXPECT_TRUE(A::older_than_bound(node));
  window(1000);
  window(1000);
  EXPECT_EQ(A::bound_now(), 4 * t);
  EXPECT_FALSE(A::older_than_bound(node)) << "T_now = 4 T: a 2 T old head is young";

  // T_max at or below T: a fixed bound, whatever was stored.
  ASSERT_EQ(native::apply_lock_tuning({"pvb_bound_us=1000", "pvb_bound_max_us=1000"}), nullptr);
  EXPECT_EQ(A::bound_now(), t) << "a raised T_now is ignored once the bound is fixed";
  const u64 ups = WordEnv::ev[0].get(LockEvent::pv_bound_up);
  for (int w = 0; w < 4; ++w) window(1000);
  EXPECT_EQ(A::bound_now(), t);
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_bound_up), ups) << "a fixed bound is never steered";
  A::working = {};
  A::window = {};
  pvb::g_tuning = saved;
}

// Rule 5's clock: the unlock that releases a reserved lock marks the time
// in its head's stamp, and the head's acquisition reads the idle time from
// that mark; a mark older than the current headship (a late store of an
// earlier one) or none reads as 0, and an unreserved release marks nothing.
TEST(PvBounded, AReservedLocksIdleTimeRunsFromItsReleaseWithinTheHeadship) {
  using A = pvb::Arrival<WordEnv>;
  WordEnv::reset();
  WordEnv::bind_cpu(0);
  const u32 tail = q::encode_tail<pvb::Tail>(2, 0);
  q::QNode* node = q::QNodePool<WordEnv>::node(1, 0);
  node->cpu = 1;
  *A::of(node) = locks::read_lock_clock();
  A::stamp[1] = {};

  Word l = with_word<Word>(tail | pvb::kNoSteal | pvb::head_cpu_bits(1) | q::kLockedVal);
  A::publish_head(l.word(), node, 1, locks::read_lock_clock());
  const u64 before = locks::read_lock_clock();
  l.unlock();
  const u64 freed = A::stamp[1].freed;
  EXPECT_GE(freed, before) << "the release of a reserved lock marks when it became free";
  EXPECT_EQ(A::idle_before(1, freed + 500), 500u);
  EXPECT_EQ(A::idle_before(1, freed), 0u) << "taken at the mark: no idle time";

  A::publish_head(l.word(), node, 1, freed + 1);
  EXPECT_EQ(A::idle_before(1, freed + 500), 0u) << "a mark from before this headship is not its idle time";

  A::stamp[1].freed = 0;
  Word unreserved = with_word<Word>(tail | pvb::head_cpu_bits(1) | q::kLockedVal);
  unreserved.unlock();
  EXPECT_EQ(A::stamp[1].freed, 0u) << "a lock released without N sits free for nobody in particular";
  A::stamp[1] = {};
}

// Rule 3b: a newcomer that would steal past a queue first looks up the head
// named in the head field; if that CPU's stamp names this lock and is due, it sets N
// for the head instead of stealing.  A stamp of another lock, or not yet
// due, or a free lock without a queue, lets the steal go ahead.
TEST(PvBounded, ANewcomerReservesForADueHeadInsteadOfStealing) {
  WordEnv::reset();
  WordEnv::bind_cpu(0);
  const u32 tail = q::encode_tail<pvb::Tail>(2, 0);
  const u32 named = tail | pvb::head_cpu_bits(1);  // (n,1,0): head cpu 1, N clear
  auto& stamp = pvb::Arrival<WordEnv>::stamp[1];

  Word due = with_word<Word>(named);
  stamp.due = 0;  // due long ago
  stamp.lock = due.word();
  EXPECT_FALSE(due.try_lock()) << "a due head's lock must be reserved, not stolen";
  EXPECT_EQ(due.value(), named | pvb::kNoSteal) << "N set for the head named in the head field; tail and cpu unchanged";
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_reserve_for), 1u);
  EXPECT_NE(stamp.freed, 0u) << "a free lock reserved now starts the head's idle clock (rule 5)";
  EXPECT_FALSE(due.try_lock()) << "and stays reserved";

  Word other = with_word<Word>(named);  // cpu 1 heads another lock (the stamp still names `due`)
  EXPECT_TRUE(other.try_lock()) << "a stamp of another lock says nothing about this one";
  EXPECT_EQ(other.value(), named | q::kLockedVal);

  Word young = with_word<Word>(named);
  stamp.due = locks::read_lock_clock() + (u64{1} << 40);  // due far in the future
  stamp.lock = young.word();
  EXPECT_TRUE(young.try_lock()) << "a head not yet due may be stolen past (rule 1)";
  EXPECT_EQ(young.value(), named | q::kLockedVal);

  Word no_queue = with_word<Word>(pvb::head_cpu_bits(1));  // no tail: nobody to reserve for
  stamp.due = 0;
  stamp.lock = no_queue.word();
  EXPECT_TRUE(no_queue.try_lock());
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_reserve_for), 1u);
  stamp.lock = nullptr;
}

// The steal phase counts its path where it branches: a tail in the word it
// took is a steal (a queued waiter bypassed), none a spin; a reserved lock is
// neither taken nor counted.
TEST(PvBounded, StealPhaseCountsStealOrSpinByTheWordItTook) {
  WordEnv::reset();
  WordEnv::bind_cpu(0);
  using Hooks = pvb::Hooks<WordEnv>;
  q::QSpinWord with_queue{};
  with_queue.val = q::encode_tail<pvb::Tail>(1, 0);
  EXPECT_TRUE(Hooks::trylock(&with_queue));
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_lock_stealing), 1u);
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::lock_spin), 0u);

  q::QSpinWord empty{};
  EXPECT_TRUE(Hooks::trylock(&empty));
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::lock_spin), 1u);
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::pv_lock_stealing), 1u);

  q::QSpinWord reserved{};
  reserved.val = q::encode_tail<pvb::Tail>(1, 0) | pvb::kNoSteal | pvb::head_cpu_bits(1);
  EXPECT_FALSE(Hooks::trylock(&reserved));
  EXPECT_EQ(WordEnv::ev[0].get(LockEvent::lock_spin) + WordEnv::ev[0].get(LockEvent::pv_lock_stealing) +
                WordEnv::ev[0].get(LockEvent::pv_lend),
            2u);
}

// Rule 1's first spin, word level: the test Env's relax() (one spin
// iteration) changes the word at a chosen iteration, as the holder's release
// or a newcomer's queueing would.
struct FirstSpinEnv : NativeEnvT<47> {
  static inline q::QSpinWord* word = nullptr;
  static inline u32 then = 0;  // what the word becomes at iteration `at`
  static inline u64 at = 0;
  static inline u64 relaxes = 0;
  static void relax() {
    if (++relaxes == at) word->val = then;
  }
  static void arm(q::QSpinWord* w, u64 iteration, u32 value) {
    word = w;
    at = iteration;
    then = value;
    relaxes = 0;
  }
};

TEST(PvBounded, AFirstSpinTakesALockFreedWithNobodyQueuedAndStopsAtAQueue) {
  FirstSpinEnv::reset();
  FirstSpinEnv::bind_cpu(0);
  q::QSpinWord l{};
  // Held, nobody queued, freed at the third iteration: taken there, counted
  // as the spin path, no slow path.
  l.val = q::kLockedVal;
  u32 v = l.val;
  FirstSpinEnv::arm(&l, 3, 0);
  EXPECT_TRUE(pvb::first_spin<FirstSpinEnv>(&l, &v));
  EXPECT_EQ(l.val, q::kLockedVal);
  EXPECT_EQ(FirstSpinEnv::relaxes, 3u);
  EXPECT_EQ(FirstSpinEnv::ev[0].get(LockEvent::lock_spin), 1u);
  EXPECT_EQ(FirstSpinEnv::ev[0].get(LockEvent::lock_slowpath), 0u);

  // A waiter queues (or N appears) meanwhile: stop at once, word untouched, so
  // that the steal past a queue goes through rule 3b's check.
  for (u32 appears : {q::encode_tail<pvb::Tail>(1, 0) | q::kLockedVal,
                      q::encode_tail<pvb::Tail>(1, 0) | pvb::kNoSteal | pvb::head_cpu_bits(1)}) {
    l.val = q::kLockedVal;
    v = l.val;
    FirstSpinEnv::arm(&l, 2, appears);
    EXPECT_FALSE(pvb::first_spin<FirstSpinEnv>(&l, &v));
    EXPECT_EQ(l.val, appears);
    EXPECT_EQ(v, appears) << "the word it saw goes on to the slow path";
    EXPECT_EQ(FirstSpinEnv::relaxes, 2u);
  }

  // Never freed: kFirstSpins iterations, then the slow path.
  l.val = q::kLockedVal;
  v = l.val;
  FirstSpinEnv::arm(&l, 0, 0);
  EXPECT_FALSE(pvb::first_spin<FirstSpinEnv>(&l, &v));
  EXPECT_EQ(FirstSpinEnv::relaxes, pvb::kFirstSpins);
  EXPECT_EQ(l.val, q::kLockedVal);

  // pvb_steal_spins=0 (no spinning before queueing) holds for it too.
  const pvb::Tuning saved = pvb::g_tuning;
  ASSERT_EQ(native::apply_lock_tuning({"pvb_steal_spins=0"}), nullptr);
  FirstSpinEnv::arm(&l, 1, 0);
  EXPECT_FALSE(pvb::first_spin<FirstSpinEnv>(&l, &v));
  EXPECT_EQ(FirstSpinEnv::relaxes, 0u);
  pvb::g_tuning = saved;
}

// The queue handoff: a head that takes the lock while its successor has
// already linked in names the successor in the head field in that same cmpxchg, so
// passing headship writes the word only to reserve for an old successor or
// to ask for a halted one's kick; a successor that links in later is named
// by kick_node() as before.  Word level, cpu 0 heading a queue whose tail is
// cpu 3's node.
TEST(PvBounded, TheHeadsAcquisitionNamesItsLinkedSuccessor) {
  using A = pvb::Arrival<WordEnv>;
  using Hooks = pvb::Hooks<WordEnv>;
  using Pool = q::QNodePool<WordEnv>;
  TuningScope tuning(/*bound_us=*/1000);
  EXPECT_EQ(Pool::cpu_of(Pool::node(5, 2)), 5u);
  EXPECT_EQ(Pool::cpu_of(Pool::node(0, 3)), 0u);
  const u32 tail = q::encode_tail<pvb::Tail>(3, 0);
  q::QNode* const head = Pool::node(0, 0);
  q::QNode* const next = Pool::node(3, 0);

  // `linked`: next is in head->next when the head takes the lock; `state`
  // and `age` of next when the owner passes headship.  Returns the word after
  // the acquisition and after kick_node().
  const auto handoff = [&](bool linked, u8 state, u64 age) {
    WordEnv::reset();
    WordEnv::bind_cpu(0);
    A::stamp[0] = {};
    A::stamp[3] = {};
    for (q::QNode* n : {head, next}) *n = {};
    head->cpu = 0;
    next->cpu = 3;
    const u64 now = locks::read_lock_clock();
    *A::of(head) = now;
    *A::of(next) = now - age;
    head->next = linked ? next : nullptr;
    Word l = with_word<Word>(tail);  // (n,0,0): the head field names cpu 0, the head
    const u32 taken = Hooks::wait_head_or_lock(l.word(), head);
    EXPECT_EQ(l.value(), taken);
    head->next = next;
    Hooks::pass(next);
    next->state = state;
    Hooks::kick_node(l.word(), next);
    EXPECT_EQ(A::stamp[3].lock, l.word()) << "the new head is stamped for this lock";
    EXPECT_EQ(WordEnv::ev[0].get(LockEvent::lock_queue), 1u) << "a free lock won by the head: the queue path";
    return std::pair{taken, l.value()};
  };
  const u32 named = tail | pvb::head_cpu_bits(3) | q::kLockedVal;
  auto [taken, passed] = handoff(/*linked=*/true, q::kVcpuRunning, /*age=*/0);
  EXPECT_EQ(taken, named) << "the acquisition names the linked successor";
  EXPECT_EQ(passed, named) << "a young running successor needs no write of the word";

  std::tie(taken, passed) = handoff(/*linked=*/false, q::kVcpuRunning, 0);
  EXPECT_EQ(taken, tail | q::kLockedVal) << "nobody linked yet: head field left 0";
  EXPECT_EQ(passed, named) << "kick_node names the successor that linked in later";

  std::tie(taken, passed) = handoff(/*linked=*/true, q::kVcpuHalted, 0);
  EXPECT_EQ(taken, named);
  EXPECT_EQ(passed, tail | pvb::head_cpu_bits(3) | q::kSlowVal) << "a halted successor: locked 3, kicked by the unlock";
  EXPECT_EQ(next->state, q::kVcpuHashed);

  std::tie(taken, passed) = handoff(/*linked=*/true, q::kVcpuRunning, /*age=*/u64{1} << 40);
  EXPECT_EQ(taken, named);
  EXPECT_EQ(passed, named | pvb::kNoSteal) << "a successor older than T gets N from the owner";
  A::stamp[0] = {};
  A::stamp[3] = {};
}

TEST(PvBounded, UnlockOfAReservedLockKeepsTheReservation) {
  WordEnv::reset();
  WordEnv::bind_cpu(0);
  const u32 reserved = q::encode_tail<pvb::Tail>(1, 0) | pvb::kNoSteal | pvb::head_cpu_bits(1);
  Word l = with_word<Word>(reserved | q::kLockedVal);  // held, head 1 reserved it
  l.unlock();
  EXPECT_EQ(l.value(), reserved) << "unlock clears only the locked byte: N survives until the handoff";
  EXPECT_EQ(WordEnv::stats().kicks_sent, 0u) << "a running (not halted) head needs no kick";

  Word slow = with_word<Word>(reserved | q::kSlowVal);  // held, head 1 halted: kick it
  slow.unlock();
  EXPECT_EQ(slow.value(), reserved);
  EXPECT_EQ(WordEnv::event_total(LockEvent::pv_kick_unlock), 1u);
  EXPECT_EQ(WordEnv::stats().kicks_sent, 1u);
  EXPECT_EQ(WordEnv::stats().kicks_pending, 1u) << "the kick went to cpu 1 (sticky: nobody waits)";
}

// A real queue head reserves the lock, halts, is kicked by the unlock, and
// only its own acquisition clears N; meanwhile nobody else gets the lock.
using HeadEnv = NativeEnvT<41>;
using Head = locks::PvBoundedLock<HeadEnv>;

TEST(PvBounded, NoStealIsClearedOnlyByTheHeadsAcquisition) {
  HeadEnv::reset();
  TuningScope tuning(/*bound_us=*/1, /*head_spins=*/64);
  Head lock{};
  std::atomic<int> phase{0};
  bool try_lock_while_reserved = false;
  u32 word_after_handoff = 0;
  run_on_cpus<HeadEnv>(2, [&](unsigned cpu) {
    if (cpu == 0) {
      lock.lock();
      phase = 1;
      // Wait until cpu 1 queued, reserved the lock (T = 1 us) and halted
      // (locked byte 3: it asked us to kick it).
      while ((lock.value() & (pvb::kNoSteal | q::kLockedMask)) != (pvb::kNoSteal | q::kSlowVal))
        std::this_thread::yield();
      EXPECT_EQ(pvb::head_cpu(lock.value()), 1u);
      lock.unlock();
      // Free but reserved, or already taken by cpu 1: never ours to steal.
      for (int i = 0; i < 1000 && phase.load() == 1; i++) try_lock_while_reserved |= lock.try_lock();
      while (phase.load() != 2) std::this_thread::yield();
      phase = 3;
    } else {
      while (phase.load() != 1) std::this_thread::yield();
      lock.lock();
      word_after_handoff = lock.value();
      phase = 2;
      while (phase.load() != 3) std::this_thread::yield();
      lock.unlock();
    }
  });
  EXPECT_FALSE(try_lock_while_reserved) << "a steal succeeded while the lock was reserved";
  EXPECT_EQ(word_after_handoff & pvb::kNoSteal, 0u) << "the head's acquisition clears N";
  EXPECT_EQ(word_after_handoff & q::kLockedMask, q::kLockedVal);
  EXPECT_FALSE(lock.is_locked());
  EXPECT_EQ(lock.value(), 0u);
  EXPECT_GE(HeadEnv::event_total(LockEvent::pv_no_steal), 1u);
  // The paths: cpu 0 took the free lock on the fast path (no count), cpu 1
  // got its reservation.  (try_lock() counts no path.)
  EXPECT_EQ(HeadEnv::ev[1].get(LockEvent::pv_reserved), 1u);
  for (LockEvent e : {LockEvent::lock_queue, LockEvent::pv_lock_stealing, LockEvent::lock_spin, LockEvent::pv_lend})
    EXPECT_EQ(HeadEnv::event_total(e), 0u) << locks::kLockEventNames[static_cast<unsigned>(e)];
  EXPECT_EQ(HeadEnv::ev[0].get(LockEvent::pv_reserved), 0u);
  EXPECT_GE(HeadEnv::event_total(LockEvent::pv_wait_head), 1u);
  EXPECT_EQ(HeadEnv::event_total(LockEvent::pv_kick_unlock), 1u);
  EXPECT_EQ(HeadEnv::stats().timeouts, 0u);
}

// Four CPUs contend, reservations at T = 20 us: no halt, no kick, and still
// mutual exclusion, for an Env whose waiters must only spin.
template <class Env>
void expect_spins_only_and_excludes(const char* what) {
  Env::reset();
  TuningScope tuning(/*bound_us=*/20, /*head_spins=*/1);
  locks::PvBoundedLock<Env> lock{};
  const StressResult r = stress<locks::PvBoundedLock<Env>, Env>(lock, 4, scaled(15000));
  EXPECT_EQ(r.violations, 0u) << what;
  EXPECT_EQ(r.total, 4 * scaled(15000)) << what;
  EXPECT_EQ(Env::stats().waits, 0u) << "halted " << what;
  EXPECT_EQ(Env::stats().kicks_sent, 0u) << "kicked " << what;
  EXPECT_EQ(Env::event_total(LockEvent::pv_wait), 0u) << what;
  std::printf("[ %s ] %.3f s, reservations %llu\n", what, r.seconds,
              static_cast<unsigned long long>(Env::event_total(LockEvent::pv_no_steal)));
}

// Without PV wait/kick the lock must neither halt nor kick (its registry
// trait is needs_pv = false) and still exclude, with reservations happening.
using NoPvEnv = NativeEnvT<43, /*kPv=*/false>;
TEST(PvBounded, SpinsOnlyWithoutPvAndStillExcludes) { expect_spins_only_and_excludes<NoPvEnv>("without PV"); }

// With vCPUs advertised as dedicated (KVM_HINTS_REALTIME) nobody halts
// although PV wait/kick exists (pvbounded.h, "WITHOUT HALTING").
using DedicatedEnv = NativeEnvT<44, /*kPv=*/true, /*kVirt=*/true, /*kDedicated=*/true>;
TEST(PvBounded, SpinsOnlyOnDedicatedVcpusAndStillExcludes) {
  expect_spins_only_and_excludes<DedicatedEnv>("on dedicated vCPUs");
}

// One run of the stress tests below that repeat until the host scheduler has
// let the event they need happen: a fresh lock, four threads, every
// acquisition made under mutual exclusion, the lock left free.
template <class Env>
StressResult four_thread_run() {
  locks::PvBoundedLock<Env> lock{};
  const StressResult r = stress<locks::PvBoundedLock<Env>, Env>(lock, 4, scaled(15000));
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 4 * scaled(15000));
  EXPECT_EQ(lock.value(), 0u);
  return r;
}

// pvb_head_halt=0: reserved heads never halt (queued nodes still may, and
// are kicked), exclusion holds, no wake-up is lost.  Whether a head reserves
// at all is the host scheduler's doing (the four threads may rarely overlap
// on a loaded host): runs repeat until one has a reservation, checking every
// run.
using SpinHeadEnv = NativeEnvT<45>;
TEST(PvBounded, WithHeadHaltOffAReservedHeadOnlySpinsAndNoWakeUpIsLost) {
  TuningScope tuning(/*bound_us=*/20, /*head_spins=*/1);
  ASSERT_EQ(native::apply_lock_tuning({"pvb_head_halt=0", "pvb_node_spins=1"}), nullptr);
  u64 reservations = 0;
  for (unsigned run = 1; reservations == 0 && !HasFailure(); run++) {
    SpinHeadEnv::reset();
    const StressResult r = four_thread_run<SpinHeadEnv>();
    EXPECT_EQ(SpinHeadEnv::event_total(LockEvent::pv_wait_head), 0u) << "a reserved head halted";
    EXPECT_EQ(SpinHeadEnv::stats().timeouts, 0u) << "a lost wake-up";
    EXPECT_EQ(SpinHeadEnv::stats().kicks_sent,
              SpinHeadEnv::stats().kicks_received + SpinHeadEnv::stats().kicks_coalesced +
                  SpinHeadEnv::stats().kicks_pending);
    reservations = SpinHeadEnv::event_total(LockEvent::pv_no_steal);
    std::printf("[ head-halt=0 ] run %u: %.3f s, reservations %llu, node halts %llu, kicks %llu\n", run, r.seconds,
                static_cast<unsigned long long>(reservations),
                static_cast<unsigned long long>(SpinHeadEnv::event_total(LockEvent::pv_wait_node)),
                static_cast<unsigned long long>(SpinHeadEnv::stats().kicks_sent));
  }
}

// Without halting the unlock is a store of the locked byte while the lock is
// not reserved (the rest of the word untouched), and the read-modify-write
// while it is: the reservation stays and rule 5's idle clock is marked.
TEST(PvBounded, WithoutHaltingTheUnlockStoresUnlessTheLockIsReserved) {
  DedicatedEnv::reset();
  DedicatedEnv::bind_cpu(0);
  using L = locks::PvBoundedLock<DedicatedEnv>;
  const u32 queued = q::encode_tail<pvb::Tail>(1, 0) | pvb::head_cpu_bits(1);
  L plain = with_word<L>(queued | q::kLockedVal);
  plain.unlock();
  EXPECT_EQ(plain.value(), queued) << "only the locked byte is cleared";

  auto& freed = pvb::Arrival<DedicatedEnv>::stamp[1].freed;
  freed = 0;
  const u32 reserved = queued | pvb::kNoSteal;
  L held = with_word<L>(reserved | q::kLockedVal);
  held.unlock();
  EXPECT_EQ(held.value(), reserved) << "N survives until the head's acquisition";
  EXPECT_NE(freed, 0u) << "the reserved release marks when the lock was left free for its head";
  EXPECT_EQ(DedicatedEnv::stats().kicks_sent, 0u);

  // pvb_head_halt=0 with PV: locked 3, written by the owner's kick_node()
  // for a halted node it made head, still makes the unlock kick that head.
  const pvb::Tuning saved = pvb::g_tuning;
  ASSERT_EQ(native::apply_lock_tuning({"pvb_head_halt=0"}), nullptr);
  SpinHeadEnv::reset();
  SpinHeadEnv::bind_cpu(0);
  using S = locks::PvBoundedLock<SpinHeadEnv>;
  S asked = with_word<S>(queued | q::kSlowVal);
  asked.unlock();
  EXPECT_EQ(asked.value(), queued);
  EXPECT_EQ(SpinHeadEnv::stats().kicks_sent, 1u) << "the halted node made head was not kicked";
  pvb::g_tuning = saved;
}

// Which release each pvb_head_halt allows ("HOW A RESERVED HEAD WAITS"): a
// store unless a reserved head may halt until kicked, i.e. with kicked, or
// with timed where this run's halt cannot be bounded.
using TimedEnv = NativeEnvT<46>;
TEST(PvBounded, TheUnlockStoresUnlessAReservedHeadMayHaltUntilKicked) {
  const pvb::Tuning saved = pvb::g_tuning;
  for (const bool bounded : {true, false}) {
    TimedEnv::set_bounded_wait(bounded);
    ASSERT_EQ(native::apply_lock_tuning({"pvb_head_halt=timed"}), nullptr);
    EXPECT_EQ(pvb::head_halt_timed<TimedEnv>(), bounded);
    EXPECT_EQ(pvb::unlock_may_store<TimedEnv>(), bounded) << "timed, bounded halts " << bounded;
    ASSERT_EQ(native::apply_lock_tuning({"pvb_head_halt=kicked"}), nullptr);
    EXPECT_FALSE(pvb::head_halt_timed<TimedEnv>());
    EXPECT_FALSE(pvb::unlock_may_store<TimedEnv>()) << "kicked, bounded halts " << bounded;
    ASSERT_EQ(native::apply_lock_tuning({"pvb_head_halt=spin"}), nullptr);
    EXPECT_TRUE(pvb::unlock_may_store<TimedEnv>()) << "spin, bounded halts " << bounded;
  }
  TimedEnv::set_bounded_wait(true);
  pvb::g_tuning = saved;
  EXPECT_EQ(pvb::g_tuning.head_halt, pvb::kHeadTimed) << "timed is the default";
  EXPECT_TRUE(pvb::unlock_may_store<TimedEnv>());
}

// The race a store release opens: the unlock loads the word (locked 1, no
// N... or N and no 3), the head turns 1 into 3 and halts, and the unlock's
// store writes 0 over that 3, so nobody kicks the head.  Played here in that
// order: the head halts with its 3, then the owner's store clears the byte.
// A timed head halt ends at pvb_head_halt_us, finds the lock free and
// reserved for it, and takes it; nobody sent a kick.
TEST(PvBounded, ATimedHeadTakesTheLockAfterAReleaseErasedItsKickRequest) {
  TimedEnv::reset();
  TuningScope tuning(/*bound_us=*/1, /*head_spins=*/64);
  ASSERT_EQ(native::apply_lock_tuning({"pvb_head_halt=timed", "pvb_head_halt_us=2000"}), nullptr);
  locks::PvBoundedLock<TimedEnv> lock{};
  std::atomic<int> phase{0};
  u32 word_after = 0;
  run_on_cpus<TimedEnv>(2, [&](unsigned cpu) {
    if (cpu == 0) {
      lock.lock();
      phase = 1;
      // Wait for cpu 1's request (N, locked 3) and for its sleep.
      while ((lock.value() & (pvb::kNoSteal | q::kLockedMask)) != (pvb::kNoSteal | q::kSlowVal) ||
             TimedEnv::stats().sleeps == 0)
        std::this_thread::yield();
      q::clear_locked_release(lock.word());  // the store of an unlock that had loaded 1
      while (phase.load() != 2) std::this_thread::yield();
    } else {
      while (phase.load() != 1) std::this_thread::yield();
      lock.lock();
      word_after = lock.value();
      lock.unlock();
      phase = 2;
    }
  });
  EXPECT_EQ(word_after & (pvb::kNoSteal | q::kLockedMask), q::kLockedVal) << "the head took its reservation";
  EXPECT_EQ(TimedEnv::ev[1].get(LockEvent::pv_reserved), 1u);
  EXPECT_EQ(TimedEnv::ev[1].get(LockEvent::pv_head_expired), 1u) << "the halt ended by its limit";
  EXPECT_EQ(TimedEnv::stats().kicks_sent, 0u);
  EXPECT_GE(TimedEnv::stats().expired, 1u);
  EXPECT_EQ(TimedEnv::stats().timeouts, 0u);
  EXPECT_EQ(lock.value(), 0u);
}

// Timed heads and store releases under contention: halts short enough to
// expire often (50 us), exclusion holds and every acquisition is made.
// Whether a reserved head halts at all is the host scheduler's doing (on a
// loaded host the four threads may rarely overlap): runs repeat until one
// has a head halt, checking every run.
TEST(PvBounded, TimedHeadsWithStoreReleasesExcludeAndFinish) {
  TuningScope tuning(/*bound_us=*/20, /*head_spins=*/1);
  ASSERT_EQ(native::apply_lock_tuning({"pvb_head_halt=timed", "pvb_head_halt_us=50", "pvb_node_spins=1"}), nullptr);
  u64 head_halts = 0;
  for (unsigned run = 1; head_halts == 0 && !HasFailure(); run++) {
    TimedEnv::reset();
    const StressResult r = four_thread_run<TimedEnv>();
    EXPECT_EQ(TimedEnv::stats().timeouts, 0u) << "a lost wake-up of an untimed (node) halt";
    head_halts = TimedEnv::event_total(LockEvent::pv_wait_head);
    std::printf("[ timed heads ] run %u: %.3f s, head halts %llu, expired with the lock free %llu\n", run, r.seconds,
                static_cast<unsigned long long>(head_halts),
                static_cast<unsigned long long>(TimedEnv::event_total(LockEvent::pv_head_expired)));
  }
}

// ---- handoff=running: lending past a preempted reserved head -----------------

// An Env whose run-state hint the test sets: `preempted[cpu]`, `sleeping[cpu]`.
template <int kTag>
struct HintEnv : NativeEnvT<kTag> {
  static inline std::atomic<bool> preempted[locks::kMaxCpus];
  static inline std::atomic<bool> sleeping[locks::kMaxCpus];
  static bool vcpu_is_preempted(unsigned cpu) { return preempted[cpu].load(std::memory_order_relaxed); }
  static abi::RunState vcpu_run_state(unsigned cpu) {
    if (preempted[cpu].load(std::memory_order_relaxed)) return abi::RunState::kPreempted;
    return sleeping[cpu].load(std::memory_order_relaxed) ? abi::RunState::kSleeping : abi::RunState::kRunning;
  }
  static void set_all(bool p) {
    for (auto& f : preempted) f.store(p, std::memory_order_relaxed);
    for (auto& f : sleeping) f.store(false, std::memory_order_relaxed);
  }
};

// Sets handoff (and the staleness bound) for one test, restores after.
class HandoffScope {
 public:
  HandoffScope(const char* handoff, u64 stale_us, u64 bound_us = pvb::g_tuning.bound_us) : saved_(pvb::g_tuning) {
    const std::vector<std::string> p = {std::string("pvb_handoff=") + handoff,
                                        "pvb_stale_us=" + std::to_string(stale_us),
                                        "pvb_bound_us=" + std::to_string(bound_us), "pvb_bound_max_us=1"};
    EXPECT_EQ(native::apply_lock_tuning(p), nullptr);
  }
  ~HandoffScope() { pvb::g_tuning = saved_; }

 private:
  pvb::Tuning saved_;
};

TEST(PvBounded, HandoffParameterTakesWordsAndNumbersAndRejectsJunk) {
  const pvb::Tuning saved = pvb::g_tuning;
  EXPECT_EQ(native::apply_lock_tuning({"pvb_handoff=running"}), nullptr);
  EXPECT_EQ(pvb::g_tuning.handoff, pvb::kHandoffRunning);
  EXPECT_EQ(native::apply_lock_tuning({"pvb_handoff=0"}), nullptr);
  EXPECT_EQ(pvb::g_tuning.handoff, pvb::kHandoffHead);
  EXPECT_STREQ(native::apply_lock_tuning({"pvb_handoff=oldest"}), "pvb_handoff=oldest");
  EXPECT_STREQ(native::apply_lock_tuning({"pvb_handoff=2"}), "pvb_handoff") << "out of range";
  EXPECT_STREQ(native::apply_lock_tuning({"pvb_bound_us=running"}), "pvb_bound_us=running") << "no words for T";
  EXPECT_STREQ(native::apply_lock_tuning({"pvb_stale_us="}), "pvb_stale_us=");
  EXPECT_STREQ(native::apply_lock_tuning({"pvb_stale_us=99999999999999999999999"}), "pvb_stale_us=99999999999999999999999")
      << "overflow";
  pvb::g_tuning = saved;
}

using LendEnv = HintEnv<44>;
using Lend = locks::PvBoundedLock<LendEnv>;

TEST(PvBounded, RunningModeLendsOnlyWhileTheReservedHeadIsPreemptedAndSilent) {
  LendEnv::reset();
  LendEnv::set_all(false);
  LendEnv::bind_cpu(0);
  const u32 reserved = q::encode_tail<pvb::Tail>(2, 0) | pvb::kNoSteal | pvb::head_cpu_bits(1);  // (n,N|1,0)
  using Hooks = pvb::Hooks<LendEnv>;
  pvb::Arrival<LendEnv>::life[1].alive = 0;  // head 1's loop has been silent forever
  {
    HandoffScope mode("head", 1);
    LendEnv::preempted[1] = true;
    Lend l = with_word<Lend>(reserved);
    EXPECT_FALSE(Hooks::trylock(l.word())) << "head mode never lends";
    EXPECT_EQ(l.value(), reserved);
  }
  HandoffScope mode("running", 1);
  {
    LendEnv::preempted[1] = false;
    Lend l = with_word<Lend>(reserved);
    EXPECT_FALSE(Hooks::trylock(l.word())) << "lent past a head the hint calls running";
    EXPECT_EQ(l.value(), reserved);
  }
  {
    LendEnv::preempted[1] = true;
    pvb::Arrival<LendEnv>::life[1].alive = locks::read_lock_clock();  // its loop ran just now...
    HandoffScope slow("running", 1000000);                       // ...and may be silent for 1 s
    Lend l = with_word<Lend>(reserved);
    EXPECT_FALSE(Hooks::trylock(l.word())) << "lent past a head whose loop is alive (a stuck hint)";
    EXPECT_EQ(l.value(), reserved);
  }
  {
    LendEnv::preempted[1] = false;
    LendEnv::sleeping[1] = true;  // halted, or kicked and not yet switched in
    pvb::Arrival<LendEnv>::life[1].alive = 0;
    Lend l = with_word<Lend>(reserved);
    EXPECT_FALSE(Hooks::trylock(l.word())) << "lent past a sleeping head: it is about to be woken";
    EXPECT_EQ(l.value(), reserved);
    LendEnv::sleeping[1] = false;
  }
  LendEnv::preempted[1] = true;
  pvb::Arrival<LendEnv>::life[1].alive = 0;
  Lend l = with_word<Lend>(reserved);
  ASSERT_TRUE(Hooks::trylock(l.word())) << "a reserved lock whose head is preempted and silent is lent";
  EXPECT_EQ(l.value(), reserved | pvb::kBorrowedVal) << "a borrow keeps N and the head, and says borrowed";
  EXPECT_EQ(LendEnv::event_total(LockEvent::pv_lend), 1u);
  l.unlock();
  EXPECT_EQ(l.value(), reserved) << "the borrower's unlock keeps the reservation";
  EXPECT_EQ(LendEnv::event_total(LockEvent::pv_boost), 0u) << "a borrower must not boost (one exit per borrow)";
  Lend owned = with_word<Lend>(reserved | q::kLockedVal);  // held by an owner that did not borrow
  owned.unlock();
  EXPECT_EQ(LendEnv::event_total(LockEvent::pv_boost), 1u) << "the owner's release boosts the preempted head";
  Lend held = with_word<Lend>(reserved | q::kLockedVal);
  EXPECT_FALSE(Hooks::try_borrow(held.word(), held.value())) << "a held lock is never lent";
}

// Exclusion and progress with lending on every chance: the hint says
// "preempted" for everyone all the time, and heads count as silent after
// 1 us, so borrows race with head acquisitions, steals and halts.  Whether
// a borrow happens at all is the host scheduler's doing (the threads must
// overlap): runs repeat until one lends, checking every run.
using LieEnv = HintEnv<45>;

TEST(PvBounded, RunningModeExcludesWithAHintThatAlwaysSaysPreempted) {
  HandoffScope mode("running", /*stale_us=*/1, /*bound_us=*/1);  // every head reserves at once
  // No steal phase: every contended newcomer queues, so there are many heads
  // (the scope restores the default).
  ASSERT_EQ(native::apply_lock_tuning({"pvb_steal_spins=0"}), nullptr);
  u64 lends = 0;
  for (unsigned run = 1; lends == 0 && !HasFailure(); run++) {
    LieEnv::reset();
    LieEnv::set_all(true);
    const StressResult r = four_thread_run<LieEnv>();
    EXPECT_EQ(LieEnv::stats().timeouts, 0u);
    lends = LieEnv::event_total(LockEvent::pv_lend);
    std::printf("[ lend     ] run %u: %.3f s, reservations %llu, lends %llu\n", run, r.seconds,
                static_cast<unsigned long long>(LieEnv::event_total(LockEvent::pv_no_steal)),
                static_cast<unsigned long long>(lends));
  }
}

// ---- the bound --------------------------------------------------------------

struct WaitResult {
  double max_wait_ms = 0;
  u64 max_wait_hog_acquisitions = 0;  // the hog's acquisitions during the waiter's longest wait
  u64 waiter_acquisitions = 0;
  u64 hog_acquisitions = 0;
  double hog_cpu_ms = 0;  // the hog thread's own CPU time over the run
};

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// CPU 0 is a hog: it takes the lock, holds it ~1 us, releases it and takes it
// again at once, for `ms` milliseconds.  CPU 1 measures how long each of its
// lock() calls waits, in time and in the hog's acquisitions meanwhile.  With
// a test-and-set lock the hog, which owns the cache line when it releases,
// re-takes the lock almost every time.
template <class L, class Env>
WaitResult hog_and_waiter(int ms) {
  Env::reset();
  L lock{};
  std::atomic<bool> stop{false};
  std::atomic<u64> hog_count{0};  // written by the hog only
  WaitResult r;
  run_on_cpus<Env>(2, [&](unsigned cpu) {
    using clock = std::chrono::steady_clock;
    if (cpu == 0) {
      const double cpu0 = thread_cpu_ms();
      const auto end = clock::now() + std::chrono::milliseconds(ms);
      while (clock::now() < end) {
        for (int i = 0; i < 64; i++) {
          lock.lock();
          for (int k = 0; k < 20; k++) locks::cpu_relax();
          lock.unlock();
          hog_count.store(hog_count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
      }
      r.hog_acquisitions = hog_count.load(std::memory_order_relaxed);
      r.hog_cpu_ms = thread_cpu_ms() - cpu0;
      stop = true;
    } else {
      while (!stop.load()) {
        const auto t0 = clock::now();
        const u64 c0 = hog_count.load(std::memory_order_relaxed);
        lock.lock();
        const u64 c1 = hog_count.load(std::memory_order_relaxed);
        const double waited = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
        lock.unlock();
        r.max_wait_ms = std::max(r.max_wait_ms, waited);
        r.max_wait_hog_acquisitions = std::max(r.max_wait_hog_acquisitions, c1 - c0);
        r.waiter_acquisitions++;
        for (int k = 0; k < 200; k++) locks::cpu_relax();
      }
    }
  });
  return r;
}

// A wait bound in the hog's own progress rather than in wall time, which
// would count the host descheduling either thread: the acquisitions the hog
// makes in `ms` of its own CPU time, at its pace over the run. A waiter that
// waits while its thread is off the CPU past T stops the hog (the lock is
// its after T), so such a wait adds no acquisitions.
[[maybe_unused]] double hog_pace_bound(const WaitResult& r, double ms) {  // unused under TSan (below)
  return static_cast<double>(r.hog_acquisitions) / std::max(r.hog_cpu_ms, 1.0) * ms;
}

using BoundEnv = NativeEnvT<42>;

TEST(PvBounded, NoWaiterWaitsMuchLongerThanTWhileTheHolderReacquires) {
  constexpr u64 kBoundUs = 2000;
  // Margin for the handoff and for the hog's uneven pace (counted in its
  // acquisitions, the waits leave out the host's descheduling; in wall time
  // single waits of ~110 ms were seen on a loaded 2-core host).  A TAS
  // waiter typically gets the lock 0-1000 times in the whole run, with a
  // max wait of most of the run (printed below for comparison).
  constexpr double kMarginMs = 150;
  constexpr int kRunMs = 1000;
  TuningScope tuning(kBoundUs);
  const WaitResult b = hog_and_waiter<locks::PvBoundedLock<BoundEnv>, BoundEnv>(kRunMs);
  const WaitResult t = hog_and_waiter<locks::TasLock<BoundEnv>, BoundEnv>(kRunMs);
  std::printf("[ bound    ] T=%.1f ms: pvbounded max wait %.2f ms, %llu hog acquisitions (%llu/%llu waiter/hog), "
              "tas %.2f ms, %llu (%llu/%llu)\n",
              kBoundUs / 1000.0, b.max_wait_ms, static_cast<unsigned long long>(b.max_wait_hog_acquisitions),
              static_cast<unsigned long long>(b.waiter_acquisitions), static_cast<unsigned long long>(b.hog_acquisitions),
              t.max_wait_ms, static_cast<unsigned long long>(t.max_wait_hog_acquisitions),
              static_cast<unsigned long long>(t.waiter_acquisitions), static_cast<unsigned long long>(t.hog_acquisitions));
  // The waiter gets the lock about once per T (plus its own delay): far
  // more often than once per margin.
  EXPECT_GT(b.waiter_acquisitions, static_cast<u64>(kRunMs / kMarginMs) * 4);
  EXPECT_GT(b.hog_acquisitions, 0u);
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer serialises the atomics and stretches every wait (a
  // 170 ms worst wait was seen, and TAS stopped starving): the time bound is
  // checked in the plain build only; here the run checks the races.
  (void)kMarginMs;
#else
  EXPECT_LE(static_cast<double>(b.max_wait_hog_acquisitions),
            hog_pace_bound(b, kBoundUs / 1000.0 + kMarginMs))
      << "a pvbounded waiter waited past T + margin (max wait " << b.max_wait_ms << " ms)";
#endif
}

// A stuck hint ("preempted" for a head that runs) must not starve it: its
// heartbeat stops the lending.  Same harness and margin as above.
using StuckEnv = HintEnv<46>;

TEST(PvBounded, RunningModeKeepsTheBoundWhenTheHintIsStuckAtPreempted) {
  constexpr u64 kBoundUs = 2000;
  constexpr double kMarginMs = 150;
  constexpr int kRunMs = 1000;
  StuckEnv::set_all(true);
  HandoffScope mode("running", /*stale_us=*/100, kBoundUs);
  const WaitResult b = hog_and_waiter<locks::PvBoundedLock<StuckEnv>, StuckEnv>(kRunMs);
  std::printf("[ bound    ] running mode, stuck hint: max wait %.2f ms (%llu/%llu waiter/hog), lends %llu\n",
              b.max_wait_ms, static_cast<unsigned long long>(b.waiter_acquisitions),
              static_cast<unsigned long long>(b.hog_acquisitions),
              static_cast<unsigned long long>(StuckEnv::event_total(LockEvent::pv_lend)));
  EXPECT_GT(b.waiter_acquisitions, static_cast<u64>(kRunMs / kMarginMs) * 4);
#if !defined(__SANITIZE_THREAD__)
  EXPECT_LE(static_cast<double>(b.max_wait_hog_acquisitions),
            hog_pace_bound(b, kBoundUs / 1000.0 + kMarginMs))
      << "a stuck hint let borrowers starve the head (max wait " << b.max_wait_ms << " ms)";
#else
  (void)kMarginMs;
#endif
}

}  // namespace
}  // namespace lockvisor::test
