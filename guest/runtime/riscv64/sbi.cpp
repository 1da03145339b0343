#include "runtime/riscv64/sbi.h"

#include "runtime/riscv64/lockvisor_sbi.h"

namespace guest::riscv {

SbiRet sbi_call(u32 eid, u32 fid, u64 a0, u64 a1, u64 a2, u64 a3, u64 a4, u64 a5) {
  register u64 r_a0 asm("a0") = a0;
  register u64 r_a1 asm("a1") = a1;
  register u64 r_a2 asm("a2") = a2;
  register u64 r_a3 asm("a3") = a3;
  register u64 r_a4 asm("a4") = a4;
  register u64 r_a5 asm("a5") = a5;
  register u64 r_a6 asm("a6") = fid;
  register u64 r_a7 asm("a7") = eid;
  // "memory": an SBI call may read what the caller wrote (a console byte
  // after the data it reports) and order it, like the x86 doorbells.
  asm volatile("ecall"
               : "+r"(r_a0), "+r"(r_a1)
               : "r"(r_a2), "r"(r_a3), "r"(r_a4), "r"(r_a5), "r"(r_a6), "r"(r_a7)
               : "memory");
  return SbiRet{static_cast<i64>(r_a0), static_cast<i64>(r_a1)};
}

bool sbi_probe(u32 eid) {
  const SbiRet r = sbi_call(kSbiExtBase, kSbiBaseProbeExtension, eid);
  return r.error == kSbiSuccess && r.value != 0;
}

void console_putchar(char c) {
  if (lockvisor_sbi()) {
    lv_putchar(c);
    return;
  }
  // SBI v0.1 legacy extension: FID ignored, only a0 comes back.
  sbi_call(kSbiExtLegacyConsolePutchar, 0, static_cast<u8>(c));
}

void console_write(const char* s) {
  while (*s) console_putchar(*s++);
}

SbiRet hart_start(u64 hart, u64 entry, u64 opaque) {
  return sbi_call(kSbiExtHsm, kSbiHsmHartStart, hart, entry, opaque);
}

SbiRet hart_get_status(u64 hart) { return sbi_call(kSbiExtHsm, kSbiHsmHartGetStatus, hart); }

SbiRet send_ipi(u64 hart) {
  // hart_mask bit 0 with mask base = the hart: exactly that hart.
  return sbi_call(kSbiExtIpi, kSbiIpiSendIpi, 1, hart);
}

void power_off(bool ok) {
  sbi_call(kSbiExtSrst, kSbiSrstSystemReset, kSbiSrstTypeShutdown,
           ok ? kSbiSrstReasonNone : kSbiSrstReasonSystemFailure);
  console_write("FAIL: SBI SRST returned: stopping this hart\n");
  for (;;) asm volatile("wfi");
}

}  // namespace guest::riscv
