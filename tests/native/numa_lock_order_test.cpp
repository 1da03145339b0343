// cna / pvcna / hq / pvhq (guest/locks/cna.h, pv_cna.h, hq.h): the handoff order on a queue
// built one waiter at a time, so that the order is the algorithm's and not
// the scheduler's. CPU c is on node c % 2. The holder (CPU 0) holds the lock
// while CPUs 7, 1, 2, 3, 4, 5 arrive in that order, each only once the one
// before is visibly waiting (pending bit or tail of the word); then it
// releases and every waiter records its turn. (hq's local waiters are
// visible as their node queue's tail instead of the word's.)  The bypass
// tests at the end check each lock's stated BOUND under free-running
// contention.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "harness.h"
#include "locks/cna.h"
#include "locks/hq.h"
#include "locks/pv_cna.h"
#include "native_env.h"

namespace lockvisor::test {
namespace {

using Env = NativeEnvT<41>;

// The PV locks' order tests spin without halting: a queue head that halts
// lets newcomers steal past it (pvcna's hybrid trylock, pvhq's global
// pvqspinlock: outside the NUMA bound, by design), so with halts the order
// would be the host scheduler's, e.g. on a slow or emulated host. Halting
// and kicking have their own tests (pv_lock_test.cpp).
inline constexpr locks::u32 kNeverHalts = ~locks::u32{0};

// `slow_cpu`: that waiter holds the lock for kSlowHold (a time bound's
// trigger: the time only grows, so what follows is certain).
inline constexpr auto kSlowHold = std::chrono::milliseconds(5);

template <class L>
std::vector<unsigned> handoff_order(L& lock, bool first_is_pending, unsigned nodes = 2, unsigned slow_cpu = ~0u) {
  Env::reset();
  Env::set_numa_nodes(nodes);
  const std::vector<unsigned> arrivals = {7, 1, 2, 3, 4, 5};
  std::vector<unsigned> order;
  std::vector<std::thread> threads;
  Env::bind_cpu(0);
  lock.lock();
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    const unsigned cpu = arrivals[i];
    threads.emplace_back([&lock, &order, cpu, slow_cpu] {
      Env::bind_cpu(static_cast<int>(cpu));
      lock.lock();
      order.push_back(cpu);  // under the lock
      if (cpu == slow_cpu) std::this_thread::sleep_for(kSlowHold);
      lock.unlock();
    });
    // Wait until this waiter is visible in the word: the first as the
    // pending waiter (native) or every one as the queue's tail.
    const bool pending = first_is_pending && i == 0;
    auto* local_tail = &locks::hq::State<Env>::slot(reinterpret_cast<locks::q::QSpinWord*>(&lock))
                            ->local_tail[Env::numa_node(cpu)];
    const locks::q::QNode* own_local = &locks::hq::State<Env>::locals[cpu][0].node;
    for (;;) {
      const locks::u32 v = lock.value();
      if (pending ? (v & locks::q::kPendingMask) != 0 : (v & locks::q::kTailMask) == locks::q::encode_tail(cpu, 0))
        break;
      if (!pending && __atomic_load_n(local_tail, __ATOMIC_ACQUIRE) == own_local) break;
      // A PV queue head that has halted (locked byte _Q_SLOW_VAL) keeps a
      // newcomer in the hybrid trylock, which spins while there is a queue
      // and no pending bit: the newcomer would queue only once the head
      // spins again.  Wake the head (a spurious wake-up, which the PV locks
      // tolerate) so that it sets pending again and lets the newcomer queue.
      if (i > 0 && (v & locks::q::kLockedMask) == locks::q::kSlowVal) Env::kick(arrivals[0]);
      std::this_thread::yield();
    }
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  EXPECT_FALSE(lock.is_locked());
  return order;
}

// Queue after the pending waiter 7: 1 (n1), 2 (n0), 3 (n1), 4 (n0), 5 (n1).
// 1 passes to 3 (2 -> secondary), 3 to 5 (4 -> secondary), 5 is the tail:
// the secondary queue 2, 4 becomes the queue. FIFO would be 7,1,2,3,4,5.
// The time form is off: a host that delays a handoff by 1 ms would end the
// run early (ThresholdInTime below).
TEST(Cna, SameNodeWaitersGoFirstThenTheSecondaryQueue) {
  ParamScope p({"cna_threshold_us=0"});
  locks::CnaLock<Env> lock{};
  EXPECT_EQ(handoff_order(lock, true), (std::vector<unsigned>{7, 1, 3, 5, 2, 4}));
  EXPECT_GE(Env::event_total(locks::LockEvent::numa_local_pass), 2u);
  EXPECT_GE(Env::event_total(locks::LockEvent::numa_flush), 1u);
}

// Threshold 1: after one same-node handoff with remote waiters skipped, the
// secondary queue goes back in front: 1 -> 3 (2 skipped), then 3 must hand
// to 2, which takes 4, and 4 takes 5.
TEST(Cna, ThresholdPutsTheSecondaryQueueBackInFront) {
  ParamScope p({"cna_threshold=1"});
  locks::CnaLock<Env> lock{};
  EXPECT_EQ(handoff_order(lock, true), (std::vector<unsigned>{7, 1, 3, 2, 4, 5}));
}

// The time form: 1 moves 2 to the secondary queue when it passes to 3 (the
// run starts), then holds the lock for 5 ms; 3, taking the lock after that,
// finds the run older than cna_threshold_us = 1 ms and puts 2 back in
// front, whatever the handoff count.  With the time form off the same
// schedule keeps the run on node 1 (the first order).
TEST(Cna, ThresholdInTimePutsTheSecondaryQueueBackInFront) {
  {
    ParamScope p({"cna_threshold_us=0"});
    locks::CnaLock<Env> lock{};
    EXPECT_EQ(handoff_order(lock, true, 2, 1), (std::vector<unsigned>{7, 1, 3, 5, 2, 4}));
  }
  ParamScope p({"cna_threshold_us=1000"});
  locks::CnaLock<Env> lock{};
  EXPECT_EQ(handoff_order(lock, true, 2, 1), (std::vector<unsigned>{7, 1, 3, 2, 4, 5}));
}

TEST(PvCna, ThresholdInTimePutsTheSecondaryQueueBackInFront) {
  ParamScope p({"cna_threshold_us=1000"});
  locks::PvCnaLock<Env, kNeverHalts> lock{};
  EXPECT_EQ(handoff_order(lock, false, 2, 1), (std::vector<unsigned>{7, 1, 3, 2, 4, 5}));
}

// pvcna has no pending path: 7 is the queue head, and passes to 1 (its own
// node, next in line); the rest as cna.
TEST(PvCna, SameNodeWaitersGoFirstThenTheSecondaryQueue) {
  ParamScope p({"cna_threshold_us=0"});
  locks::PvCnaLock<Env, kNeverHalts> lock{};
  EXPECT_EQ(handoff_order(lock, false), (std::vector<unsigned>{7, 1, 3, 5, 2, 4}));
  const EnvStats s = Env::stats();
  EXPECT_EQ(s.kicks_sent, s.kicks_received + s.kicks_coalesced + s.kicks_pending);
  EXPECT_EQ(s.timeouts, 0u);
}

// With one node CNA is MCS order.
TEST(Cna, OneNodeIsArrivalOrder) {
  locks::CnaLock<Env> lock{};
  EXPECT_EQ(handoff_order(lock, true, 1), (std::vector<unsigned>{7, 1, 2, 3, 4, 5}));
  EXPECT_EQ(Env::event_total(locks::LockEvent::numa_flush), 0u);
}

// hq: 7 is the pending waiter and 1 the global queue's head (qspinlock
// mode: no global queue when they came); 2 (n0) and 3 (n1) find one and
// switch to NUMA mode, each the local head of its node, queued globally;
// 4 (n0) and 5 (n1) wait in their node's queue. 2 hands to 4 within node 0
// (the global word stays locked), 4 has no local successor and releases:
// node 1's head 3 takes it, then 5 within node 1. FIFO: 7,1,2,3,4,5.
TEST(Hq, LocalHandoffsThenTheNextNodeInArrivalOrder) {
  locks::HqLock<Env> lock{};
  EXPECT_EQ(handoff_order(lock, true), (std::vector<unsigned>{7, 1, 2, 4, 3, 5}));
  EXPECT_EQ(Env::event_total(locks::LockEvent::numa_local_pass), 2u);
  for (const auto& m : locks::hq::State<Env>::meta) EXPECT_EQ(m.binding, 0u) << "metadata still bound";
}

// Threshold 1: no local handoff at all, the local successor queues globally
// behind the other node: 2, 3, then 4 and 5. 4 is made local head by 2's
// release and 5 by 3's, and each then queues globally on its own thread, so
// which of the two gets into the global queue first is the scheduler's
// choice (either order keeps the rule: no handoff stayed on a node).
TEST(Hq, LocalThresholdSendsTheLockToTheNextNode) {
  ParamScope p({"hq_fairness_threshold=1"});
  locks::HqLock<Env> lock{};
  const std::vector<unsigned> order = handoff_order(lock, true);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(std::vector<unsigned>(order.begin(), order.begin() + 4), (std::vector<unsigned>{7, 1, 2, 3}));
  EXPECT_TRUE((order[4] == 4 && order[5] == 5) || (order[4] == 5 && order[5] == 4)) << order[4] << ", " << order[5];
  EXPECT_EQ(Env::event_total(locks::LockEvent::numa_local_pass), 0u);
  EXPECT_EQ(Env::event_total(locks::LockEvent::numa_flush), 2u);
}

// The time form: node 0's run begins when 2 takes the global lock; 2 holds
// it for 5 ms, so its release, past hq_fairness_threshold_us = 1 ms, sends
// the lock to node 1 (3) and makes 4 local head, queued globally behind 3.
// 3's own run may or may not outlast 1 ms on a busy host, so 4 and 5 come
// in either order.  With the time form off: the first order above.
TEST(Hq, LocalThresholdInTimeSendsTheLockToTheNextNode) {
  {
    ParamScope p({"hq_fairness_threshold_us=0"});
    locks::HqLock<Env> lock{};
    EXPECT_EQ(handoff_order(lock, true, 2, 2), (std::vector<unsigned>{7, 1, 2, 4, 3, 5}));
  }
  ParamScope p({"hq_fairness_threshold_us=1000"});
  locks::HqLock<Env> lock{};
  const std::vector<unsigned> order = handoff_order(lock, true, 2, 2);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(std::vector<unsigned>(order.begin(), order.begin() + 4), (std::vector<unsigned>{7, 1, 2, 3}));
  EXPECT_GE(Env::event_total(locks::LockEvent::numa_flush), 1u);
}

// pvhq has no pending path: 7 heads the global queue in qspinlock mode; 1
// (n1) and 2 (n0) are local heads queued globally, 3, 4, 5 local waiters.
// 1 -> 3 -> 5 within node 1, then node 0: 2 -> 4.
TEST(PvHq, LocalHandoffsThenTheNextNodeInArrivalOrder) {
  locks::PvHqLock<Env, kNeverHalts> lock{};
  EXPECT_EQ(handoff_order(lock, false), (std::vector<unsigned>{7, 1, 3, 5, 2, 4}));
  const EnvStats s = Env::stats();
  EXPECT_EQ(s.kicks_sent, s.kicks_received + s.kicks_coalesced + s.kicks_pending);
  EXPECT_EQ(s.timeouts, 0u);
}

// THE RUN BOUND under free-running contention: kThreads threads on two
// nodes take the lock in a loop, and under the lock each holder reads the
// secondary queue it inherited as queue head (its CNA record, then cleared,
// so that a later fast-path acquisition does not see it again).  Holders
// that took over a non-empty secondary queue one after the other, all of
// one node, are a run: remote waiters sat in that queue the whole time.
// No run may be longer than cna_threshold (the time form is off: its
// bound depends on the host's scheduling).  q_pending=0 keeps cna's pending
// waiter (which is no queue head, with no record) out of the count.  The
// waits themselves are not counted from outside: a thread descheduled
// between reading a clock and queueing would charge the lock for the
// scheduler's time slice.
inline constexpr unsigned kThreads = 8;
inline constexpr unsigned kRunThreshold = 8;
inline constexpr unsigned kHoldSpins = 64;

struct RunResult {
  u64 longest = 0;  // longest run seen
  u64 runs = 0;     // runs seen (a holder that found remote waiters queued)
  u64 flushes = 0;  // numa_flush events
};

template <template <class> class L>
RunResult run_lengths(u64 iters) {
  using REnv = NativeEnvT<42>;
  using Records = locks::cna::Records<REnv>;
  REnv::reset();
  REnv::set_numa_nodes(2);
  L<REnv> lock{};
  RunResult r;
  unsigned run_node = ~0u;
  u64 run = 0;
  run_on_cpus<REnv>(
      kThreads,
      [&](unsigned cpu) {
        for (u64 i = 0; i < iters; i++) {
          lock.lock();
          locks::cna::Record* rec = &Records::records[cpu][0];
          const bool remote_waiting = rec->sec_head != nullptr;
          rec->sec_head = nullptr;
          // Under the lock: the run bookkeeping is the lock's to protect.
          const unsigned node = REnv::numa_node(cpu);
          if (!remote_waiting) {
            run = 0;
          } else if (run > 0 && node == run_node) {
            ++run;
          } else {
            run_node = node;
            run = 1;
            ++r.runs;
          }
          r.longest = std::max(r.longest, run);
          // A critical section long enough that the threads overlap (and
          // queue) however the host schedules them.
          for (unsigned k = 0; k < kHoldSpins; k++) locks::cpu_relax();
          lock.unlock();
        }
      },
      L<REnv>::kName);
  r.flushes = REnv::event_total(locks::LockEvent::numa_flush);
  return r;
}

template <class Env>
using PvCnaDefault = locks::PvCnaLock<Env>;

TEST(NumaRunBound, CnaRunsStayWithinTheThreshold) {
  ParamScope p({"cna_threshold=" + std::to_string(kRunThreshold), "cna_threshold_us=0", "q_pending=0"});
  const RunResult r = run_lengths<locks::CnaLock>(scaled(5000));
  EXPECT_LE(r.longest, kRunThreshold) << r.runs << " runs";
  EXPECT_GT(r.runs, 0u) << "no remote waiter was ever bypassed: the bound was not exercised";
  EXPECT_GT(r.flushes, 0u);
}

TEST(NumaRunBound, PvCnaRunsStayWithinTheThreshold) {
  ParamScope p({"cna_threshold=" + std::to_string(kRunThreshold), "cna_threshold_us=0"});
  const RunResult r = run_lengths<PvCnaDefault>(scaled(5000));
  EXPECT_LE(r.longest, kRunThreshold) << r.runs << " runs";
  EXPECT_GT(r.runs, 0u) << "no remote waiter was ever bypassed: the bound was not exercised";
  EXPECT_GT(r.flushes, 0u);
}

// The control: with the series' 2^16 handoffs and no time form the same
// contention makes runs longer than kRunThreshold, so the two tests above
// see the threshold at work, not a contention too light to make runs.
TEST(NumaRunBound, CnaRunsOutgrowASmallBoundWithoutIt) {
  ParamScope p({"cna_threshold_us=0", "q_pending=0"});
  const RunResult r = run_lengths<locks::CnaLock>(scaled(5000));
  EXPECT_GT(r.longest, kRunThreshold) << r.runs << " runs";
}

}  // namespace
}  // namespace lockvisor::test
