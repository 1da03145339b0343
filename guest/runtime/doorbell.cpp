// The only CPL3 code that does port I/O (see runtime/doorbell.h). `noipa`
// keeps the compiler from inlining or cloning these out of their section.
#include "runtime/doorbell.h"

#define LV_DOORBELL __attribute__((section(".text.doorbell"), noipa))

namespace guest {

LV_DOORBELL i64 kvm_hypercall(u64 nr, u64 a0, u64 a1, u64 a2, u64 a3) {
  u64 ret;
  asm volatile("outb %%al, %[port]"
               : "=a"(ret)
               : [port] "i"(kPortKvmHypercall), "a"(nr), "b"(a0), "c"(a1), "d"(a2), "S"(a3)
               : "memory");
  return static_cast<i64>(ret);
}

LV_DOORBELL SbiRet sbi_call(u32 eid, u32 fid, u64 a0, u64 a1, u64 a2) {
  u64 error;
  u64 value;
  asm volatile("outb %%al, %[port]"
               : "=a"(error), "=b"(value)
               : [port] "i"(kPortSbiCall), "a"(u64{eid}), "b"(u64{fid}), "c"(a0), "d"(a1), "S"(a2)
               : "memory");
  return {static_cast<i64>(error), static_cast<i64>(value)};
}

LV_DOORBELL void ucall_doorbell(const void* ucall) {
  asm volatile("outb %%al, %[port]" : : [port] "i"(kPortUcall), "a"(0), "b"(ucall) : "memory");
}

LV_DOORBELL void nop_exit() { asm volatile("outb %%al, %[port]" : : [port] "i"(kPortNop), "a"(0) : "memory"); }

LV_DOORBELL void serial_byte(char c) {
  asm volatile("outb %%al, %%dx" : : "a"(c), "d"(u16{kPortCom1}) : "memory");
}

LV_DOORBELL u8 serial_line_status() {
  u8 status;
  asm volatile("inb %%dx, %%al" : "=a"(status) : "d"(u16{kPortCom1Lsr}) : "memory");
  return status;
}

}  // namespace guest
