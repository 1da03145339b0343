// pvbounded.h: a PV lock as fast as test-and-set whose waiters' wait is
// bounded in time, also under vCPU overcommit.
//
// One file (over 500 lines): one lock. Half of it is this comment, the
// algorithm and the argument for its bound, kept beside the code it
// constrains; the rules act together on one lock word and one per-CPU
// stamp, so none of them reads alone.
//
// ALGORITHM
//   The qspinlock word and MCS queue (qspinlock_word.h, the shared slow path
//   of qspinlock.h) with a head field where qspinlock has its pending byte,
//   the tail moved up to make room, and three rules:
//
//    31              19 18         9  8  7          0
//   +------------------+------------+---+------------+
//   |       tail       |  head cpu  | N |   locked   |
//   +------------------+------------+---+------------+
//     locked  0 free, 1 held, 3 held AND the unlocker must kick `head cpu`,
//             5 held by a borrower (rule 4: lent past the reserved head)
//     N       NO-STEAL: the lock is reserved for the queue head `head cpu`
//     head cpu  the queue head's CPU, 0..1023 (every CPU a VM may have)
//     tail    the MCS queue, as in qspinlock, from bit 19 (pvb::Tail)
//   N and head cpu together are "the head field" below.
//
//   1. Stealing (TAS speed).  Anyone may take a free lock, queue or not, as
//      long as N is clear: (n,0,0) -> (n,0,1).  A newcomer spins like TAS
//      for up to pvb_steal_spins iterations (stopping at once if N is set),
//      then joins the queue.  Under overcommit this is what makes TAS fast:
//      whichever vCPU is running when the lock is released takes it.
//      A newcomer that finds the lock held and nobody queued first spins on
//      the word for up to kFirstSpins iterations before it sets up its
//      queue node (the node's stores and its arrival stamp's clock read),
//      taking the lock only as the fast path does, (0,0,0) -> (0,0,1), so
//      nobody is bypassed; at 1:1 the lock is usually free again within one
//      critical section, and TAS, which never sets anything up, is that
//      much quicker to see it.  Short, because behind a preempted holder
//      this spinning is time the newcomer cannot yet halt in the queue.
//   2. The queue.  Non-head waiters spin pvb_node_spins iterations on their
//      node, then halt (pv::wait_node_halting, as pvqspinlock) until made
//      head.  The head competes with stealers on the word.
//   3. The bound.  Every waiter stamps its arrival time t0 (lock clock).  A queue
//      head whose age (now - t0) reaches T (pvb_bound_us) sets N with its CPU
//      number.  N is STICKY: only the head's own acquisition clears it,
//        (n,N|me,0) -> (n,s,1)     (s: its successor's cpu if linked, else
//                                   0; (0,0,1) when it is also the tail),
//      so a head that is then halted, descheduled or slow to wake keeps the
//      lock reserved: newcomers queue instead of stealing, and the next
//      release is a direct handoff to it.  (pvqspinlock's pending bit is
//      cleared by the head before it halts, which lets newcomers steal for as
//      long as it is halted: exactly the tail this lock removes.)
//      Optionally (pvb_head_us = T_head > 0) a head also competes for T_head
//      after becoming head before it reserves.  With T_head == 0 (default)
//      the new lock owner, passing headship to its successor, sets N on the
//      successor's behalf if the successor is already older than T, so a
//      halted or descheduled successor need not run first to claim the bound.
//   3b. Reserving for a head that cannot run.  A head made young that ages
//      past T while halted (kicked, waiting for the host to run it) or
//      descheduled cannot set N itself.  So the head is always findable:
//      the head field names it from the moment it is head (the owner that passes
//      headship writes next's cpu there, halted or not: in the cmpxchg that
//      takes the lock if next has linked in by then, else when it passes
//      headship; the head of a queue it found empty writes its own on its
//      loop's first iteration), and a
//      per-CPU stamp (HeadStamp: this lock, due = t0 + T, or later with
//      T_head) says which lock that CPU heads and when its reservation is
//      due; the head's acquisition clears the stamp while it holds the lock.
//      A newcomer about to steal a free lock past a queue first reads the
//      stamp of the cpu in the head field; if that CPU heads THIS lock and is due,
//      it sets N for it instead of stealing, (n,h,0) -> (n,N|h,0), and
//      queues; if the hint says h is preempted it also asks the host to run
//      h (pvb_boost, as the unlock's boost).  One more load and a lock-clock read
//      on the steal path past a queue, nothing on the fast path or the
//      empty-queue spin path.
//
//   4. Lending (pvb_handoff=running; default head: no lending).  A lock
//      reserved for a head whose vCPU is descheduled sits unused until the
//      host runs that vCPU again (at 8 vCPUs on 2 CPUs, most of a host time
//      slice).  In running mode a newcomer in its steal phase may BORROW a
//      free reserved lock,  (n,N|h,0) -> (n,N|h,5),  keeping N and h, when
//      both say h cannot take it now: the run-state hint reports h's vCPU
//      preempted (Env::vcpu_is_preempted; not "sleeping": see
//      head_cannot_run()), AND h's head loop, which stamps a per-CPU
//      heartbeat (lock clock) every iteration, has been silent for pvb_stale_us.
//      So the lock goes to a RUNNING waiter while the reserved head cannot
//      run, and back to the reservation as soon as it can: a head that runs
//      again flips the hint at once, and even if the hint missed that
//      switch, its heartbeat stops all lending within one loop iteration.  (The waiters that borrow are newcomers
//      spinning on the word, not queued nodes: an MCS node cannot leave the
//      queue, so "the oldest running waiter" here is the oldest that is
//      looking at the lock.)  A borrower's unlock does not boost h (one
//      exit per borrow would eat the gain); the reserving owner's does.
//      The locked byte says "borrowed" (5) so that the head, once running,
//      never halts behind a borrower: it spins, its heartbeat stops further
//      borrows, and it gets the lock after that one critical section.
//      (Halting there would hand the lock to borrowers for another wake-up
//      latency each time.)
//
//   5. The adaptive bound.  T is the bound the lock aims for; the bound it
//      works with, T_now, lies in [T, T_max] (pvb_bound_max_us) and starts
//      at T.  Every "older than T" above means older than T_now (a head's
//      stamp takes T_now as it was when the node became head).  When
//      queueing itself takes longer than T_now (16 vCPUs on 2 CPUs, or vCPUs
//      descheduled by the host 60 % of the time), every head is old on
//      arrival, every release is a reserved handoff, often to a halted or
//      descheduled head, and the lock sits free until that head runs: the
//      convoy below, 25-70x slower than TAS.  What the convoy costs is that
//      idle time, so that is what steers T_now.  The unlock that releases a
//      reserved lock (and a newcomer that reserves a free one) marks the
//      time in the head's stamp; the head that then takes the lock adds
//      "now - mark" to a window of 64 head acquisitions.  At the window's
//      end: if reserved locks sat free for a quarter of its time or more,
//      T_now doubles (up to T_max); at a sixteenth or less, it moves a
//      sixteenth of the way back to T; otherwise it holds.  A window ends
//      early, doubling T_now, once it has 16 head acquisitions and a quarter
//      of its time so far went to reserved locks sitting free: raising is
//      quick because every window spent in the convoy costs throughput,
//      lowering is slow because a T_now lowered too soon brings the convoy
//      back (and a raised T_now costs only tail, never more than T_max).
//      A long queue of RUNNING waiters makes heads old on arrival too, but
//      each takes the lock at once: no idle time, no raise, and the bound
//      stays at T where it is cheap.  Three counters on one shared line,
//      written once per head acquisition (a slow path), none on the fast
//      path or a steal (T_now itself, read by every head loop, sits on a
//      line of its own); with T_max <= T the bound is fixed and nothing is
//      written.  Owners of different locks race on the counters; a lost
//      update only blurs one window, and every value written lies in
//      [T, T_max].  A head that takes the lock before the unlocker's mark
//      lands reads no idle time, which is what such a handoff cost.

