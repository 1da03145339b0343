// KVM's x86 paravirtual hypercall numbering and CPUID leaves, as the guest
// sees them. lockvisor keeps KVM's numbers and return values so that guest
// code written for KVM (kvm_kick_cpu/kvm_wait) maps one to one.
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// Hypercall numbers (include/uapi/linux/kvm_para.h).
inline constexpr u64 kHcKickCpu = 5;  // a0 = flags (ignored, as KVM does), a1 = APIC ID to wake

// lockvisor extensions in the same numbering space ("LV" << 16 | n).
// HALT: what `hlt` does at CPL0, for CPL3 code that cannot execute `hlt`.
inline constexpr u64 kHcHalt = 0x4c560001;
// QUERY_HALTED: a0 = APIC ID; 1 if that vCPU is blocked in a halt right now,
// 0 if not, kKvmEinval if no vCPU has that APIC ID. For conformance tests:
// it lets a guest wait until a peer is really asleep before kicking it.
inline constexpr u64 kHcQueryHalted = 0x4c560002;

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
inline constexpr u32 kFeaturePvUnhalt = 1u << 7;        // KVM_FEATURE_PV_UNHALT
inline constexpr u32 kHintsRealtime = 1u << 0;          // EDX: vCPUs are dedicated

}  // namespace lockvisor::abi
