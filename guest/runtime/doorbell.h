// The guest half of lockvisor/abi/doorbell.h: each wrapper is one `out` to
// an immediate port with the arguments pinned to the registers the ABI names.
#pragma once
#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/types.h"

namespace guest {
using namespace lockvisor::abi;

inline i64 kvm_hypercall(u64 nr, u64 a0 = 0, u64 a1 = 0, u64 a2 = 0, u64 a3 = 0) {
  u64 ret;
  asm volatile("outl %%eax, %[port]"
               : "=a"(ret)
               : [port] "i"(kPortKvmHypercall), "a"(nr), "b"(a0), "c"(a1), "d"(a2), "S"(a3)
               : "memory");
  return static_cast<i64>(ret);
}

struct SbiRet {
  i64 error;
  i64 value;
};

inline SbiRet sbi_call(u32 eid, u32 fid, u64 a0 = 0, u64 a1 = 0, u64 a2 = 0) {
  u64 error;
  u64 value;
  asm volatile("outl %%eax, %[port]"
               : "=a"(error), "=b"(value)
               : [port] "i"(kPortSbiCall), "a"(u64{eid}), "b"(u64{fid}), "c"(a0), "d"(a1), "S"(a2)
               : "memory");
  return {static_cast<i64>(error), static_cast<i64>(value)};
}

inline void ucall_doorbell(const void* ucall) {
  asm volatile("outl %%eax, %[port]" : : [port] "i"(kPortUcall), "a"(0), "b"(ucall) : "memory");
}

// A bare exit to the VMM that does nothing: the baseline of the doorbell benchmark.
inline void nop_exit() { asm volatile("outl %%eax, %[port]" : : [port] "i"(kPortNop), "a"(0) : "memory"); }

inline void serial_byte(char c) {
  asm volatile("outb %%al, %%dx" : : "a"(c), "d"(u16{kPortCom1}) : "memory");
}

}  // namespace guest