//   Halting.  A node halts on its node state (halted); the lock owner that
//   makes it head marks it hashed and sets locked = 3 with its cpu, so the
//   unlock kicks it (the deferred kick of pvqspinlock, without the hash table:
//   the cpu is in the word).  A head halts only while it holds N (the lock is
//   reserved for it, so every release is for it): after pvb_head_spins
//   iterations it turns locked 1 -> 3 and waits while locked == 3; the
//   unlocker's RMW returns 3 and it kicks `head cpu`.  A head never halts
//   without N: a halted head could not enforce its deadline.  Nobody halts
//   without PV or on dedicated vCPUs, and no head with pvb_head_halt=spin;
//   then the unlock may be a plain store ("WITHOUT HALTING" below), and so
//   it may where a head's halt is bounded in time ("HOW A RESERVED HEAD
//   WAITS").
//
//   States of the word, (tail, byte1, locked):
//     (0,0,0) -fast, or a newcomer's first spin-> (0,0,1) -unlock-> (0,0,0)
//     (n,*,0) -steal, only if !N and (n == 0 or the head is not due)-> (n,*,1)
//     (n,h,0) -newcomer: head h stamped for this lock and due-> (n,N|h,0)
//     (n,b,*) -head h names itself (queue was empty)-> (n,b'|h,*), N kept
//     (n,*,0) -head takes it, successor s linked-> (n,s,1), else (n,0,1)
//     (n,b,1) -owner passes headship to h-> (n,[N|]h,1 or 3), N kept (no
//             write when its acquisition named h and h is young and running)
//     (n,0,1) -head older than T-> (n,N|h,1) -unlock-> (n,N|h,0) -head-> (n,s,1)
//     (n,N|h,1) -head spun pvb_head_spins-> (n,N|h,3) -unlock: kick h-> (n,N|h,0)
//     (n,*,1) -owner passes headship to halted h-> (n,[N|]h,3) -unlock: kick h
//     (n,N|h,0) -borrow, running mode, h preempted and silent-> (n,N|h,5)
//     (n,N|h,5) -borrower's unlock (no kick, no boost)-> (n,N|h,0)
//
// INVARIANTS
//   * N set => tail != 0 and `head cpu` is the current queue head; only that
//     head clears N, and only in the same cmpxchg that takes the lock.  Every
//     other acquisition path (fast path, steal, try_lock) requires N clear,
//     except a borrow (running mode), which keeps N and h as they are.
//     A newcomer sets N only with the cpu already in the head field and only when
//     that CPU's stamp names this lock, i.e. it is this lock's head (a
//     stamp is cleared by its head's acquisition, with the lock held, so no
//     stale stamp names a free lock).  One ABA case remains: the newcomer
//     read the stamp, then that head took the lock and the word came back
//     bit for bit (same tail, head field 0, i.e. cpu 0) before the new head
//     named itself; then N is briefly set for cpu 0, and the real head,
//     whose first loop iteration rewrites the head field's cpu keeping N, owns it.
//     Nothing waits on a wrong cpu meanwhile: a head halts only on
//     (n,N|me,3), and locked == 3 is written together with the right cpu.
//   * While a CPU is a queue head, the head field's cpu is it, except in two
//     windows where it is the 0 its predecessor's acquisition left: between
//     pass() and kick_node() when it linked in after that acquisition (the
//     lock is held, so nobody steals), and between joining an empty queue
//     and its first loop iteration.  The head field names a CPU before it is head
//     only from its predecessor's acquisition to pass(), with the lock held,
//     when nobody reads the head field to steal, reserve or kick.  Nobody but that
//     head, the owner that makes it head, and a newcomer adding N writes
//     the head field (a borrow keeps it).
//   * locked == 5 => a borrower holds the lock (running mode) and N is set
//     for `head cpu`; nobody turns 5 into 3 (the head does not halt behind a
//     borrower), so a borrower's unlock never has to kick.
//   * Mutual exclusion depends on nothing but the locked byte: every
//     acquisition (fast path, steal, borrow, head) is a cmpxchg from
//     locked == 0.  The run-state hint and the heartbeat only decide WHO
//     may try; a wrong hint costs time, never exclusion or a wake-up.
//   * locked == 3 => `head cpu` is the head or the next head and will be
//     kicked by the unlock; only the owner (kick_node) or the reserved head
//     itself (1 -> 3) writes 3, and both write the same cpu.
//   * T_now, as every reader sees it, lies in [T, max(T, T_max)].
//   * Bound: let W arrive at t0 (stamped when it sets up its queue node,
//     after its first spin: at most kFirstSpins iterations after it asked).
//     Waiters ahead of W in the queue arrived
//     earlier (unless W was descheduled before it queued: then its bound
//     counts from its queueing), so once W is older than T all of them are
//     too; from then on
//     every head has N set for it as soon as it is head and anyone looks:
//     by itself if it runs, by the owner that made it head if it was already
//     due then, and otherwise by the first newcomer that would have stolen
//     past it (rule 3b), whether or not the head runs.  So no acquisition
//     bypasses the queue once its head is due: each release goes to the
//     queue in FIFO order.  W's wait is at most T + (queue length ahead of W) x
//     (critical section + handoff latency), where the handoff latency of a
//     halted or descheduled head is the host's wake-up / scheduling delay
//     (which no lock can beat for a descheduled waiter).  With T_head > 0
//     add T_head per head ahead of W.  Running mode: lending happens only
//     while the head cannot run; once it runs again it waits at most for
//     borrowers already inside the critical section (the hint flips within
//     ~1 us, the heartbeat within one loop iteration), so the bound gains
//     one critical section per time the head is descheduled.  A hint stuck
//     at "preempted" cannot starve a running head: its heartbeat is fresh.
//     Limits (the oracle, `lockvisor trace-check`, explains them): a
//     newcomer that read the clock, was descheduled and then stole made its
//     check before the head was due; a head descheduled in the few
//     instructions between joining an empty queue and its first loop
//     iteration is not named in the head field yet, so it gets N only once it runs
//     (rule 3); and a CPU heading two locks at once (a nested, interrupt-time
//     wait) is findable only for the inner one until the outer loop runs
//     again and re-stamps itself.
//     With the adaptive bound read T_max for T: a waiter older than T_max
//     is older than every T_now, so the argument holds from then on (the
//     oracle judges such runs against T_max); while T_now stays at T, as it
//     does without a convoy, T is the bound.
//     (Before rule 3b the bound needed the head to run: a halted node made
//     head younger than T that aged past T while waiting for the host to
//     run it, up to 25 ms at 8 vCPUs on 2 CPUs, left the lock stealable.)
//   * Convoy: once every waiter queues longer than T_now, every head is
//     old on arrival and the lock stays in FIFO-handoff mode (pvticket
//     speed) until the queue drains.  T_now must exceed the usual queueing
//     time: measured at 8 vCPUs on 2 CPUs on a quiet host, a fixed T of
//     0.5 ms collapsed and 1 ms did not; with 16 vCPUs, or under injected
//     preemption, 1 ms collapsed too (0.02-0.16 M acq/s against TAS's 1-1.8 M)
//     and 4-16 ms did not.  Rule 5 finds that level by itself.  Rule 3b
//     reserves also for heads that cannot run, so a reserved lock may sit
//     free until the host runs its head (the bound's handoff latency);
//     lending (rule 4, running mode) is what uses it meanwhile.
//
// WHY NO WAKE-UP IS LOST (sticky kicks, lock_env.h)
//   * Node: the pvqspinlock store-buffer argument (pv::wait_node_halting vs
//     kick_node's cmpxchg of the node state): either the node sees
//     node->locked and does not halt, or kick_node sees it halted and sets
//     locked = 3, and the unlock kicks it.
//   * Head: its 1 -> 3 cmpxchg and the unlocker's fetch_and are RMWs of one
//     word, so totally ordered: either the unlock sees 3 and kicks, or the
//     head sees 0 and takes the lock.  A kick that arrives before the head
//     suspends is sticky, so its Env::wait() returns at once.
//   Under LOSSY kicks (a kick to a CPU that is not yet halted forgotten) a
//   waiter could sleep forever in both windows above; like pvqspinlock and
//   pvticket this lock relies on the sticky contract.  A spurious wake-up
//   only costs a loop iteration (every wait re-checks and loops).
//
// UNDER vCPU PREEMPTION
//   Lock-holder preemption: as TAS and pvqspinlock, everyone waits; queued
//   waiters halt so the holder gets the pCPU sooner.  Lock-waiter preemption:
//   while no waiter is older than T, running CPUs steal (TAS behaviour, no
//   convoy behind a descheduled head); after that the lock waits for the
//   head, so a descheduled head costs throughput but never starvation
//   (handoff=head), or the lock is lent to running waiters until the head
//   runs again (handoff=running, rule 4).
//   Boost (pvb_boost): the unlock asks the host to run a reserved head whose
//   vCPU is reported preempted, and so does a newcomer that has just
//   reserved for it (yield_to_hint; a hint, never needed for progress).
//
// WITHOUT HALTING (no PV wait/kick, vCPUs advertised as dedicated, or
// pvb_head_halt=spin)
//   Without Env::pv_available() nobody can halt, and with Env::dedicated()
//   (KVM_HINTS_REALTIME: the host promises the vCPUs are not preempted for
//   long, the case where Linux drops its PV lock) nobody should: the lock
//   spins only (can_halt() false) and stays correct, with its bound (the
//   reservation needs no halting).  With pvb_head_halt=spin queued nodes
//   still halt but a reserved head only spins (head_can_halt() false).
//   In all three cases only the lock's owner ever writes locked = 3 (in
//   kick_node(), for a halted node it makes head), so an unlock that loads
//   the word and finds neither 3 nor N has nobody to kick and releases with
//   a plain byte store, as qspinlock does; otherwise the read-modify-write
//   below (the kick, rule 5's idle clock, the boost).  With a head that
//   halts until kicked that store would be wrong: between the load and the
//   store the head may set N and then 3 and halt, and the store would erase
//   its request to be kicked (a timed head recovers: "HOW A RESERVED HEAD
//   WAITS").  Why the store matters: a locked read-modify-write release waits
//   until this CPU owns the lock's line, which spinning waiters keep pulling
//   away, so every contended release stalls the owner for a cache-line
//   transfer that a store leaves to the store buffer (docs/pvbounded.md,
//   "Without halting").  A reservation made between that load and the
//   store only misses one idle mark (rule 5 reads it as no idle time: one
//   blurred window) and one boost (a hint).  The cost of a spinning head:
//   behind a preempted holder it burns its CPU instead of giving it back.
//
// HOW A RESERVED HEAD WAITS (pvb_head_halt: timed, kicked, spin)
//   A locked release costs every acquisition a drained store buffer (15 ns
//   uncontended) and, contended, a wait for the lock's line that spinning
//   waiters keep pulling away; a store release costs neither.  Only a head
//   that halts until kicked needs the locked one: its 1 -> 3 may land
//   between the unlock's load (1) and store (0), and then the store erases
//   the request and nobody kicks it.  timed (the default) lets the head's
//   halt end by itself: it halts for at most pvb_head_halt_us at a time
//   (Env::wait_for: lockvisor's HALT_FOR doorbell, a futex limit natively),
//   and every unlock that finds neither 3 nor N stores.
//   * Correct: the store writes only the locked byte, so the state it can
//     leave behind is (n,N|h,0) with h halted: free, reserved for h, which
//     no newcomer steals.  h's halt ends by its limit at the latest (the
//     halt re-checks the byte first: a store that lands before that check
//     ends it at once), its loop reads the word and takes the lock.  A
//     kick request the store did not erase is seen (3) and kicked as before.
//   * The bound: no bypass follows from the erasure (N stays set), only a
//     free lock that waits for its head, at most pvb_head_halt_us per erased
//     request; counted as pv_head_expired (a limit that found the lock free:
//     an erased request, or a kick still on its way).  The erasure needs
//     the unlocker stopped between its load and its store for longer than
//     the head takes from N to 3: the load saw no N (else the unlock is the
//     read-modify-write), and a head spins pvb_head_spins iterations with N
//     before it writes 3.  A host preemption of the unlocker right there.
//   * Its price: a head halted behind a long critical section (a preempted
//     holder) wakes once per pvb_head_halt_us to look again, one exit each.
//   kicked: halts until kicked, every unlock is a read-modify-write.  It is
//   what timed becomes where this run's halt has no limit (KVM's `hlt` with
//   --backend kvm, --pv-wake ipi or nmi, RISC-V).  spin: the head never
//   halts ("WITHOUT HALTING").
//
// All-zero is unlocked (trivially constructible).
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/pv_qspinlock.h"
#include "locks/pvbounded_tuning.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"

