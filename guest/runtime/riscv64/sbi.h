// The RV64 guest's transport to the firmware or VMM below it: SBI calls with
// `ecall` (lockvisor/abi/sbi_pvlock.h has every EID and FID). Where the x86
// guest exits through port I/O (runtime/doorbell.h), the RV64 guest makes
// SBI calls, which whatever runs it must answer:
//   - OpenSBI (qemu-system-riscv64 -bios fw_dynamic.bin) answers them all,
//     and PVLOCK with "not supported";
//   - RISC-V KVM 6.1 answers BASE, HSM and IPI in the kernel, turns SRST into
//     KVM_EXIT_SYSTEM_EVENT and forwards the legacy console to the VMM as
//     KVM_EXIT_RISCV_SBI; of PVLOCK it forwards only the experimental-range
//     alias (0x08xxxxxx), so lockvisor's RISC-V VMM must serve the console,
//     power-off and that alias itself.
#pragma once
#include "lockvisor/abi/sbi_pvlock.h"
#include "lockvisor/abi/types.h"

namespace guest::riscv {
using namespace lockvisor::abi;

struct SbiRet {
  i64 error;
  i64 value;
};

// a7 = eid, a6 = fid, a0..a5 = args; the answer is a0 (error), a1 (value).
SbiRet sbi_call(u32 eid, u32 fid, u64 a0 = 0, u64 a1 = 0, u64 a2 = 0, u64 a3 = 0, u64 a4 = 0, u64 a5 = 0);

// SBI BASE probe_extension: whether `eid` is served.
bool sbi_probe(u32 eid);

// The console, one ecall per byte (slow, and only for a few lines of
// results): the legacy SBI putchar, or lockvisor's kLvSbiPutchar when the VMM
// below serves lockvisor's extension (lockvisor_sbi.h). Not serialised
// between harts: print_line (hart.h) takes turns.
void console_putchar(char c);
void console_write(const char* s);

// SBI HSM: start hart `hart` at `entry` with a1 = opaque; its status.
SbiRet hart_start(u64 hart, u64 entry, u64 opaque);
SbiRet hart_get_status(u64 hart);

// SBI IPI to one hart: sets its supervisor software interrupt pending.
SbiRet send_ipi(u64 hart);

// SBI SRST shutdown; "system failure" as the reason when !ok. Falls back to
// stopping the hart if the call returns (no SRST below).
[[noreturn]] void power_off(bool ok);

}  // namespace guest::riscv
