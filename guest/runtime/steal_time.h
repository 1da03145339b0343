// The guest's steal-time record (MSR_KVM_STEAL_TIME) as guest code reads it.
// The CPL0 entry code (arch/x86/entry.S) enables it when the VMM advertises
// KVM_FEATURE_STEAL_TIME; the host then keeps it up to date in guest memory at
// kStealTimeAddr + cpu * kStealTimeStride. Reading it is a plain load: fine at
// CPL3, no exit.
//
// `preempted` is what hardware KVM sets while a vCPU is descheduled (and clears
// when it runs again); PVM never sets it (see the run-state page instead).
// A record the guest did not enable stays zero: "not preempted", never a
// wrong "preempted".
#pragma once
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/kvm_hypercall.h"
#include "runtime/boot.h"

namespace guest {

static_assert(lockvisor::abi::kStealTimeAddr == 0x30000 && lockvisor::abi::kStealTimeStride == 64,
              "arch/x86/entry.S STEAL_TIME_BASE / STEAL_TIME_SHIFT must match guest_layout.h");

inline const lockvisor::abi::KvmStealTime* steal_time_record(unsigned cpu) {
  if (cpu >= nr_cpus() || cpu >= lockvisor::abi::kMaxVcpus) return nullptr;
  return reinterpret_cast<const lockvisor::abi::KvmStealTime*>(lockvisor::abi::kStealTimeAddr +
                                                               cpu * lockvisor::abi::kStealTimeStride);
}

// True only while the host says vCPU `cpu` is preempted (hardware KVM).
inline bool steal_time_preempted(unsigned cpu) {
  const auto* record = steal_time_record(cpu);
  return record != nullptr && (__atomic_load_n(&record->preempted, __ATOMIC_RELAXED) & lockvisor::abi::kStealPreempted) != 0;
}

// The host's running total of this vCPU's steal time, ns (0 if not enabled).
inline u64 steal_time_ns(unsigned cpu) {
  const auto* record = steal_time_record(cpu);
  return record == nullptr ? 0 : __atomic_load_n(&record->steal, __ATOMIC_RELAXED);
}

}  // namespace guest