namespace lockvisor::locks {

namespace pvb {

using q::QNode;
using q::QSpinWord;

// The head field, bits 8..18: bit 8 is N, bits 9..18 the head's cpu (every
// CPU a VM may have, 0..1023).  The MCS tail starts above it, at bit 19 (idx
// 19..20, cpu + 1 21..31): the shared slow path reads the layout from
// Hooks::Tail.
inline constexpr u32 kNoSteal = 1u << q::kLockedBits;
inline constexpr u32 kHeadCpuOffset = q::kLockedBits + 1;
inline constexpr u32 kHeadCpuBits = 10;
inline constexpr u32 kHeadCpuMask = ((1u << kHeadCpuBits) - 1) << kHeadCpuOffset;
inline constexpr u32 kHeadFieldMask = kHeadCpuMask | kNoSteal;
using Tail = q::TailAt<kHeadCpuOffset + kHeadCpuBits>;
static_assert((q::kLockedMask | kHeadFieldMask | Tail::kMask) == 0xffffffffu &&
                  (q::kLockedMask & kHeadFieldMask) == 0 && (kHeadFieldMask & Tail::kMask) == 0,
              "locked byte, head field and tail cover the word");
static_assert(kMaxCpus <= (1u << kHeadCpuBits) && kMaxCpus <= Tail::kMaxCpus,
              "the head field and the tail name every CPU a VM may have");
// Locked byte of a lock lent past its reserved head (rule 4): held, and the
// holder is a borrower.  Adds bit 2, unused by kLockedVal (1) and kSlowVal (3).
inline constexpr u32 kBorrowedVal = 5u << q::kLockedOffset;
static_assert((kBorrowedVal & q::kLockedMask) == kBorrowedVal && kBorrowedVal != q::kSlowVal);

// Whether waiters of this lock halt (PV wait/kick) or only spin: see
// "WITHOUT HALTING" above.  Fixed for a run: both answers are set before any
// CPU takes a lock.
template <class Env>
[[gnu::always_inline]] inline bool can_halt() {
  return Env::pv_available() && !Env::dedicated();
}
// Whether a reserved queue head halts (pvb_head_halt kicked or timed).
template <class Env>
[[gnu::always_inline]] inline bool head_can_halt() {
  return can_halt<Env>() && tuning(&Tuning::head_halt) != kHeadSpin;
}
// Whether a reserved head's halt is bounded in time (timed, on a platform
// whose halt can be bounded this run): see "HOW A RESERVED HEAD WAITS".
template <class Env>
[[gnu::always_inline]] inline bool head_halt_timed() {
  return head_can_halt<Env>() && tuning(&Tuning::head_halt) == kHeadTimed && bounded_wait_available<Env>();
}
// Whether an unlock that finds neither 3 nor N may release with a store:
// unless a reserved head may halt until kicked.  On every unlock: each
// answer is one load of a value fixed for the run.
template <class Env>
[[gnu::always_inline]] inline bool unlock_may_store() {
  if (!can_halt<Env>()) return true;
  const u64 mode = tuning(&Tuning::head_halt);
  return mode == kHeadSpin || (mode == kHeadTimed && bounded_wait_available<Env>());
}

[[gnu::always_inline]] inline constexpr u32 head_cpu_bits(unsigned cpu) { return cpu << kHeadCpuOffset; }
[[gnu::always_inline]] inline constexpr unsigned head_cpu(u32 v) { return (v & kHeadCpuMask) >> kHeadCpuOffset; }
[[gnu::always_inline]] inline constexpr bool no_steal(u32 v) { return (v & kNoSteal) != 0; }
[[gnu::always_inline]] inline constexpr bool locked(u32 v) { return (v & q::kLockedMask) != 0; }

// Per CPU, on its own cache line: when this CPU's head loop last ran (lock
// clock).  Lending (rule 4) reads it as the head's heartbeat; the owner's
// kick_node() as its own clock, read by the iteration that won the lock.
struct alignas(kCacheLine) HeadLife {
  u64 alive;
};

// Per CPU, on its own cache line: the lock this CPU is the queue head of
// (nullptr: none) and when that head's reservation is due (lock clock: t0 + T, or
// later with T_head).  Written when the node becomes head, by the owner that
// passes headship (kick_node) and by the head itself (its loop's first
// iteration); cleared by the head's acquisition, which happens with the lock
// held and before the owner's unlock, so while a lock is free no CPU's stamp
// names it except its current head's.  Read by newcomers about to steal.
//
// Also for rule 5: since when this CPU is head (lock clock), and when the lock was
// last left free while reserved for it (freed: written by the unlock that
// released a reserved lock, and by a newcomer that reserved a free lock;
// a value older than `since` belongs to an earlier headship and is ignored).
struct alignas(kCacheLine) HeadStamp {
  const QSpinWord* lock;
  u64 due;
  u64 since;
  u64 freed;
};

// Arrival times of one CPU's queue nodes (same indexing as q::QNodePool),
// on that CPU's own line: written by the node's CPU in init_node() on every
// slow-path entry, read by the owner that passes headship.  (Two CPUs' nodes
// on one line would pull it back and forth between them at each arrival.)
struct alignas(kCacheLine) Arrivals {
  u64 t0[q::kMaxNodes];
};

// Rule 5's working bound T_now in lock-clock ticks; 0 until first raised.  Read
// through bound_now(), which clamps it into [T, max(T, T_max)], so that a
// T or T_max set after it was raised (as the tests do) needs no reset.  Read
// by every head-loop iteration and every handoff, written only when a window
// moves it: on a line of its own, apart from the window's counters.
struct alignas(kCacheLine) WorkingBound {
  u64 ticks;
};
// Rule 5's current window, written by every head acquisition while the bound
// is adaptive.  Sharing a line with the working bound would invalidate every
// spinning head's copy of it at each handoff.
struct alignas(kCacheLine) BoundWindow {
  u64 handoffs;  // head acquisitions counted in the current window
  u64 idle;      // of the window, ticks a reserved lock sat free for its head
  u64 since;     // when the window began (lock clock)
};

template <class Env>
struct Arrival {
  static inline Arrivals arrivals[kMaxCpus];

