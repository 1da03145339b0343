// PV-lock primitives as guest code calls them: KICK_CPU, the two halts, the
// SBI PVLOCK calls and feature detection (CPUID, as a KVM guest does it, but
// read at CPL0: runtime/cpuid_snapshot.h).
#pragma once
#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "runtime/boot.h"
#include "runtime/doorbell.h"

namespace guest {

// A real `hlt` at CPL0: `int3` at the site the vector-3 gate accepts for it
// (arch/x86/entry.S; `int $n` would be #UD on PVM).
extern "C" void kernel_halt();
// KVM's own hypercall (vmcall/vmmcall) at CPL0, from CPL3 through the
// vector-3 gate's second site, or directly when already at CPL0.
extern "C" i64 kernel_kvm_hypercall(u64 nr, u64 a0, u64 a1, u64 a2, u64 a3);
extern "C" i64 cpl0_kvm_hypercall(u64 nr, u64 a0, u64 a1, u64 a2, u64 a3);
extern "C" void cpl0_halt();

// --backend kvm (BootInfo kBootFlagKvmHypercalls): KICK_CPU and halts go to
// KVM itself; otherwise to the VMM's doorbells.
inline bool kvm_pv_path() { return (boot().flags & kBootFlagKvmHypercalls) != 0; }
// --guest-ring 0 (kBootFlagGuestRing0): this program runs at CPL0.
inline bool at_cpl0() { return (boot().flags & kBootFlagGuestRing0) != 0; }

inline i64 kick_cpu(u32 apic_id, u64 flags = 0) {
  if (!kvm_pv_path()) return kvm_hypercall(kHcKickCpu, flags, apic_id);
  return at_cpl0() ? cpl0_kvm_hypercall(kHcKickCpu, flags, apic_id, 0, 0)
                   : kernel_kvm_hypercall(kHcKickCpu, flags, apic_id, 0, 0);
}
// Halt until kicked: the HALT hypercall (the doorbell equivalent of `hlt`),
// or with the kvm backend a real `hlt` at CPL0 that KVM blocks on.
inline i64 halt() {
  if (!kvm_pv_path()) return kvm_hypercall(kHcHalt);
  at_cpl0() ? cpl0_halt() : kernel_halt();
  return kKvmSuccess;
}
// HALT_FOR (the doorbell only: KVM's `hlt` has no limit): halt until kicked
// or until `ns` have passed; kHaltForExpired when the limit ended it.
inline i64 halt_for(u64 ns) { return kvm_hypercall(kHcHaltFor, ns); }
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
