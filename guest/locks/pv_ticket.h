// pv_ticket.h: paravirtual ticket lock (pvticket), the KVM PV ticketlock
// design of Raghavendra K T, "[PATCH RFC V11 0/18] Paravirtualized ticket
// spinlocks" (with Jeremy Fitzhardinge; LKML, 2013; Linux 3.12-4.1).
//
// ALGORITHM
//   A ticket lock (ticket.h) whose waiters stop spinning after a while:
//
//   Word (32-bit; every access is a 32-bit atomic):
//     bits  0..15  head: ticket being served (always even)
//     bit  16      SLOWPATH flag ("someone may be halted on this lock")
//     bits 17..31  tail: next ticket to hand out (tail field increments by 2,
//                  so tickets step by 2 and the flag bit is never carried into)
//   Free iff head == (tail & ~flag).  All-zero is unlocked.
//
//   lock(): take ticket `want`; spin kSpinThreshold (SPIN_THRESHOLD, 1 << 15)
//   iterations for head == want; if that fails, lock_spinning(want):
//     1. record (lock, want) in this CPU's waiting slot,
//     2. set this CPU's bit in the waiting-CPU mask,
//     3. set SLOWPATH in the lock word with a full-barrier RMW, and use the
//        value it returns to re-check head == want,
//     4. if still not our turn, Env::wait() (halt) until kicked,
//     5. clear the mask bit and the slot, and go back to spinning (a wake-up
//        only means "look again").
//   After acquiring, if SLOWPATH is set but nobody holds a later ticket
//   (tail == want + 2), clear it with a cmpxchg (done in the lock path, not
//   after unlock, so the unlocker never writes a lock it no longer owns:
//   the Linux 4.2 fix "x86/spinlocks/paravirt: Fix memory corruption on
//   unlock").
//
//   unlock(): head += 2 with one RMW that returns the old word; if SLOWPATH
//   was set, unlock_kick(): count pv_kick_unlock, scan the waiting mask for
//   the CPU whose slot says (this lock, new head) and kick it.
//
// WHY NO WAKE-UP IS LOST
//   The waiter's flag RMW (step 3) and the unlocker's head RMW are two RMWs
//   on the same word, so they are totally ordered:
//   * flag RMW first: the unlocker's RMW returns SLOWPATH set, and since the
//     flag RMW is a release (seq_cst) that the unlocker's acquire RMW reads
//     (through the RMW release sequence), the waiter's slot and mask bit are
//     visible: the unlocker finds it and kicks.  If the waiter has not
//     suspended yet, the kick is STICKY (lock_env.h): its Env::wait() returns
//     at once.  That window - after step 3, before the halt - is exactly the
//     one a non-sticky wake-up would lose.
//   * head RMW first: the waiter's flag RMW returns the new head, so step 3
//     sees its turn and never halts.
//   The slot is not re-checked by Env::wait() (it waits on a per-CPU byte
//   that nobody clears): the kick alone ends the halt, as with that series'
//   plain halt().  Stale slots are harmless: they cause at most a spurious
//   kick, which the next Env::wait() absorbs as a spurious wake-up.
//
// UNDER vCPU PREEMPTION
//   Strict FIFO remains: the lock goes to ticket head+2 even if that vCPU is
//   halted or preempted, so lock-waiter preemption still costs a wake-up
//   latency (~1000 cycles for the kick, plus scheduling).  What PV buys is
//   that waiters beyond the spin threshold give their pCPU back, so the
//   preempted holder and the next ticket get scheduled sooner, and a halted
//   next-in-line waiter is kicked exactly when its turn comes.
//
// LIMITATION: one waiting slot per CPU (as in that series).  A nested (interrupt
//   context) slow path on the same CPU overwrites the outer slot; that series
//   relies on the halt being interruptible (safe_halt) to recover.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"

namespace lockvisor::locks {

namespace pvt {

inline constexpr u32 kHeadMask = 0xffffu;
inline constexpr u32 kTailShift = 16;
inline constexpr u32 kInc = 2;                          // ticket step
inline constexpr u32 kSlowFlag = 1u << kTailShift;      // bit 16
inline constexpr u32 kTailInc = kInc << kTailShift;     // +2 in the tail field
inline constexpr u32 kTicketMask = 0xfffeu;

[[gnu::always_inline]] inline constexpr u32 head_of(u32 v) { return v & kHeadMask; }
[[gnu::always_inline]] inline constexpr u32 tail_of(u32 v) { return (v >> kTailShift) & kTicketMask; }

// Per-CPU waiting slots and the waiting-CPU mask (that series: lock_waiting,
// waiting_cpus), one set per Env.
template <class Env>
struct Waiters {
  struct alignas(kCacheLine) Slot {
    const void* lock;  // lock being waited on (compared, never dereferenced)
    u32 want;          // ticket waited for
    u8 waiting;        // 1 while in lock_spinning(); Env::wait() byte
  };
  static constexpr unsigned kMaskWords = (kMaxCpus + 63) / 64;

  static inline Slot slots[kMaxCpus];
  static inline u64 mask[kMaskWords];
};

}  // namespace pvt

template <class Env, u32 kSpinThreshold = (1u << 15)>
class PvTicketLock {
  static_assert(kSpinThreshold >= 1, "spin threshold must be positive");
  using W = pvt::Waiters<Env>;