  static u64* of(QNode* node) {
    const unsigned cpu = load_relaxed(&node->cpu);
    const auto idx = static_cast<unsigned>(node - q::QNodePool<Env>::node(cpu, 0));
    return &arrivals[cpu].t0[idx];
  }
  // The steering looks at windows of kWindow head acquisitions and at the
  // share of the window's time the lock sat free, reserved for a head that
  // had not taken it yet (the reserved handoff's idle time): at least
  // 1/kIdleUp of the window is the lock stuck in FIFO mode behind heads that
  // cannot run (double T_now, up to T_max); at most 1/kIdleDown is the tail
  // the bound is for (lower T_now by a sixteenth of its distance to T); in
  // between it holds.  Heads that are old on arrival but take the lock at
  // once (a long queue of running waiters) cost nothing and do not steer:
  // reserving for them is what the bound is for.  A window whose idle share
  // reaches 1/kIdleUp after only kRaiseAfter acquisitions ends there with a
  // raise: in a convoy each handoff waits for a host wake-up or a
  // descheduled head, so 64 of them last ~0.1 s at 8 vCPUs on 2 CPUs with
  // vCPUs parked 60 % of the time, and the climb from T to T_max took four
  // such windows (docs/pvbounded.md, "Raising the bound sooner").  Not
  // fewer: with 8, a few heads descheduled for a host slice made a quarter
  // of 8 handoffs at 16 vCPUs on 2 CPUs without any convoy, and T_now
  // climbed there too (worst wait 24 ms against 7-11 ms).
  static constexpr u64 kWindow = 64;
  static constexpr u64 kRaiseAfter = 16;
  static constexpr u64 kIdleUp = 4;
  static constexpr u64 kIdleDown = 16;
  static inline WorkingBound working;
  static inline BoundWindow window;

