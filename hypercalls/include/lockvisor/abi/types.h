// Fixed-width integer types for the ABI headers. These headers are compiled
// into the freestanding guest and into the hosted VMM, so they use only the
// compiler's own <stdint.h>-equivalent builtins.
#pragma once

namespace lockvisor::abi {
using u8 = __UINT8_TYPE__;
using u16 = __UINT16_TYPE__;
using u32 = __UINT32_TYPE__;
using u64 = __UINT64_TYPE__;
using i32 = __INT32_TYPE__;
using i64 = __INT64_TYPE__;
}  // namespace lockvisor::abi
