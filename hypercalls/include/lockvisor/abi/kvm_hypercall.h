// KVM's x86 paravirtual hypercall numbering and CPUID leaves, as the guest
// sees them. lockvisor keeps KVM's numbers and return values so that guest
// code written for KVM (kvm_kick_cpu/kvm_wait) maps one to one.
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// Hypercall numbers (include/uapi/linux/kvm_para.h).
inline constexpr u64 kHcKickCpu = 5;  // a0 = flags (ignored, as KVM does), a1 = APIC ID to wake
// YIELD_TO: KVM's KVM_HC_SCHED_YIELD number, a0 = APIC ID of the vCPU that
// should run next (a lock holder or waiter to hand the CPU to). Returns 0,
// also when no vCPU has that APIC ID (as KVM does). lockvisor's userspace
// backend boosts the target on its host CPU until it next halts, kicks or
// calls YIELD_TO, or for one host slice at most (docs/boost.md); in KVM the
// call is a one-off kvm_vcpu_yield_to().
inline constexpr u64 kHcSchedYield = 11;

// lockvisor extensions in the same numbering space ("LV" << 16 | n).
// HALT: what `hlt` does at CPL0, for CPL3 code that cannot execute `hlt`.
inline constexpr u64 kHcHalt = 0x4c560001;
// QUERY_HALTED: a0 = APIC ID; 1 if that vCPU is blocked in a halt right now,
// 0 if not, kKvmEinval if no vCPU has that APIC ID. For conformance tests:
// it lets a guest wait until a peer is really asleep before kicking it.
inline constexpr u64 kHcQueryHalted = 0x4c560002;
// HALT_FOR: HALT that also ends once a0 nanoseconds (1 .. kHaltForMaxNs)
// have passed with no kick. Returns 0 when a kick ended it (one already
// pending, or one that arrived), kHaltForExpired when the time ran out,
// kKvmEinval (and no halt) for a0 out of range. The sticky kick is the same
// as HALT's: a kick that ends the halt is consumed, one that arrives after
// it expired waits for the next halt. For a wait that must end even when no
// kick was asked for reliably (pvbounded's reserved head, guest/locks/
// pvbounded.h); KVM's own `hlt` has no such limit.
inline constexpr u64 kHcHaltFor = 0x4c560003;
inline constexpr u64 kHaltForMaxNs = 1'000'000'000;
inline constexpr i64 kHaltForExpired = 1;

// Return values. KVM returns the negated constant in RAX.
inline constexpr i64 kKvmSuccess = 0;
inline constexpr i64 kKvmEinval = -22;
inline constexpr i64 kKvmEnosys = -1000;  // unknown number, or the PV feature is off
// QUERY_HALTED when the backend cannot see whether the vCPU is halted
// (--backend kvm on a kernel without KVM's `blocking` statistic).
inline constexpr i64 kKvmEopnotsupp = -95;

// CPUID leaves the VMM installs with KVM_SET_CPUID2.
inline constexpr u32 kCpuidSignatureLeaf = 0x40000000;  // EBX,ECX,EDX = "KVMKVMKVM\0\0\0"
inline constexpr u32 kCpuidSignatureEbx = 0x4b4d564b;
inline constexpr u32 kCpuidSignatureEcx = 0x564b4d56;
inline constexpr u32 kCpuidSignatureEdx = 0x0000004d;
inline constexpr u32 kCpuidFeaturesLeaf = 0x40000001;   // EAX = feature bits, EDX = hints
inline constexpr u32 kFeatureStealTime = 1u << 5;       // KVM_FEATURE_STEAL_TIME
inline constexpr u32 kFeaturePvUnhalt = 1u << 7;        // KVM_FEATURE_PV_UNHALT
inline constexpr u32 kHintsRealtime = 1u << 0;          // EDX: vCPUs are dedicated

// Steal time (KVM_FEATURE_STEAL_TIME): the guest writes the guest-physical
// address of its 64-byte-aligned record | kStealTimeEnable to this MSR, at
// CPL0; the host then keeps `steal` (ns this vCPU was runnable but not
// running) up to date and sets `preempted` while the vCPU is descheduled
// (never on PVM). Layout: KVM's struct kvm_steal_time.
inline constexpr u32 kMsrKvmStealTime = 0x4b564d03;
inline constexpr u64 kStealTimeEnable = 1;
struct KvmStealTime {
  u64 steal;
  u32 version;  // odd while the host updates the record
  u32 flags;
  u8 preempted;  // bit 0: KVM_VCPU_PREEMPTED
  u8 pad8[3];
  u32 pad32[11];
};
static_assert(sizeof(KvmStealTime) == 64, "KVM's steal-time record is 64 bytes");
inline constexpr u8 kStealPreempted = 1;

}  // namespace lockvisor::abi