  static u64 bound_now() {
    const u64 t = tuning(&Tuning::bound_ticks);
    const u64 t_max = tuning(&Tuning::bound_max_ticks);
    const u64 now = load_relaxed(&working.ticks);
    if (now <= t) return t;
    return now < t_max ? now : (t_max > t ? t_max : t);
  }
  // Measured on another CPU than the node's: a clock a little behind the
  // node's reads as age 0, not as a huge age.
  // `now` is a lock-clock value the caller has just read: the handoff path reads
  // it once and uses it for every question (a lock-clock read costs about as much
  // as a short critical section; docs/pvbounded.md, "Where a 1:1 handoff's
  // time goes"). A value a few instructions old makes the node look younger
  // by that much, never older.
  static u64 age(QNode* node, u64 now) {
    const u64 t0 = load_relaxed(of(node));
    return now > t0 ? now - t0 : 0;
  }
  static bool older_than_bound(QNode* node, u64 now) { return age(node, now) >= bound_now(); }
  static bool older_than_bound(QNode* node) { return older_than_bound(node, static_cast<u64>(read_lock_clock())); }

  // Rule 5: a head that has just taken the lock steers T_now with the time
  // the lock sat free reserved for it (`idle`, 0 for a lock won unreserved).
  static void steer_bound(u64 idle, u64 now_clock) {
    const u64 t = tuning(&Tuning::bound_ticks);
    const u64 t_max = tuning(&Tuning::bound_max_ticks);
    if (t_max <= t) return;  // a fixed bound
    const u64 handoffs = load_relaxed(&window.handoffs) + 1;
    const u64 idle_sum = load_relaxed(&window.idle) + idle;
    const u64 since = load_relaxed(&window.since);
    const u64 span = now_clock > since ? now_clock - since : 0;
    const bool convoy_now = handoffs >= kRaiseAfter && kIdleUp * idle_sum >= span;
    if (handoffs < kWindow && !convoy_now) {
      store_relaxed(&window.handoffs, handoffs);
      if (idle != 0) store_relaxed(&window.idle, idle_sum);
      return;
    }
    store_relaxed(&window.handoffs, u64{0});
    store_relaxed(&window.idle, u64{0});
    store_relaxed(&window.since, now_clock);
    const u64 now = bound_now();
    u64 next = now;
    if (kIdleUp * idle_sum >= span) {
      next = now * 2;
      if (next > t_max) next = t_max;
    } else if (kIdleDown * idle_sum <= span && now > t) {
      next = now - (now - t + 15) / 16;
      if (next < t) next = t;
    }
    if (next != now) {
      store_relaxed(&working.ticks, next);
      lockevent_inc<Env>(next > now ? LockEvent::pv_bound_up : LockEvent::pv_bound_down);
    }
  }

  static inline HeadLife life[kMaxCpus];
  static inline HeadStamp stamp[kMaxCpus];

  // The lock is free now and reserved for head `h` (rule 5's idle clock).
  static void mark_freed(unsigned h) { store_relaxed(&stamp[h].freed, static_cast<u64>(read_lock_clock())); }
  // How long the lock sat free reserved for `h` before h took it at `now`.
  // The unlock marks the time just after its release, so a head that takes
  // the lock at once may read an older mark (ignored) or none: then 0, which
  // is what that handoff cost.
  static u64 idle_before(unsigned h, u64 now) {
    const u64 freed = load_relaxed(&stamp[h].freed);
    if (freed < load_relaxed(&stamp[h].since) || freed >= now) return 0;
    return now - freed;
  }

