// pvbounded_tuning.h: the run-time parameters of the registry locks: the
// pvbounded lock's pvb_*, the qspinlock family's options (q_pending,
// pvq_unfair) and the NUMA locks' bypass bounds (cna_*, hq_*), one table for all so that the guest, the native runner and the
// host's check of `--param` before boot share a single definition.
//
// A registry lock is one 32-bit word, so its parameters cannot live in the
// lock: they are one global, set once before any CPU takes a pvbounded lock
// (the guest: guest/runtime/lock_tuning.cpp from the run's `--param
// key=value` arguments; natively: the tests/runner set it directly) and only
// read afterwards.  The keys below are the names a run uses.
//
//   pvb_bound_us     T, the starvation bound: a queue head that has waited
//                    longer than T since it first asked for the lock forbids
//                    stealing until it gets the lock.  Microseconds.
//   pvb_bound_max_us T_max: how far the lock may raise its working bound
//                    T_now above T while locks reserved for their queue
//                    heads sit free waiting for those heads (a convoy: rule
//                    5, "The adaptive bound", in pvbounded.h).  At or below
//                    T the bound stays T.  No
//                    waiter is bypassed once it is older than T_max.
//                    Microseconds.
//   pvb_head_us      T_head: a queue head also competes (lets others steal)
//                    for at least this long after becoming head before it
//                    reserves the lock, so that a long queue does not turn
//                    the lock into a FIFO handoff convoy.  0: reserve as soon
//                    as the arrival age reaches T.  Microseconds.
//   pvb_steal_spins  spin iterations a newcomer spends trying to steal (TAS
//                    style) before it joins the queue.
//   pvb_node_spins   spin iterations of a queued (non-head) waiter before it
//                    halts (PV wait) until it becomes the head.
//   pvb_head_spins   spin iterations of a queue head that has forbidden
//                    stealing before it halts until the lock is released.
//   pvb_head_halt    how a queue head holding the reservation waits once
//                    it has spun pvb_head_spins (pvbounded.h, "HOW A
//                    RESERVED HEAD WAITS"):
//                    timed (2, default): it halts for at most
//                    pvb_head_halt_us at a time, and an unlock that finds
//                    nobody to kick releases with a plain store; a kick
//                    request that store erased costs the head at most
//                    pvb_head_halt_us.  Where this run's halt cannot be
//                    bounded (KVM's own `hlt` with --backend kvm, IPI or
//                    NMI wake-ups, RISC-V) it is `kicked`.
//                    kicked (1): it halts until kicked, and every unlock is
//                    a read-modify-write (it must see that halt atomically).
//                    spin (0): it only spins, and an unlock that finds
//                    nobody to kick releases with a plain store (queued
//                    waiters still halt: their kick is asked for by the owner
//                    itself).
//   pvb_head_halt_us the longest one timed halt of a reserved head lasts
//                    before it looks at the lock again.  Microseconds.
//   pvb_boost        1: when the lock is released to a head whose vCPU the
//                    host reports preempted, ask the host to run it next
//                    (Env::yield_to, lock_env.h).  0: never.
//   pvb_handoff      head (0, default): a lock reserved for the queue head
//                    waits for that head, even while its vCPU is descheduled.
//                    running (1): while the reserved head's vCPU is preempted
//                    (run-state hint AND no sign of life from its head loop
//                    for pvb_stale_us) the lock is lent to running waiters;
//                    the head gets it back as soon as it runs.  A hint only:
//                    see "LENDING" in pvbounded.h.
//   pvb_stale_us     running mode: how long a reserved head's spin loop must
//                    have been silent before it may be lent past.  Covers
//                    a host interrupt or exit of a running head (20-45 us on
//                    PVM).  Microseconds.
//
// The options of Waiman Long, "[PATCH v6 00/11] qspinlock with paravirt
// support", LKML, March 2014, on the locks that share that code:
//   q_pending        qspinlock (and auto when it picks qspinlock): 1
//                    (default) the second contender spins on the pending bit
//                    of the word; 0 it queues like the third, i.e. the queue
//                    lock without the 2-task pending path.  Still FIFO.
//   pvq_unfair       pvqspinlock, pvconfer (and auto when it picks
//                    pvqspinlock): 1 a newcomer whose fast path failed makes
//                    ONE steal attempt that ignores the queue and the head's
//                    pending bit (the unfair lock's steal, unfair_qspinlock.h)
//                    before the PV slow path: the unfair lock combined with
//                    PV.  0 (default): only the PV lock's own hybrid trylock
//                    steals (while the queue head is not spinning).
//
// The NUMA locks' bounds on how long a waiter of another node may be
// bypassed (cna.h, hq.h state what each bound promises; docs/vnuma.md):
//   cna_threshold    cna, pvcna: same-node handoffs, counted from the first
//                    waiter moved to the secondary queue, after which that
//                    queue goes back in front.  Default 2^16, the series'
//                    handoff count before it became a time (v11 and
//                    earlier).
//   cna_threshold_us cna, pvcna: the same bound in time: the secondary queue
//                    goes back in front at the first handoff at least this
//                    long after its first waiter was moved there.  Default
//                    1 ms, v15's numa_spinlock_threshold_ns.  0: off.
//   hq_fairness_threshold
//                    hq, pvhq: consecutive local handoffs before the lock
//                    must leave the node (the RFC's
//                    hqlock_fairness_threshold, 1000).
//   hq_fairness_threshold_us
//                    hq, pvhq: the same bound in time: a local handoff at
//                    least this long after the node's run of local handoffs
//                    began sends the lock to the next node.  0 (default, as
//                    the RFC): off.
//
// Defaults: chosen by measurement on the PVM hosts (docs/pvbounded.md):
// T = 1 ms; T below the typical queueing time (0.5 ms at 8 vCPUs on 2 CPUs
// on a quiet host, several ms at 16 on 2 or with vCPUs descheduled by
// others) makes every head old on arrival and the lock a FIFO handoff
// convoy (25-70x slower), which the adaptive bound climbs out of; T_max =
// 32 ms is the ceiling of that climb: with vCPUs descheduled 60 % of the time
// the lock still reserved ~180 times a second for parked heads at 16 ms and
// ran at 0.88x pvqspinlock, at 32 ms 0.93x with a worst wait still shorter
// than pvqspinlock's (40 against 56 ms), at 64 ms its worst wait reached
// pvqspinlock's; without injected parking T_now stays at 8 ms or below, so
// the ceiling changes nothing there.  T_head > 0 lengthened the worst wait;
// 1024 spins before halting beat 512, 4096 and 8192 on the worst wait at
// equal throughput.
#pragma once

