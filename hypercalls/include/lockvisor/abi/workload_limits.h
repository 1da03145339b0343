// The range and the default of every lock-workload parameter the host sets
// from an option, in one place that both sides include: the VMM's options
// (vmm/experiment/run_settings.cpp) take their ranges and defaults from
// here, and the guest (and the native runner) check the record they receive
// against the same rows, so a value the host accepts is never one the
// guest refuses, and the other way round. Freestanding: no libc.
#pragma once
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/types.h"
#include "lockvisor/abi/workload.h"

namespace lockvisor::abi {

// One u64 field of WorkloadParams: its record name (as reports and guest
// messages spell it), its accepted range and the production default.
struct WorkloadLimit {
  const char* name;
  u64 WorkloadParams::*field;
  u64 min;
  u64 max;
  u64 def;
};

inline constexpr u64 kMaxBusyNs = 1'000'000'000;  // cs, delay, long holds: at most 1 s of work each
inline constexpr u64 kMaxCount = 1'000'000'000'000;  // iterations: 10^12

// clang-format off
inline constexpr WorkloadLimit kCsNs            {"cs_ns",              &WorkloadParams::cs_ns,              0, kMaxBusyNs,          100};
inline constexpr WorkloadLimit kCsLines         {"cs_lines",           &WorkloadParams::cs_lines,           1, 16,                  1};
inline constexpr WorkloadLimit kDelayNs         {"delay_ns",           &WorkloadParams::delay_ns,           0, kMaxBusyNs,          170};
// Only while iterations == 0 (a fixed-work run ignores it).
inline constexpr WorkloadLimit kDurationNs      {"duration_ns",        &WorkloadParams::duration_ns,        1'000'000, 3'600'000'000'000, 1'000'000'000};
inline constexpr WorkloadLimit kIterations      {"iterations",         &WorkloadParams::iterations,         0, kMaxCount,           0};
// torture's lock count (the host writes 0 as the default, kTortureLocks).
inline constexpr WorkloadLimit kLocks           {"nlocks",             &WorkloadParams::nlocks,             0, 16,                  1};
inline constexpr WorkloadLimit kLongHoldNs      {"long_hold_ns",       &WorkloadParams::long_hold_ns,       0, kMaxBusyNs,          100'000};
inline constexpr WorkloadLimit kLongHoldEvery   {"long_hold_every",    &WorkloadParams::long_hold_every,    0, 1'000'000'000,       0};
inline constexpr WorkloadLimit kWaitHaltDelayNs {"wait_halt_delay_ns", &WorkloadParams::wait_halt_delay_ns, 0, 10'000'000,          0};
inline constexpr WorkloadLimit kCpus            {"cpus",               &WorkloadParams::cpus,               1, kMaxVcpus,           1};
// clang-format on

// The defaults that depend on the workload kind.
inline constexpr u64 kUncontendedIterations = 256 * 1024;  // iterations == 0 for uncontended means this
inline constexpr u64 kTortureLocks = 4;
inline constexpr u64 kTortureLongHoldEvery = 2000;

inline constexpr const WorkloadLimit* kWorkloadLimits[] = {&kCsNs,       &kCsLines,       &kDelayNs,
                                                           &kDurationNs, &kIterations,    &kLocks,
                                                           &kLongHoldNs, &kLongHoldEvery, &kWaitHaltDelayNs,
                                                           &kCpus};

// The production defaults of `kind` on one CPU (seed 1, no fairness
// windows, no lock name): what `lockvisor run` gives a workload when no
// option says otherwise. The native tests start from it too.
constexpr WorkloadParams default_workload_params(WorkloadKind kind) {
  WorkloadParams p{};
  for (const WorkloadLimit* l : kWorkloadLimits) p.*(l->field) = l->def;
  p.kind = kind;
  p.layout = LockLayout::kStandalone;
  p.seed = 1;
  if (kind == WorkloadKind::kUncontended) p.iterations = kUncontendedIterations;
  if (kind == WorkloadKind::kTorture) {
    p.nlocks = kTortureLocks;
    p.long_hold_every = kTortureLongHoldEvery;
  }
  return p;
}

// The first field of p outside its range, or nullptr. The duration counts
// only for a timed run (iterations == 0), the lock count only for torture.
// (Fields are compared, not rows' addresses: GCC does not treat an address
// comparison as a constant expression under -fsanitize=undefined.)
constexpr const WorkloadLimit* out_of_range(const WorkloadParams& p) {
  for (const WorkloadLimit* l : kWorkloadLimits) {
    if (l->field == kDurationNs.field && p.iterations != 0) continue;
    if (l->field == kLocks.field && p.kind != WorkloadKind::kTorture) continue;
    const u64 v = p.*(l->field);
    if (v < l->min || v > l->max) return l;
  }
  return nullptr;
}

static_assert(out_of_range(default_workload_params(WorkloadKind::kLockbench)) == nullptr);
static_assert(out_of_range(default_workload_params(WorkloadKind::kUncontended)) == nullptr);
static_assert(out_of_range(default_workload_params(WorkloadKind::kTorture)) == nullptr);

}  // namespace lockvisor::abi