  // `node` (of `cpu`) is now the head of `lock`, since `since` (lock clock).  Its
  // reservation is due at t0 + T, and (T_head > 0) not before since + T_head.
  // The due time is stored first: a reader that sees the lock also sees it.
  static void publish_head(const QSpinWord* lock, QNode* node, unsigned cpu, u64 since) {
    u64 due = load_relaxed(of(node)) + bound_now();
    if (const u64 th = tuning(&Tuning::head_ticks); th != 0 && since + th > due) due = since + th;
    store_relaxed(&stamp[cpu].due, due);
    store_relaxed(&stamp[cpu].since, since);
    store_release(&stamp[cpu].lock, lock);
  }
  // The head `h` named in the head field is the head of `lock` and its reservation
  // is due.  Any other answer (another lock's stamp, none: a stale head field)
  // is "no": the steal goes ahead, as before this rule.
  static bool head_due(const QSpinWord* lock, unsigned h) {
    if (load_acquire(&stamp[h].lock) != lock) return false;
    return static_cast<u64>(read_lock_clock()) >= load_relaxed(&stamp[h].due);
  }

  // Lending rule (running mode): the reserved head `h` can take no lock now.
  // Both the host's hint (preempted) and the head's own silence must say so.
  // Not "sleeping" (halted, or kicked and not yet switched in): lending then
  // keeps the borrowers' vCPUs busy, so the woken head waits for a CPU for
  // whole host slices (measured at 8 on 2: 0.56-0.77 M acq/s against 1.55-1.73
  // M without lending, worst waits 212-228 ms against 17-30 ms).
  static bool head_cannot_run(unsigned h) {
    if (!vcpu_preempted_hint<Env>(h)) return false;
    const u64 now = read_lock_clock();
    const u64 alive = load_relaxed(&life[h].alive);
    return now > alive && now - alive >= tuning(&Tuning::stale_ticks);  // alive > now: clock skew, not silence
  }
};

// One steal attempt: take a free lock unless N is set,  (n,b,0) -> (n,b,1)
// with !N in b.  Acquire pairs with the unlock's release.  Past a queue
// (n != 0) the newcomer first checks the head named in the head field: if its
// reservation is due, it sets N for that head instead of stealing,
// (n,h,0) -> (n,N|h,0) (rule 3b), so the bound does not depend on the head
// running.  On return *v is the word last seen (on success, the one taken).
// After reserving for head `h` (rule 3b): the lock now waits for h, so if
// the host has h descheduled, ask it to run h (pvb_boost; a hint, as the
// unlock's boost).  Out of line: rare, and off the steal path's code.
template <class Env>
[[gnu::noinline]] void reserved_for(unsigned h) {
  lockevent_inc<Env>(LockEvent::pv_reserve_for);
  Arrival<Env>::mark_freed(h);
  if (tuning(&Tuning::boost) && vcpu_preempted_hint<Env>(h)) {
    lockevent_inc<Env>(LockEvent::pv_boost);
    yield_to_hint<Env>(h);
  }
}

// Rule 1's first spin: at most this many iterations (and never more than
// pvb_steal_spins, so that 0 still means "no spinning before queueing").
// Measured on a 2-CPU PVM host, AMD family 25 model 17 (docs/pvbounded.md,
// "Spinning before the queue node"): 32 brought 2 vCPUs on 2 CPUs from
// 0.90x to 1.03x TAS (from 0.74-0.86x to 1.01-1.12x in the runs where that
// host moves lines slowly) and left the overcommitted settings within their
// spread; the whole steal budget (256) first cost 8 vCPUs on 2 CPUs 5-9 %:
// behind a preempted holder, spinning before the node is time a newcomer
// cannot halt.
inline constexpr u64 kFirstSpins = 32;

// The first spin of a newcomer whose fast path found the lock held with no
// queue and N clear (*v: that word).  Leaves in *v the last word it read;
// false when the spins ran out or a queue or N appeared.
template <class Env>
[[gnu::noinline, gnu::cold]] bool first_spin(QSpinWord* l, u32* v) {
  const u64 budget = tuning(&Tuning::steal_spins);
  for (u64 spins = budget < kFirstSpins ? budget : kFirstSpins; spins; --spins) {
    spin_relax<Env>();
    *v = q::read(l);
    if (*v & (Tail::kMask | kNoSteal)) return false;
    // The fast path's transition: nobody queued, nobody bypassed.  Acquire
    // pairs with the unlock's release.
    if (*v == 0 && try_cmpxchg(&l->val, v, q::kLockedVal, Order::acquire)) {
      lockevent_inc<Env>(LockEvent::lock_spin);
      return true;
    }
  }
  return false;
}

template <class Env>
[[gnu::always_inline]] inline bool try_steal(QSpinWord* l, u32* v) {
  while (!locked(*v) && !no_steal(*v)) {
    if ((*v & Tail::kMask) && Arrival<Env>::head_due(l, head_cpu(*v))) {
      if (try_cmpxchg(&l->val, v, *v | kNoSteal, Order::relaxed)) {
        reserved_for<Env>(head_cpu(*v));
        return false;
      }
      continue;
    }
    if (try_cmpxchg(&l->val, v, *v | q::kLockedVal, Order::acquire)) return true;
  }
  return false;
}

template <class Env>
struct Hooks {
  static constexpr bool kPv = true;  // no pending path: bits 8..18 are the head field
  using Tail = pvb::Tail;              // above the head field (queued_lock_slowpath)

  static void init_node(QNode* node) {
    store_relaxed(&node->cpu, Env::cpu());
    store_relaxed(&node->state, u8{q::kVcpuRunning});
    store_relaxed(Arrival<Env>::of(node), static_cast<u64>(read_lock_clock()));
  }

  // Running mode: borrow a free lock reserved for a head that cannot run.
  // (n,N|h,0) -> (n,N|h,5).  Acquire pairs with the unlock's release.
  static bool try_borrow(QSpinWord* lock, u32 v) {
    if (locked(v) || !Arrival<Env>::head_cannot_run(head_cpu(v))) return false;
    if (!try_cmpxchg(&lock->val, &v, v | kBorrowedVal, Order::acquire)) return false;
    lockevent_inc<Env>(LockEvent::pv_lend);
    return true;
  }