 public:
  static constexpr const char* kName = "pvticket";
  // Traits for the registry (registry.h): halts with Env::wait unconditionally; FIFO tickets.
  static constexpr bool kNeedsPv = true;
  static constexpr bool kFair = true;
  static constexpr const char* kDescription =
      "paravirt ticket lock: spin, then halt; unlocker kicks the next ticket (Raghavendra K T, LKML 2013)";
  static constexpr u32 kSpin = kSpinThreshold;

  void lock() {
    // Take a ticket.  Acquire: if it is already our turn this is the
    // acquisition (pairs with unlock's release RMW).
    const u32 old = fetch_add(&w_, pvt::kTailInc, Order::acquire);
    const u32 want = pvt::tail_of(old);
    if (pvt::head_of(old) != want) {
      lockevent_inc<Env>(LockEvent::lock_queue);  // not our turn yet: we get it in ticket order below
      for (;;) {
        for (u32 n = kSpinThreshold; n; n--) {
          // Acquire pairs with the release RMW in unlock().
          if (pvt::head_of(load_acquire(&w_)) == want) goto acquired;
          spin_relax<Env>();
        }
        if (lock_spinning(want)) break;
      }
    }
  acquired:
    clear_slowpath_if_alone(want);
  }

  void unlock() {
    // Only the holder writes head, so this read is stable.  When head wraps
    // 0xfffe -> 0 subtract the carry so it does not reach the tail field.
    const u32 head = pvt::head_of(load_relaxed(&w_));
    const u32 delta = head == pvt::kTicketMask ? pvt::kInc - (1u << pvt::kTailShift) : pvt::kInc;
    // acq_rel: release the critical section (pairs with the waiters'
    // acquire loads); acquire so that a SLOWPATH flag we read brings the
    // flag-setter's slot and mask writes with it (pairs with the seq_cst
    // fetch_or in lock_spinning()).
    const u32 old = fetch_add(&w_, delta, Order::acq_rel);
    if (old & pvt::kSlowFlag) unlock_kick((head + pvt::kInc) & pvt::kTicketMask);
  }

  bool try_lock() {
    u32 v = load_relaxed(&w_);
    if (pvt::head_of(v) != pvt::tail_of(v)) return false;
    return try_cmpxchg(&w_, &v, v + pvt::kTailInc, Order::acquire);
  }

  bool is_locked() const {
    const u32 v = load_relaxed(&w_);
    return pvt::head_of(v) != pvt::tail_of(v);
  }

  u32 value() const { return load_relaxed(&w_); }

 private:
  // The slow wait (kvm_lock_spinning).  Returns true if the lock is ours.
  [[gnu::noinline]] bool lock_spinning(u32 want) {
    const unsigned cpu = Env::cpu();
    auto& slot = W::slots[cpu];
    const u64 bit = u64{1} << (cpu % 64);
    bool got = false;

    store_relaxed(&slot.want, want);
    store_relaxed(&slot.lock, static_cast<const void*>(this));
    store_relaxed(&slot.waiting, u8{1});
    fetch_or(&W::mask[cpu / 64], bit, Order::relaxed);

    // Announce a sleeper and re-check in one RMW.  seq_cst (release) makes
    // the slot/mask writes above visible to any unlocker whose RMW comes
    // later in the word's modification order; the value read tells us
    // whether the unlock we wait for already happened.
    const u32 v = fetch_or(&w_, pvt::kSlowFlag, Order::seq_cst);
    if (pvt::head_of(v) == want) {
      got = true;
    } else {
      lockevent_inc<Env>(LockEvent::pv_wait);
      // Halt until kicked (or spuriously).  A kick sent after our fetch_or
      // but before we suspend is not lost: kicks are sticky.
      Env::wait(&slot.waiting, u8{1});
      if (pvt::head_of(load_acquire(&w_)) == want) got = true;
      else lockevent_inc<Env>(LockEvent::pv_spurious_wakeup);
    }

    fetch_and(&W::mask[cpu / 64], ~bit, Order::relaxed);
    store_relaxed(&slot.waiting, u8{0});
    store_relaxed(&slot.lock, static_cast<const void*>(nullptr));
    return got;
  }

  // After acquiring: clear SLOWPATH if no later ticket exists (nobody can be
  // waiting).  A cmpxchg, so a concurrent ticket grab or flag set wins.
  void clear_slowpath_if_alone(u32 want) {
    u32 v = load_relaxed(&w_);
    if (!(v & pvt::kSlowFlag)) return;
    if (pvt::tail_of(v) != ((want + pvt::kInc) & pvt::kTicketMask)) return;
    (void)try_cmpxchg(&w_, &v, v & ~pvt::kSlowFlag, Order::relaxed);
  }

  // kvm_unlock_kick: wake the CPU waiting for ticket `next` on this lock.
  [[gnu::noinline]] void unlock_kick(u32 next) {
    lockevent_inc<Env>(LockEvent::pv_kick_unlock);
    for (unsigned i = 0; i < W::kMaskWords; i++) {
      u64 m = load_relaxed(&W::mask[i]);
      while (m) {
        const unsigned cpu = i * 64 + static_cast<unsigned>(__builtin_ctzll(m));
        m &= m - 1;
        auto& slot = W::slots[cpu];
        if (load_relaxed(&slot.lock) == static_cast<const void*>(this) && load_relaxed(&slot.want) == next) {
          lockevent_inc<Env>(LockEvent::pv_kick);
          Env::kick(cpu);
          return;
        }
      }
    }
  }

  u32 w_;
};

}  // namespace lockvisor::locks
