// RISC-V SBI PVLOCK, carried over the x86 SBI doorbell (doorbell.h) so that
// its semantics can be tested on x86 hosts today and on RISC-V KVM later.
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

// Function IDs.
inline constexpr u32 kSbiBaseProbeExtension = 3;  // a0 = EID -> value 1 if available, 0 if not
inline constexpr u32 kSbiPvlockKickCpu = 0;       // a0 = hart id

// sbiret.error values (SBI spec, "Standard SBI Errors").
inline constexpr i64 kSbiSuccess = 0;
inline constexpr i64 kSbiErrFailed = -1;
inline constexpr i64 kSbiErrNotSupported = -2;
inline constexpr i64 kSbiErrInvalidParam = -3;

}  // namespace lockvisor::abi