  // The newcomer's steal phase (before queueing, and the no-node fallback).
  static bool trylock(QSpinWord* lock) {
    u64 spins = tuning(&Tuning::steal_spins);
    const bool lend = tuning(&Tuning::handoff) == kHandoffRunning;
    for (;;) {
      u32 v = q::read(lock);
      if (no_steal(v)) {
        // Reserved: queue, unless (running mode) the head cannot run, in
        // which case keep trying to borrow for the rest of the steal phase.
        if (!lend || !Arrival<Env>::head_cannot_run(head_cpu(v))) return false;
        if (try_borrow(lock, v)) return true;
      } else if (try_steal<Env>(lock, &v)) {
        // try_steal() leaves v at the word it took: a tail there is a queued
        // waiter bypassed (the steal path); none, the TAS-style spin path.
        lockevent_inc<Env>((v & Tail::kMask) ? LockEvent::pv_lock_stealing : LockEvent::lock_spin);
        return true;
      }
      if (spins-- == 0) return false;
      spin_relax<Env>();
    }
  }

  static void wait_node(QNode* node, QNode* prev) {
    if (!can_halt<Env>()) return;  // spin-only: the caller spins on node->locked
    pv::wait_node_halting<Env>(node, prev, static_cast<u32>(tuning(&Tuning::node_spins)));
  }

  // seq_cst for the store-buffer pattern with wait_node_halting().
  static void pass(QNode* next) { __atomic_store_n(&next->locked, u32{1}, __ATOMIC_SEQ_CST); }

  // Called by the lock owner right after pass(next).  We hold the lock, so
  // locked is 1 and the head field is ours to write for `next` (next itself may set
  // N|next or publish itself concurrently: the same value).  Always names
  // next in the head field and stamps it (publish_head), so that newcomers can
  // reserve for it once it is due even if it never runs meanwhile.  Our
  // acquisition has usually named it already; then the word is written only
  // to reserve for an old next or to ask for its kick.
  static void kick_node(QSpinWord* lock, QNode* next) {
    const unsigned cpu = load_relaxed(&next->cpu);
    // The lock clock as our head loop read it in the iteration that won the
    // lock (its heartbeat; kick_node follows only a head's acquisition):
    // no clock read while we hold the lock.  Some hundred nanoseconds old,
    // it makes next look younger by that much, never older, and its
    // headship start earlier by as much, before any mark of it can exist.
    const u64 now = load_relaxed(&Arrival<Env>::life[Env::cpu()].alive);
    Arrival<Env>::publish_head(lock, next, cpu, now);
    // Reserve at once only without T_head: with it, the new head must first
    // compete that long.
    const bool old = Arrival<Env>::older_than_bound(next, now) && tuning(&Tuning::head_ticks) == 0;
    // Did next halt?  A seq_cst load decides for the usual running next,
    // which costs no read-modify-write of the node line it spins on: after
    // pass()'s seq_cst store this is the store-buffer pattern of
    // wait_node_halting() (a node that publishes "halted" re-checks
    // node->locked with seq_cst; if we read "running", that re-check sees
    // our pass() and the node does not halt).  A node seen halted may be
    // waking up: the cmpxchg to hashed decides that race, as in pvqspinlock.
    const bool halted =
        can_halt<Env>() && __atomic_load_n(&next->state, __ATOMIC_SEQ_CST) == q::kVcpuHalted &&
        cmpxchg(&next->state, u8{q::kVcpuHalted}, u8{q::kVcpuHashed}, Order::seq_cst) == q::kVcpuHalted;
    const u32 cpu_bits = head_cpu_bits(cpu);
    u32 v = q::read(lock);
    for (;;) {
      u32 n = (v & ~kHeadFieldMask) | (v & kNoSteal) | cpu_bits;
      if (old) n |= kNoSteal;
      if (halted) n = (n & ~q::kLockedMask) | q::kSlowVal;
      if (n == v || try_cmpxchg(&lock->val, &v, n, Order::release)) break;
    }
    if (old) lockevent_inc<Env>(LockEvent::pv_no_steal);
  }

