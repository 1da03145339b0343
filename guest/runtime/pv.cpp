#include "runtime/pv.h"

#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/cpuid_snapshot.h"

namespace guest {

bool kvm_signature_present() {
  const CpuidLeaf& r = cpl0_cpuid().signature;
  return r.ebx == kCpuidSignatureEbx && r.ecx == kCpuidSignatureEcx && r.edx == kCpuidSignatureEdx &&
         r.eax >= kCpuidFeaturesLeaf;
}

bool pv_unhalt_advertised() {
  return kvm_signature_present() && (cpl0_cpuid().features.eax & kFeaturePvUnhalt) != 0;
}

bool realtime_hint() { return kvm_signature_present() && (cpl0_cpuid().features.edx & kHintsRealtime) != 0; }

void wait_until_halted(u32 apic_id) {
  for (;;) {
    const i64 halted = query_halted(apic_id);
    LV_CHECK_GE(halted, 0);
    if (halted == 1) return;
    cpu_relax();
  }
}

}  // namespace guest
