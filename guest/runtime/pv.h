// PV-lock primitives as guest code calls them: KICK_CPU, the two halts, the
// SBI PVLOCK calls and feature detection (CPUID, as a KVM guest does it, but
// read at CPL0: runtime/cpuid_snapshot.h).
#pragma once
#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "runtime/doorbell.h"

namespace guest {

inline i64 kick_cpu(u32 apic_id, u64 flags = 0) { return kvm_hypercall(kHcKickCpu, flags, apic_id); }
// HALT hypercall: the CPL3 equivalent of `hlt`.
inline i64 halt() { return kvm_hypercall(kHcHalt); }
// A real `hlt` at CPL0: `int3` at the one site the vector-3 gate accepts
// (arch/x86/entry.S; `int $n` would be #UD on PVM).
extern "C" void kernel_halt();
inline i64 query_halted(u32 apic_id) { return kvm_hypercall(kHcQueryHalted, apic_id); }

inline SbiRet sbi_probe(u32 eid) { return sbi_call(kSbiExtBase, kSbiBaseProbeExtension, eid); }
inline SbiRet sbi_kick(u32 eid, u64 hart) { return sbi_call(eid, kSbiPvlockKickCpu, hart); }

// CPUID 0x40000000 says "KVMKVMKVM" and 0x40000001 has PV_UNHALT.
bool pv_unhalt_advertised();
bool kvm_signature_present();
bool realtime_hint();

// Busy-waits until vCPU `apic_id` is blocked in a halt (QUERY_HALTED == 1).
void wait_until_halted(u32 apic_id);

}  // namespace guest