  // The queue head: compete with stealers until older than T, then reserve
  // the lock (N) and wait for the handoff, halting after pvb_head_spins.
  // Returns the word (with locked set) once we hold the lock.
  static u32 wait_head_or_lock(QSpinWord* lock, QNode* node) {
    const unsigned me = load_relaxed(&node->cpu);
    const u32 reserve = kNoSteal | head_cpu_bits(me);
    // For successors' wait_early.  Usually it says running already; not
    // writing it then leaves the line with the owner that passed headship
    // and is reading it (kick_node).
    if (load_relaxed(&node->state) != q::kVcpuRunning) store_relaxed(&node->state, u8{q::kVcpuRunning});
    const u64 head_since = read_lock_clock();
    u64* const alive = &Arrival<Env>::life[me].alive;
    HeadStamp* const stamp = &Arrival<Env>::stamp[me];
    u64 spins = 0;
    for (;;) {
      // One lock-clock read per iteration: the heartbeat, and our age below.
      const u64 now = read_lock_clock();
      store_relaxed(alive, now);  // heartbeat: no lending past a running head
      // Made head by an owner (kick_node), we are stamped already; the head
      // of a queue we found empty stamps itself, and so does a head whose
      // stamp a nested (interrupt) lock wait on this CPU replaced.
      if (load_relaxed(&stamp->lock) != lock) Arrival<Env>::publish_head(lock, node, me, head_since);
      u32 v = q::read_acquire(lock);
      if (head_cpu(v) != me) {
        // Name ourselves in the head field, keeping N and the locked byte: the head
        // of a queue we found empty (the head field was cleared by the previous
        // head's acquisition).  Nobody else writes another cpu there while
        // we are head, so this happens once per headship.
        try_cmpxchg(&lock->val, &v, (v & ~kHeadCpuMask) | head_cpu_bits(me), Order::release);
        continue;
      }
      if (!locked(v)) {
        // Take it, clearing N (only here) and naming in the head field our
        // successor if it has linked in: it heads the queue as soon as the
        // slow path passes headship, and naming it now, in the cmpxchg we
        // need anyway, spares the handoff two read-modify-writes of this
        // contended word while we hold the lock (kick_node's, and the new
        // head's own when it finds another cpu there).  Nobody reads the head field
        // of a held lock to steal or reserve, so naming it before pass() is
        // unseen.  (n,*,0) -> (n,s,1), or (n,0,1) with no successor yet.
        // Acquire pairs with the unlock's release; the acquire load of
        // `next` pairs with the successor's link_prev().
        const QNode* const next = q::load_next_acquire(node);
        const u32 successor = next ? head_cpu_bits(q::QNodePool<Env>::cpu_of(next)) : 0;
        const u32 mine = (v & Tail::kMask) | successor | q::kLockedVal;
        if (try_cmpxchg(&lock->val, &v, mine, Order::acquire)) {
          // Rule 5: what this handoff cost the lock steers T_now (up to
          // this iteration's clock read: a release after it reads as none).
          Arrival<Env>::steer_bound(no_steal(v) ? Arrival<Env>::idle_before(me, now) : 0, now);
          // No longer a head: stealers must not reserve for us (we clear the
          // stamp while holding the lock, i.e. before it is free again).
          store_relaxed(&stamp->lock, static_cast<const QSpinWord*>(nullptr));
          // The path: our reservation (N is set only for the current head,
          // by itself or by the owner that made it head) or a free lock won
          // against stealers.
          lockevent_inc<Env>(no_steal(v) ? LockEvent::pv_reserved : LockEvent::lock_queue);
          return mine;
        }
        continue;
      }
      if (!no_steal(v)) {
        if (Arrival<Env>::older_than_bound(node, now) && now - head_since >= tuning(&Tuning::head_ticks)) {
          // (n,b,l) -> (n,N|me,l): sticky until our acquisition.
          u32 w = v;
          while (!no_steal(w) && !try_cmpxchg(&lock->val, &w, (w & ~kHeadFieldMask) | reserve, Order::relaxed)) {
          }
          lockevent_inc<Env>(LockEvent::pv_no_steal);
          spins = 0;
          continue;
        }
      } else if (head_can_halt<Env>() && ++spins >= tuning(&Tuning::head_spins)) {
        spins = 0;
        // Lent to a borrower: never halt behind one (rule 4); our heartbeat
        // stops new borrows, so we get it after this critical section.
        if ((v & q::kLockedMask) == kBorrowedVal) {
          spin_relax<Env>();
          continue;
        }
        // Reserved for us and still held: ask the unlocker to kick us,
        // (n,N|me,1) -> (n,N|me,3), then sleep while locked == 3.
        if ((v & q::kLockedMask) == q::kLockedVal &&
            !try_cmpxchg(&lock->val, &v, (v & ~q::kLockedMask) | q::kSlowVal, Order::seq_cst))
          continue;
        store_relaxed(&node->state, u8{q::kVcpuHalted});  // successors may halt early
        lockevent_inc<Env>(LockEvent::pv_wait_head);
        lockevent_inc<Env>(LockEvent::pv_wait);
        if (head_halt_timed<Env>()) {
          // At most pvb_head_halt_us: an unlock's store may have erased our
          // 3 after its load saw 1, and then nobody kicks us (see "HOW A
          // RESERVED HEAD WAITS").  Count a limit that found the lock free.
          const u64 ns = tuning(&Tuning::head_halt_us) * 1000;
          if (wait_bounded<Env>(lock->locked_byte(), static_cast<u8>(q::kSlowVal), ns) && !locked(q::read(lock)))
            lockevent_inc<Env>(LockEvent::pv_head_expired);
        } else {
          Env::wait(lock->locked_byte(), static_cast<u8>(q::kSlowVal));
        }
        store_relaxed(&node->state, u8{q::kVcpuRunning});
        continue;
      }
      spin_relax<Env>();
    }
  }
};

}  // namespace pvb

template <class Env>
class PvBoundedLock {
 public:
  static constexpr const char* kName = "pvbounded";
  static constexpr const char* kDescription =
      "TAS-speed stealing + MCS queue; a head older than T reserves the lock (sticky no-steal) until handoff";
  // Halts only when pvb::can_halt(); spins otherwise.
  static constexpr bool kNeedsPv = false;
  // Bypassing is bounded in time, not forbidden: not FIFO.
  static constexpr bool kFair = false;
  void lock() {
    u32 v = 0;
    // Fast path 0,0,0 -> 0,0,1.  Acquire pairs with unlock's release.
    if (__builtin_expect(try_cmpxchg(&w_.val, &v, q::kLockedVal, Order::acquire), 1)) return;
    // Held, nobody queued: rule 1's first spin before the slow path.
    if (!(v & (pvb::Tail::kMask | pvb::kNoSteal)) && pvb::first_spin<Env>(&w_, &v)) return;
    q::queued_lock_slowpath<Env, pvb::Hooks<Env>, /*kUsePending=*/false>(&w_, v);
  }

  // (*,b,l) -> (*,b,0).  One RMW so that we see locked == 3 (kick the head)
  // and N (boost a preempted head) atomically with the release.
  void unlock() {
    // Unless a reserved head may halt until kicked, a plain release when
    // the word shows neither 3 nor N (see "WITHOUT HALTING" and "HOW A
    // RESERVED HEAD WAITS").  Release pairs with the acquire of every
    // acquisition's cmpxchg.
    if (pvb::unlock_may_store<Env>() && __builtin_expect(!(q::read(&w_) & kSlowOrReserved), 1)) {
      q::clear_locked_release(&w_);
      return;
    }
    const u32 old = fetch_and(&w_.val, ~q::kLockedMask, Order::release);
    if (__builtin_expect(!(old & kSlowOrReserved), 1)) return;
    unlock_slowpath(old);
  }

  bool try_lock() {
    u32 v = q::read(&w_);
    return pvb::try_steal<Env>(&w_, &v);
  }
  bool is_locked() const { return pvb::locked(q::read(&w_)); }

  u32 value() const { return q::read(&w_); }
  q::QSpinWord* word() { return &w_; }

 private:
  static constexpr u32 kSlowOrReserved = (q::kSlowVal & ~q::kLockedVal) | pvb::kNoSteal;

  [[gnu::noinline]] static void unlock_slowpath(u32 old) {
    const unsigned head = pvb::head_cpu(old);
    // A borrower (running mode) does not boost: see rule 4 above.
    const bool was_borrowed = (old & q::kLockedMask) == pvb::kBorrowedVal;
    if ((old & q::kLockedMask) == q::kSlowVal) {
      lockevent_inc<Env>(LockEvent::pv_kick_unlock);
      lockevent_inc<Env>(LockEvent::pv_kick);
      Env::kick(head);
    }
    // Released while reserved: the lock now sits free for `head` (rule 5).
    if (pvb::no_steal(old)) pvb::Arrival<Env>::mark_freed(head);
    if (pvb::no_steal(old) && !was_borrowed && pvb::tuning(&pvb::Tuning::boost) && vcpu_preempted_hint<Env>(head)) {
      lockevent_inc<Env>(LockEvent::pv_boost);
      yield_to_hint<Env>(head);
    }
  }

  q::QSpinWord w_;
};

static_assert(sizeof(PvBoundedLock<void>) == 4);

}  // namespace lockvisor::locks
