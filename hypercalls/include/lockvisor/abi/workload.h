// Lock workloads: their parameters and the per-CPU statistics they produce.
// The VMM writes the parameters into BootInfo::workload (binary, versioned:
// the guest applies no defaults of its own and refuses a record whose magic,
// version or size differ). The per-CPU statistics are filled by the guest
// (reported through the ucall channel as one RESULT_ARRAY of u64 words, key
// kWorkloadStatsKey) and by the native runner on host threads, so one
// aggregator serves both.
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// ---- acquisition-latency histogram layout (log-linear, 16 steps per power of 2)
// Values 0..15 have a bucket each; above that, bucket = 16 + 16*(e-4) + the
// next 4 bits after the leading one, where e = floor(log2 v). 976 buckets
// cover the whole u64 range with a relative bucket width of at most 1/16.
inline constexpr u32 kLatencySubBucketBits = 4;
inline constexpr u32 kLatencySubBuckets = 1u << kLatencySubBucketBits;
inline constexpr u32 kLatencyBuckets = kLatencySubBuckets + (64 - kLatencySubBucketBits) * kLatencySubBuckets;

constexpr u32 latency_bucket(u64 value) {
  if (value < kLatencySubBuckets) return static_cast<u32>(value);
  const u32 e = 63u - static_cast<u32>(__builtin_clzll(value));
  const u32 sub = static_cast<u32>(value >> (e - kLatencySubBucketBits)) & (kLatencySubBuckets - 1);
  return kLatencySubBuckets + (e - kLatencySubBucketBits) * kLatencySubBuckets + sub;
}

constexpr u64 latency_bucket_lowest(u32 bucket) {
  if (bucket < kLatencySubBuckets) return bucket;
  const u32 e = (bucket - kLatencySubBuckets) / kLatencySubBuckets + kLatencySubBucketBits;
  const u64 sub = (bucket - kLatencySubBuckets) % kLatencySubBuckets;
  return (u64{1} << e) | (sub << (e - kLatencySubBucketBits));
}
static_assert(latency_bucket(15) == 15 && latency_bucket(16) == 16 && latency_bucket(17) == 17);
static_assert(latency_bucket(32) == 32 && latency_bucket(~u64{0}) == kLatencyBuckets - 1);
static_assert(latency_bucket_lowest(latency_bucket(1000)) <= 1000);

// ---- parameters
enum class LockLayout : u64 {
  kStandalone = 0,  // the lock and the data it protects sit in different cache lines
  kEmbedded = 1,    // the lock shares the first protected cache line
};

enum class WorkloadKind : u64 {
  kLockbench = 0,    // lock; critical section; unlock; delay — all CPUs, one lock
  kUncontended = 1,  // CPU 0 alone: lock/unlock pairs back to back
  kTorture = 2,      // locktorture-style: several locks, random holds, occasional long hold
};

inline constexpr u64 kWorkloadParamsMagic = 0x31304b4c5756ull;  // "VWLK01"
// 1: header (magic, version, size), lock name, fairness_window_ns,
//    wait_halt_delay_ns.
inline constexpr u32 kWorkloadParamsVersion = 1;
inline constexpr u32 kLockNameBytes = 32;

// Every field is set by the host (the experiment description); a zero means
// exactly what the field's comment says, never "use a default".
struct WorkloadParams {
  u64 magic;           // kWorkloadParamsMagic
  u32 version;         // kWorkloadParamsVersion
  u32 size;            // sizeof(WorkloadParams) as the writer built it
  char lock[kLockNameBytes];  // NUL-terminated lock registry name ("auto", "ticket", ...)
  WorkloadKind kind;
  u64 cs_ns;           // work inside the critical section
  u64 cs_lines;        // shared cache lines written inside it (at least 1: the checked counter)
  u64 delay_ns;        // work outside it
  u64 duration_ns;     // run length (when iterations == 0)
  u64 iterations;      // acquisitions per CPU (0: run for duration_ns)
  LockLayout layout;
  u64 seed;
  u64 nlocks;          // torture: number of locks
  u64 long_hold_ns;    // torture: length of the occasional long hold
  u64 long_hold_every; // torture: on average one long hold per this many acquisitions (0: never)
  u64 cpus;            // CPUs taking part (vCPUs or host threads)
  // Short-window fairness: each CPU counts its acquisitions per window of
  // this length from the common start (kFairnessWindows of them at most;
  // later acquisitions are not windowed). 0: no windows.
  u64 fairness_window_ns;
  // Test knob (guest only): busy-wait this long between the lock Env's
  // pv_wait re-check and its halt. It widens the lost-wake-up window that
  // sticky kicks close, deterministically, so that `--kick lossy` loses a
  // wake-up within seconds; 0 in every measurement.
  u64 wait_halt_delay_ns;
};

