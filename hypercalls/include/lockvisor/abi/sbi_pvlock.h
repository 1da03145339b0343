// RISC-V SBI: PVLOCK, carried over the x86 SBI doorbell (doorbell.h) so that
// its semantics can be tested on x86 hosts today and on RISC-V KVM later, and
// the standard extensions the RV64 guest calls with `ecall` (a7 = EID,
// a6 = FID, a0..a5 = arguments; a0/a1 = sbiret { error, value }).
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// Extension IDs. The two proposals sit in the standard EID space, which stock
// RISC-V KVM answers in the kernel (never forwarded to userspace); the
// experimental-range alias is what a userspace VMM on stock KVM can receive.
inline constexpr u32 kSbiExtBase = 0x10;
inline constexpr u32 kSbiExtPvlock = 0x50564C4B;        // "PVLK", current proposal
inline constexpr u32 kSbiExtPvlockLegacy = 0xAB0401;    // earlier proposal
inline constexpr u32 kSbiExtPvlockExperimentalDefault = 0x0850564C;  // 0x08xxxxxx, configurable
inline constexpr u32 kSbiExperimentalFirst = 0x08000000;
inline constexpr u32 kSbiExperimentalLast = 0x08FFFFFF;

// The standard extensions the RV64 guest uses (SBI spec v1.0). The legacy
// console is SBI v0.1: no FID, and its answer is a0 alone (no sbiret).
// RISC-V KVM 6.1 forwards it to the VMM as KVM_EXIT_RISCV_SBI, handles HSM
// and IPI in the kernel, and turns SRST into KVM_EXIT_SYSTEM_EVENT.
inline constexpr u32 kSbiExtLegacyConsolePutchar = 0x01;  // a0 = the byte
inline constexpr u32 kSbiExtIpi = 0x735049;               // "sPI"
inline constexpr u32 kSbiExtHsm = 0x48534D;               // "HSM"
inline constexpr u32 kSbiExtSrst = 0x53525354;            // "SRST"

// Function IDs.
inline constexpr u32 kSbiBaseProbeExtension = 3;  // a0 = EID -> value 1 if available, 0 if not
inline constexpr u32 kSbiPvlockKickCpu = 0;       // a0 = hart id
inline constexpr u32 kSbiIpiSendIpi = 0;          // a0 = hart mask, a1 = mask base
inline constexpr u32 kSbiHsmHartStart = 0;        // a0 = hart id, a1 = start address, a2 = opaque (a1 at entry)
inline constexpr u32 kSbiHsmHartGetStatus = 2;    // a0 = hart id -> value: kSbiHsm*
inline constexpr u32 kSbiSrstSystemReset = 0;     // a0 = type, a1 = reason

// HSM hart states (hart_get_status).
inline constexpr i64 kSbiHsmStarted = 0;
inline constexpr i64 kSbiHsmStopped = 1;

// SRST reset types and reasons.
inline constexpr u32 kSbiSrstTypeShutdown = 0;
inline constexpr u32 kSbiSrstReasonNone = 0;
inline constexpr u32 kSbiSrstReasonSystemFailure = 1;

// sbiret.error values (SBI spec, "Standard SBI Errors").
inline constexpr i64 kSbiSuccess = 0;
inline constexpr i64 kSbiErrFailed = -1;
inline constexpr i64 kSbiErrNotSupported = -2;
inline constexpr i64 kSbiErrInvalidParam = -3;

}  // namespace lockvisor::abi
