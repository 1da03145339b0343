// How a PV lock wakes a halted waiter (--pv-wake), as the VMM and the guest
// both name it, and the x2APIC facts the guest needs to send and take the
// IPI and NMI wake-ups (docs/wake-mechanisms.md).
#pragma once
#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

enum class PvWake : u8 {
  kHypercall,  // KVM_HC_KICK_CPU; the waiter halts with IF=0 (KVM's sticky pv_unhalted wakes it)
  kIpi,        // a fixed-vector IPI (kWakeVector); the waiter halts with `sti; hlt`
  kNmi,        // an NMI (ICR delivery mode NMI); the waiter halts with IF=0
};
inline constexpr PvWake kPvWakes[] = {PvWake::kHypercall, PvWake::kIpi, PvWake::kNmi};

constexpr const char* pv_wake_name(PvWake w) {
  switch (w) {
    case PvWake::kIpi: return "ipi";
    case PvWake::kNmi: return "nmi";
    case PvWake::kHypercall: break;
  }
  return "hypercall";
}

constexpr u32 pv_wake_boot_flags(PvWake w) {
  return w == PvWake::kIpi ? kBootFlagWakeIpi : w == PvWake::kNmi ? kBootFlagWakeNmi : 0;
}
constexpr PvWake pv_wake_of_boot_flags(u32 flags) {
  return (flags & kBootFlagWakeIpi) != 0 ? PvWake::kIpi
         : (flags & kBootFlagWakeNmi) != 0 ? PvWake::kNmi
                                           : PvWake::kHypercall;
}

// The IPI's vector: above the exceptions (0..31), in the highest priority
// class, so that no task-priority setting can hold it back.
inline constexpr u8 kWakeVector = 0xF2;

// x2APIC (Intel SDM vol. 3, 11.12): IA32_APIC_BASE's enable bits, the ICR
// and EOI MSRs, and the ICR's low word for a fixed IPI and an NMI (level
// "assert", physical destination: the target's x2APIC ID in the high word).
inline constexpr u32 kMsrApicBase = 0x1B;
inline constexpr u64 kApicBaseEnable = 1ull << 11;
inline constexpr u64 kApicBaseX2apic = 1ull << 10;
inline constexpr u32 kMsrX2apicEoi = 0x80B;
inline constexpr u32 kMsrX2apicIcr = 0x830;
inline constexpr u32 kIcrLevelAssert = 1u << 14;
inline constexpr u32 kIcrDeliveryNmi = 4u << 8;
inline constexpr u32 kIcrFixedWake = kIcrLevelAssert | kWakeVector;
inline constexpr u32 kIcrNmi = kIcrLevelAssert | kIcrDeliveryNmi;
// CPUID.1:ECX bit 21: the CPU has an x2APIC.
inline constexpr u32 kCpuid1EcxX2apic = 1u << 21;

}  // namespace lockvisor::abi