// Copies a lock name into p.lock; false (p unchanged) if it does not fit.
constexpr bool set_lock_name(WorkloadParams& p, const char* name) {
  u32 n = 0;
  while (name[n] != 0)
    if (++n >= kLockNameBytes) return false;
  for (u32 i = 0; i < kLockNameBytes; i++) p.lock[i] = i < n ? name[i] : 0;
  return true;
}

// Fills the header fields; the writer calls it once the rest is set.
constexpr void stamp_header(WorkloadParams& p) {
  p.magic = kWorkloadParamsMagic;
  p.version = kWorkloadParamsVersion;
  p.size = sizeof(WorkloadParams);
}
// nullptr when the header matches this build, else a one-line reason.
constexpr const char* check_header(const WorkloadParams& p) {
  if (p.magic != kWorkloadParamsMagic) return "workload parameters: bad magic (none written, or a foreign record)";
  if (p.version != kWorkloadParamsVersion) return "workload parameters: version mismatch between VMM and guest";
  if (p.size != sizeof(WorkloadParams)) return "workload parameters: size mismatch between VMM and guest";
  bool terminated = false;
  for (char c : p.lock) terminated = terminated || c == 0;
  if (!terminated) return "workload parameters: lock name not NUL-terminated";
  return nullptr;
}

// ---- per-CPU results
inline constexpr const char* kWorkloadStatsKey = "workload_stats";
// 2: pv_halts, window_cycles, window_ops (short-window fairness); elapsed_cycles is
// this CPU's finish time from the common start for every contended kind.
// 3: handoffs_local, handoffs_remote, handoffs_self (lock handoffs by the
// virtual NUMA nodes of the releasing and the acquiring CPU).
// 4: the wake_* counters (--pv-wake: the IPI and NMI handlers of this CPU).
inline constexpr u64 kWorkloadStatsVersion = 4;
inline constexpr u32 kLockEventSlots = 32;  // >= locks::kLockEventCount, in its order
inline constexpr u32 kFairnessWindows = 128;

struct WorkloadStats {
  u64 version;
  u64 cpu;
  u64 ops;               // acquisitions completed by this CPU
  u64 violations;        // mutual-exclusion violations this CPU detected
  u64 elapsed_cycles;    // common start -> this CPU's end of loop (its finish time), TSC cycles
  u64 tsc_khz;
  u64 latency_count;     // acquisitions timed (== ops)
  u64 latency_max;       // cycles
  u64 latency_sum;       // cycles (for the mean)
  u64 lock_events[kLockEventSlots];
  u64 latency_buckets[kLatencyBuckets];  // acquisition latency in cycles
  u64 pv_halts;          // halts this CPU's lock Env executed (guest: HALT hypercalls; native: 0)
  u64 window_cycles;     // fairness window length in TSC cycles (0: no windows)
  u64 window_ops[kFairnessWindows];  // acquisitions whose lock() returned in window i
  // Version 3. This CPU's acquisitions by who released the lock last
  // (lockbench, torture): another CPU of its node, a CPU of another node, or
  // itself. The first acquisition of a lock counts in none.
  u64 handoffs_local;
  u64 handoffs_remote;
  u64 handoffs_self;
  // Version 4. This CPU's wake-up interrupts over the whole run (not only the
  // window: KVM's counters they are checked against cover the whole run),
  // from the handler of the --pv-wake mechanism (0 with the hypercall):
  // interrupts taken, those that found the CPU waiting in a PV halt (woken)
  // and those that did not (spurious), halts an NMI made the waiter skip
  // (taken between its re-check and its `hlt`), and the handler's time in TSC
  // cycles (sum and longest).
  u64 wake_interrupts;
  u64 wake_woken;
  u64 wake_spurious;
  u64 wake_halts_skipped;
  u64 wake_handler_cycles;
  u64 wake_handler_max_cycles;
};
static_assert(sizeof(WorkloadStats) % sizeof(u64) == 0, "travels as an array of u64");
inline constexpr u64 kWorkloadStatsWords = sizeof(WorkloadStats) / sizeof(u64);

}  // namespace lockvisor::abi
