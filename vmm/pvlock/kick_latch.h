// The per-vCPU kick latch: the host half of pv_wait/pv_kick.
//
// One 32-bit word, so that a futex can sleep on it:
//   kPending  a kick arrived and has not been consumed by a halt
//   kHalted   the vCPU is blocked (or polling) in halt()
//   kStop     the VMM is shutting down: halt() returns at once, for good
//   kTimed    with kHalted: this halt ends by itself at its time limit
//             (HALT_FOR), so the deadlock detector must not count on it
//
// Sticky semantics (KVM's pv_unhalted, and what pv_wait's callers rely on):
//   - kick() sets kPending; if kHalted was set it also wakes the sleeper;
//   - halt() first consumes kPending: a kick that came before the halt makes
//     it return at once ("immediate"), and only once: several kicks before
//     one halt are coalesced into one kPending bit;
//   - a vCPU never sleeps while kPending is set: it sets kHalted with a CAS
//     that fails if kPending appeared meanwhile, and FUTEX_WAIT re-checks the
//     whole word in the kernel before sleeping, so a kick between the CAS and
//     the sleep changes the word and the wait returns at once.
// Lossy semantics (--kick=lossy) drop a kick unless kHalted is set: the
// missed-wakeup race that sticky kicks exist to close (patch 09 of Waiman
// Long's "[PATCH v6 00/11] qspinlock with paravirt support", LKML, March 2014).
//
// Every transition first bumps a shared epoch (seq_cst) so that the deadlock
// detector can tell a stable "everyone halted" picture from a torn one.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

#include "vmm/pvlock/pv_types.h"

namespace lockvisor::pvlock {

enum class KickDelivery {
  kDelivered,  // kPending set (the target may already have had it: coalesced)
  kCoalesced,  // kPending was already set
  kDropped,    // lossy mode and the target was not halted
};

class KickLatch {
 public:
  static constexpr std::uint32_t kPending = 1;
  static constexpr std::uint32_t kHalted = 2;
  static constexpr std::uint32_t kStop = 4;
  static constexpr std::uint32_t kTimed = 8;

  explicit KickLatch(std::atomic<std::uint64_t>& epoch) : epoch_(&epoch) {}

  KickDelivery kick(KickMode mode);
  // Blocks until a kick (or stop). poll_ns > 0 spins on the word that long
  // before sleeping (userspace halt polling); `polled_ns`, when given, gets
  // how long this halt actually spent polling (0 when it did not poll).
  // limit_ns > 0 also ends the halt that long after it began (kExpired),
  // unless a kick is pending by then: a kick and the limit never both end
  // one halt, so a kick is consumed exactly when kImmediate, kPolled or
  // kWoken says so.
  HaltOutcome halt(std::uint64_t poll_ns, std::uint64_t* polled_ns = nullptr, std::uint64_t limit_ns = 0);
  void stop();

  std::uint32_t state() const { return word_.load(std::memory_order_seq_cst); }

 private:
  // Returns with kPending cleared and kHalted clear if a kick was consumed.
  bool try_consume(std::uint32_t& seen);
  // At the limit: clears kHalted unless a kick is pending (then consumes it).
  // True when the halt expired.
  bool try_expire(std::uint32_t& seen);
  std::atomic<std::uint32_t> word_{0};
  std::atomic<std::uint64_t>* epoch_;
};

// When the kick that a halt consumes was sent, for the VMM's kick-to-wake
// latency. Several kicks can target one halt: the first sets the latch, later
// ones coalesce (or, lossy, are dropped). The latency belongs to the kick that
// made the latch pending, so the stamp is "first kick since the halter last
// consumed one": a kicker stamps only an empty stamp (and takes a dropped
// kick's stamp back), the halter empties it when it consumes the kick. A later
// coalesced or dropped kick can therefore never overwrite the time of the one
// that woke the halt (a single last-kick time did, and so misreported the
// wake latency).
//
// The stamp is taken just before the kick is delivered, so two kicks racing
// for one empty latch may leave the earlier sender's time on the later
// sender's delivery: the error is the gap between the two kicks.
class KickStamp {
 public:
  // Before delivering a kick sent at `now_ns` (> 0): true if this kick owns the stamp.
  bool on_send(std::uint64_t now_ns) {
    std::uint64_t empty = 0;
    return stamp_.compare_exchange_strong(empty, now_ns);
  }
  // The kick was dropped: the stamp it set (if it set one) is taken back.
  void on_drop(std::uint64_t now_ns, bool owned) {
    if (owned) stamp_.compare_exchange_strong(now_ns, 0);
  }
  // The halter consumed a kick: when it was sent (0: unknown).
  std::uint64_t take() { return stamp_.exchange(0); }

 private:
  std::atomic<std::uint64_t> stamp_{0};
};

// A one-way "the run is stopping" flag that a thread can sleep on with a
// deadline: the userspace backend's --kick-delay-us waits on it, so that a
// delayed kick never outlives the run (watchdog, deadlock, signal, fault).
// set() wakes every sleeper at once and for good.
class StopFlag {
 public:
  void set();
  bool is_set() const { return word_.load() != 0; }
  // Sleeps for `duration`, or less: returns true as soon as the flag is set
  // (at once if it already is), false when the duration has passed.
  bool sleep_for(std::chrono::nanoseconds duration) const;

 private:
  mutable std::atomic<std::uint32_t> word_{0};
};

}  // namespace lockvisor::pvlock
