// The vCPU run-state page as guest code reads it (docs/runstate.md): the host
// publishes each vCPU's state at BootInfo::runstate_gpa, mapped read-only
// (lockvisor/abi/vcpu_runstate.h). One aligned load per question, no exit.
//
// It is a hint: "unknown" (a page of zeros, no host support, a vCPU beyond the
// page) is never reported as running or preempted, and a record can lag the
// truth by up to one host time slice. Reading memory is all this does, so it
// is fine anywhere in CPL3 code.
#pragma once
#include "lockvisor/abi/vcpu_runstate.h"
#include "runtime/boot.h"

namespace guest {

using lockvisor::abi::RunState;
using lockvisor::abi::VcpuRunState;

// Whether the host publishes the page (BootInfo kBootFlagRunStateLive).
inline bool runstate_live() { return (boot().flags & kBootFlagRunStateLive) != 0; }

// vCPU `cpu`'s record, or nullptr when the page has no record for it.
inline const VcpuRunState* vcpu_runstate(unsigned cpu) {
  if (cpu >= kRunStateMaxVcpus || cpu >= nr_cpus()) return nullptr;
  return reinterpret_cast<const VcpuRunState*>(boot().runstate_gpa) + cpu;
}

// One acquire load of the record's state; kUnknown without a record or for a
// value this guest does not know.
inline RunState vcpu_run_state(unsigned cpu) {
  const VcpuRunState* record = vcpu_runstate(cpu);
  if (record == nullptr) return RunState::kUnknown;
  const u32 state = __atomic_load_n(&record->state, __ATOMIC_ACQUIRE);
  return state <= LOCKVISOR_RUNSTATE_SLEEPING ? static_cast<RunState>(state) : RunState::kUnknown;
}

// True only when the page says "preempted" (not sleeping, not unknown).
inline bool vcpu_is_preempted(unsigned cpu) { return vcpu_run_state(cpu) == RunState::kPreempted; }

// A consistent copy of the record (seqlock read); false without a record.
inline bool read_vcpu_runstate(unsigned cpu, VcpuRunState& out) {
  const VcpuRunState* record = vcpu_runstate(cpu);
  if (record == nullptr) return false;
  for (;;) {
    const u32 before = __atomic_load_n(&record->seq, __ATOMIC_ACQUIRE);
    if (before & 1) continue;
    out.state = __atomic_load_n(&record->state, __ATOMIC_RELAXED);
    out.state_since_ns = __atomic_load_n(&record->state_since_ns, __ATOMIC_RELAXED);
    out.preemptions = __atomic_load_n(&record->preemptions, __ATOMIC_RELAXED);
    out.sleeps = __atomic_load_n(&record->sleeps, __ATOMIC_RELAXED);
    out.runs = __atomic_load_n(&record->runs, __ATOMIC_RELAXED);
    out.preempted_ns = __atomic_load_n(&record->preempted_ns, __ATOMIC_RELAXED);
    out.host_cpu = __atomic_load_n(&record->host_cpu, __ATOMIC_RELAXED);
    out.anomalies = __atomic_load_n(&record->anomalies, __ATOMIC_RELAXED);
    out.reserved = 0;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&record->seq, __ATOMIC_RELAXED) == before) {
      out.seq = before;
      return true;
    }
  }
}

}  // namespace guest
