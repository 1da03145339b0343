// platform: what CPL3 code may use on every KVM flavour, checked from CPL3
// on every vCPU (the conformance cases cpl3-ports and cpuid-at-cpl0-*).
//   - every ABI port, at the width the ABI defines (lockvisor/abi/doorbell.h
//     kCpl3PortAccesses), reaches the VMM: on PVM only the TSS I/O bitmap
//     makes that true;
//   - the PV features and APIC ID the runtime uses are the VMM's CPUID table
//     (read at CPL0 by the entry code), reported for the VMM to compare.
#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/cpuid_snapshot.h"
#include "runtime/doorbell.h"
#include "runtime/pv.h"
#include "runtime/ucall_report.h"

namespace guest {
namespace {
constexpr u64 kUnknownHypercall = 0x4c56ffff;
constexpr u8 kLsrTransmitterEmpty = 0x60;
}  // namespace

void program_platform() {
  // 0xE4: an unknown number is answered -KVM_ENOSYS (KVM's answer).
  LV_CHECK_EQ(kvm_hypercall(kUnknownHypercall), kKvmEnosys);
  // 0xE5: the SBI base extension answers a probe.
  LV_CHECK_EQ(sbi_probe(kSbiExtBase).error, kSbiSuccess);
  // 0xE6: this report is itself the report channel.
  // 0xE8: the no-op exit.
  nop_exit();
  // 0x3FD, then 0x3F8: the line status register, then one line of serial output.
  LV_CHECK_EQ(serial_line_status(), kLsrTransmitterEmpty);
  for (const char* s = "cpl3 serial ok\n"; *s; ++s) serial_byte(*s);

  const Cpl0Cpuid& cpuid = cpl0_cpuid();
  report_result("kvm_signature", kvm_signature_present() ? 1 : 0);
  report_result("pv_unhalt", pv_unhalt_advertised() ? 1 : 0);
  report_result("realtime", realtime_hint() ? 1 : 0);
  report_result("apic_id", cpuid.basic.ebx >> 24);
}

}  // namespace guest