#include "lockvisor/abi/types.h"
#include "locks/atomic.h"

namespace lockvisor::locks::pvb {

using lockvisor::abi::u32;
using lockvisor::abi::u64;

struct Tuning {
  u64 bound_ticks;  // T in lock-clock ticks (us_to_ticks of bound_us)
  u64 bound_us;      // T as set, for reports
  u64 bound_max_ticks;  // T_max in lock-clock ticks
  u64 bound_max_us;      // T_max as set
  u64 head_ticks;   // T_head in lock-clock ticks
  u64 head_us;       // T_head as set
  u64 steal_spins;
  u64 node_spins;
  u64 head_spins;
  u64 head_halt;     // kHeadSpin, kHeadKicked or kHeadTimed
  u64 head_halt_us;  // the longest timed halt of a reserved head
  u64 boost;
  u64 handoff;       // kHandoffHead or kHandoffRunning
  u64 stale_ticks;  // pvb_stale_us in lock-clock ticks
  u64 stale_us;
  u64 q_pending;   // qspinlock: 1 pending-bit path, 0 none
  u64 pvq_unfair;  // pvqspinlock/pvconfer: 1 one unconditional steal before the PV slow path
  u64 cna_threshold;         // cna/pvcna: same-node handoffs while remote waiters wait
  u64 cna_threshold_us;      // cna/pvcna: the same in time, 0: off
  u64 cna_threshold_ticks;  // cna_threshold_us in lock-clock ticks
  u64 hq_fairness;           // hq/pvhq: consecutive local handoffs
  u64 hq_fairness_us;        // hq/pvhq: the same in time, 0: off
  u64 hq_fairness_ticks;    // hq_fairness_us in lock-clock ticks
};

inline constexpr u64 kHeadSpin = 0;
inline constexpr u64 kHeadKicked = 1;
inline constexpr u64 kHeadTimed = 2;

inline constexpr u64 kHandoffHead = 0;
inline constexpr u64 kHandoffRunning = 1;

inline constexpr u64 kDefaultBoundUs = 1000;
inline constexpr u64 kDefaultBoundMaxUs = 32000;
inline constexpr u64 kDefaultHeadUs = 0;
inline constexpr u64 kDefaultStaleUs = 100;
inline constexpr u64 kDefaultHeadHaltUs = 1000;
// The longest timed head halt one may ask for (a platform's bounded wait
// must take it: the guest's HALT_FOR checks so, guest_lock_env.h).
inline constexpr u64 kMaxHeadHaltUs = 1000000;
inline constexpr u64 kDefaultCnaThreshold = u64{1} << 16;
inline constexpr u64 kDefaultCnaThresholdUs = 1000;
inline constexpr u64 kDefaultHqFairness = 1000;
inline constexpr u64 kDefaultHqFairnessUs = 0;
// Time bounds: set in microseconds, compared against the lock clock
// (locks/arch/primitives.h: the TSC on x86-64, the `time` CSR on RISC-V),
// whose rate the run measures (the guest: BootInfo; natively: calibrated).
// The defaults below use the architecture's assumed rate until set_tuning()
// gets the real one.
constexpr u64 us_to_ticks(u64 us, u64 clock_khz) { return us * clock_khz / 1000; }

inline Tuning g_tuning = {
    .bound_ticks = us_to_ticks(kDefaultBoundUs, kAssumedLockClockKhz),
    .bound_us = kDefaultBoundUs,
    .bound_max_ticks = us_to_ticks(kDefaultBoundMaxUs, kAssumedLockClockKhz),
    .bound_max_us = kDefaultBoundMaxUs,
    .head_ticks = us_to_ticks(kDefaultHeadUs, kAssumedLockClockKhz),
    .head_us = kDefaultHeadUs,
    .steal_spins = 256,
    .node_spins = 1024,
    .head_spins = 1024,
    .head_halt = kHeadTimed,
    .head_halt_us = kDefaultHeadHaltUs,
    .boost = 1,
    .handoff = kHandoffHead,
    .stale_ticks = us_to_ticks(kDefaultStaleUs, kAssumedLockClockKhz),
    .stale_us = kDefaultStaleUs,
    .q_pending = 1,
    .pvq_unfair = 0,
    .cna_threshold = kDefaultCnaThreshold,
    .cna_threshold_us = kDefaultCnaThresholdUs,
    .cna_threshold_ticks = us_to_ticks(kDefaultCnaThresholdUs, kAssumedLockClockKhz),
    .hq_fairness = kDefaultHqFairness,
    .hq_fairness_us = kDefaultHqFairnessUs,
    .hq_fairness_ticks = us_to_ticks(kDefaultHqFairnessUs, kAssumedLockClockKhz),
};

// Reads used by the lock (relaxed: set before the CPUs start, read-only after).
[[gnu::always_inline]] inline u64 tuning(const u64 Tuning::*field) { return load_relaxed(&(g_tuning.*field)); }

// The parameters by name, for parsers (guest args, native runs, reports).
// `words`, when set, names the values 0, 1, ... (nullptr-terminated); the
// number itself is accepted too.  `used_by`: the registry locks that read the
// key, space-separated; a run of one of them reports the key's value.
struct TuningKey {
  const char* key;
  u64 Tuning::*field;
  u64 min;
  u64 max;
  const char* const* words;
  const char* used_by;
};
inline constexpr const char* kHandoffWords[] = {"head", "running", nullptr};
inline constexpr const char* kHeadHaltWords[] = {"spin", "kicked", "timed", nullptr};
inline constexpr const char kPvbLocks[] = "pvbounded";
inline constexpr const char kCnaLocks[] = "cna pvcna";
inline constexpr const char kHqLocks[] = "hq pvhq";
inline constexpr TuningKey kTuningKeys[] = {
    {"pvb_bound_us", &Tuning::bound_us, 1, 10000000, nullptr, kPvbLocks},
    {"pvb_bound_max_us", &Tuning::bound_max_us, 1, 10000000, nullptr, kPvbLocks},
    {"pvb_head_us", &Tuning::head_us, 0, 10000000, nullptr, kPvbLocks},
    {"pvb_steal_spins", &Tuning::steal_spins, 0, 1u << 30, nullptr, kPvbLocks},
    {"pvb_node_spins", &Tuning::node_spins, 1, 1u << 30, nullptr, kPvbLocks},
    {"pvb_head_spins", &Tuning::head_spins, 1, 1u << 30, nullptr, kPvbLocks},
    {"pvb_head_halt", &Tuning::head_halt, kHeadSpin, kHeadTimed, kHeadHaltWords, kPvbLocks},
    {"pvb_head_halt_us", &Tuning::head_halt_us, 1, kMaxHeadHaltUs, nullptr, kPvbLocks},
    {"pvb_boost", &Tuning::boost, 0, 1, nullptr, kPvbLocks},
    {"pvb_handoff", &Tuning::handoff, kHandoffHead, kHandoffRunning, kHandoffWords, kPvbLocks},
    {"pvb_stale_us", &Tuning::stale_us, 1, 1000000, nullptr, kPvbLocks},
    {"q_pending", &Tuning::q_pending, 0, 1, nullptr, "qspinlock auto"},
    {"pvq_unfair", &Tuning::pvq_unfair, 0, 1, nullptr, "pvqspinlock pvconfer auto"},
    {"cna_threshold", &Tuning::cna_threshold, 1, 1u << 30, nullptr, kCnaLocks},
    {"cna_threshold_us", &Tuning::cna_threshold_us, 0, 10000000, nullptr, kCnaLocks},
    {"hq_fairness_threshold", &Tuning::hq_fairness, 1, 1u << 30, nullptr, kHqLocks},
    {"hq_fairness_threshold_us", &Tuning::hq_fairness_us, 0, 10000000, nullptr, kHqLocks},
};

// Whether `lock` (a registry name) is one of k.used_by's words.
inline bool tuning_key_used_by(const TuningKey& k, const char* lock) {
  for (const char* w = k.used_by; *w != '\0';) {
    const char* a = w;
    const char* b = lock;
    while (*a != '\0' && *a != ' ' && *a == *b) ++a, ++b;
    if ((*a == '\0' || *a == ' ') && *b == '\0') return true;
    while (*w != '\0' && *w != ' ') ++w;
    while (*w == ' ') ++w;
  }
  return false;
}

// Parses a parameter's text (freestanding: the guest has no libc): a decimal
// number, or one of the key's words.  False for anything else (empty, junk,
// overflow); range is set_tuning()'s business.
inline bool parse_tuning_value(const TuningKey& k, const char* text, u64* out) {
  if (k.words != nullptr)
    for (u64 i = 0; k.words[i] != nullptr; ++i) {
      const char* a = k.words[i];
      const char* b = text;
      while (*a != '\0' && *a == *b) ++a, ++b;
      if (*a == '\0' && *b == '\0') {
        *out = i;
        return true;
      }
    }
  if (*text == '\0') return false;
  u64 value = 0;
  for (; *text != '\0'; ++text) {
    if (*text < '0' || *text > '9') return false;
    const u64 digit = static_cast<u64>(*text - '0');
    if (value > (~u64{0} - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

// The key's row, or nullptr (for the host's check of `--param` before
// anything boots: it takes the ranges from these same rows).
inline const TuningKey* find_tuning_key(const char* key, unsigned long length) {
  for (const TuningKey& k : kTuningKeys) {
    unsigned long i = 0;
    while (i < length && k.key[i] != '\0' && k.key[i] == key[i]) ++i;
    if (i == length && k.key[i] == '\0') return &k;
  }
  return nullptr;
}

// What a key accepts, for the message that refuses a value that is none of
// it (freestanding: the guest writes the same words as the host):
// "spin, kicked, timed, or a number in 0..2", "a number in 1..10000000".
// Writes at most n - 1 characters and a NUL into out (n > 0).
inline void describe_accepted(const TuningKey& k, char* out, unsigned long n) {
  unsigned long at = 0;
  const auto put = [&](const char* s) {
    for (; *s != '\0' && at + 1 < n; ++s) out[at++] = *s;
  };
  const auto put_u64 = [&](u64 v) {
    char digits[24];
    int i = 0;
    do {
      digits[i++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (i > 0 && at + 1 < n) out[at++] = digits[--i];
  };
  if (k.words != nullptr)
    for (u64 i = 0; k.words[i] != nullptr; ++i) {
      put(k.words[i]);
      put(", ");
    }
  put(k.words != nullptr ? "or a number in " : "a number in ");
  put_u64(k.min);
  put("..");
  put_u64(k.max);
  out[at] = '\0';
}

// A parameter's text checked as the guest checks it: kNotAValue ("KEY=TEXT
// is not a valid value (ACCEPTED)", describe_accepted()), kOutOfRange ("KEY=VALUE is out of range MIN..MAX")
// or kValid with the value in *out.
enum class TuningCheck { kValid, kNotAValue, kOutOfRange };
inline TuningCheck check_tuning_value(const TuningKey& k, const char* text, u64* out) {
  if (!parse_tuning_value(k, text, out)) return TuningCheck::kNotAValue;
  return *out < k.min || *out > k.max ? TuningCheck::kOutOfRange : TuningCheck::kValid;
}

// Sets one parameter.  Returns false (and changes nothing) if the value is
// out of range.  The *_us times also set their ticks from the lock clock's rate.
inline bool set_tuning(const TuningKey& k, u64 value, u64 clock_khz) {
  if (value < k.min || value > k.max) return false;
  store_relaxed(&(g_tuning.*k.field), value);
  if (k.field == &Tuning::bound_us) store_relaxed(&g_tuning.bound_ticks, us_to_ticks(value, clock_khz));
  if (k.field == &Tuning::bound_max_us) store_relaxed(&g_tuning.bound_max_ticks, us_to_ticks(value, clock_khz));
  if (k.field == &Tuning::head_us) store_relaxed(&g_tuning.head_ticks, us_to_ticks(value, clock_khz));
  if (k.field == &Tuning::stale_us) store_relaxed(&g_tuning.stale_ticks, us_to_ticks(value, clock_khz));
  if (k.field == &Tuning::cna_threshold_us) store_relaxed(&g_tuning.cna_threshold_ticks, us_to_ticks(value, clock_khz));
  if (k.field == &Tuning::hq_fairness_us) store_relaxed(&g_tuning.hq_fairness_ticks, us_to_ticks(value, clock_khz));
  return true;
}

}  // namespace lockvisor::locks::pvb
