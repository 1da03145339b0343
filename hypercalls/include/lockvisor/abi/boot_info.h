// The versioned block the VMM writes at kBootInfoAddr before any vCPU runs.
// A guest checks magic and version before trusting anything else in it.
#pragma once
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/lock_probe.h"
#include "lockvisor/abi/types.h"
#include "lockvisor/abi/workload.h"

namespace lockvisor::abi {

inline constexpr u64 kBootInfoMagic = 0x31304f4f42564c;  // "LVBOO01"
// 2: adds runstate_gpa and kBootFlagRunStateLive (the vCPU run-state page).
// 3: adds workload and kBootFlagWorkload (lock-workload parameters in binary).
// 4: adds lock_probe_gpa, lock_probe and kBootFlagLockProbe (targeted preemption),
//    lock_trace_* and kBootFlagLockTrace (the lock-trace log, lock_trace.h).
// 5: adds numa_nodes, numa_remote_ns and vcpu_node[] (the virtual NUMA
//    topology, --vnuma; one node holding every vCPU without it).
// 6: vcpus[] and vcpu_node[] hold kMaxVcpus = 1024 entries (every field after
//    vcpus[] moved), and kBootFlagX2apic.
inline constexpr u32 kBootInfoVersion = 6;

// The most virtual NUMA nodes a VM may have (--vnuma).
inline constexpr u32 kMaxVnumaNodes = 16;

inline constexpr u32 kBootFlagPvUnhalt = 1u << 0;   // KICK_CPU works (CPUID says the same)
inline constexpr u32 kBootFlagSbiPvlock = 1u << 1;  // SBI PVLOCK is on
inline constexpr u32 kBootFlagDedicated = 1u << 2;  // vCPUs are not overcommitted (REALTIME hint)
// The run-state page at runstate_gpa is published by the host (sched_switch
// BPF). Clear: it is a page of zeros, every vCPU reads "unknown".
inline constexpr u32 kBootFlagRunStateLive = 1u << 3;
// BootInfo::workload holds the lock workload's parameters (clear: not a
// lock-workload run; the lock programs then refuse to start).
inline constexpr u32 kBootFlagWorkload = 1u << 4;
// --backend kvm: KICK_CPU is KVM's own (vmcall on Intel, vmmcall on AMD,
// executed at CPL0) and a halt is `hlt` at CPL0 with IF=0, blocked in KVM's
// in-kernel irqchip. Clear: both are doorbells (port 0xE4) to the VMM.
inline constexpr u32 kBootFlagKvmHypercalls = 1u << 5;
// --guest-ring 0: the program (guest_main and everything after it) runs at
// CPL0; the entry code does not drop to CPL3.
inline constexpr u32 kBootFlagGuestRing0 = 1u << 6;
// BootInfo::lock_probe arms targeted preemption points (lock_probe.h): the
// lock workloads publish their lock operations at lock_probe_gpa. Clear: the
// probe is off and costs one predictable branch per hook.
inline constexpr u32 kBootFlagLockProbe = 1u << 7;
// --trace: the lock workloads record each acquisition in the lock-trace log
// at lock_trace_gpa (lock_trace.h). Clear: they record nothing.
inline constexpr u32 kBootFlagLockTrace = 1u << 8;
// --pv-wake (pv_wake.h): how a PV lock wakes a halted waiter. Neither bit:
// the KICK_CPU hypercall; kBootFlagWakeIpi: a fixed-vector IPI through the
// x2APIC ICR; kBootFlagWakeNmi: an NMI. Either bit needs the kvm backend and
// --guest-ring 0 (the in-kernel LAPIC, and CPL0 to send and take them).
inline constexpr u32 kBootFlagWakeIpi = 1u << 9;
inline constexpr u32 kBootFlagWakeNmi = 1u << 10;
// More vCPUs than kMaxXapicVcpus (guest_layout.h) with KVM's in-kernel LAPIC:
// every vCPU's entry code switches its LAPIC to x2APIC mode (CPUID offers it:
// the VMM checked), and the guest checks its APIC id against CPUID leaf 0xB
// (32 bits) as well as CPUID.1 EBX[31:24] (its low byte).
inline constexpr u32 kBootFlagX2apic = 1u << 11;

inline constexpr u32 kProgramNameBytes = 32;
inline constexpr u32 kProgramArgsBytes = 768;

struct VcpuBoot {
  u32 apic_id;
  u32 reserved;
  u64 kernel_stack_top;
  u64 user_stack_top;
};

struct BootInfo {
  u64 magic;
  u32 version;
  u32 size;  // sizeof(BootInfo) as the VMM built it
  u32 vcpu_count;
  u32 flags;
  u64 tsc_khz;
  u64 memory_bytes;
  u64 free_start;  // guest-owned memory the VMM does not use (2 MiB aligned)
  u64 free_end;
  u64 seed;        // for the guest's reproducible pseudo-random choices
  u32 sbi_experimental_eid;
  u32 reserved;
  char program[kProgramNameBytes];  // NUL-terminated name of what to run
  char args[kProgramArgsBytes];     // NUL-terminated "key=value key=value ..."
  VcpuBoot vcpus[kMaxVcpus];
  // Version 2. The vCPU run-state page (vcpu_runstate.h): always mapped
  // read-only at this guest-physical address (kRunStateGpa); records for
  // vCPUs 0..runstate_vcpus-1 (at most kRunStateMaxVcpus); read as "unknown" when
  // kBootFlagRunStateLive is clear, and until the host has published the
  // page (it may come after the first guest instruction).
  u64 runstate_gpa;
  u32 runstate_vcpus;
  u32 reserved2;
  // Version 3. Valid when kBootFlagWorkload is set; the guest still checks
  // its own header (abi::check_header).
  WorkloadParams workload;
  // Version 4. The lock probe (lock_probe.h): its area's address (always
  // kLockProbeAddr) and, with kBootFlagLockProbe, the targeted schedules.
  u64 lock_probe_gpa;
  LockProbeConfig lock_probe;
  // Version 4. Valid when kBootFlagLockTrace is set: vCPU i's log block
  // (lock_trace.h) at lock_trace_gpa + i * lock_trace_stride, inside RAM,
  // outside free_start..free_end.
  u64 lock_trace_gpa;
  u64 lock_trace_stride;
  // Version 5. The virtual NUMA topology: numa_nodes in 1..kMaxVnumaNodes
  // (1 without --vnuma), vcpu_node[i] < numa_nodes the node of vCPU i for
  // i < vcpu_count (0 beyond). numa_remote_ns (0: off) is the modelled cost
  // of a remote handoff: a lock workload that acquires a lock last released
  // by a vCPU of another node busy-waits that long first (--vnuma-remote-ns;
  // a model, not a measurement of remote memory).
  u32 numa_nodes;
  u32 numa_remote_ns;
  u8 vcpu_node[kMaxVcpus];
};
static_assert(sizeof(BootInfo) <= kBootInfoBytes, "BootInfo outgrew its pages");

}  // namespace lockvisor::abi
