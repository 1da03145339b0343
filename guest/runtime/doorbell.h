// The guest half of lockvisor/abi/doorbell.h: each wrapper is one byte-wide
// `out` (or `in`) to an ABI port with the arguments pinned to the registers
// the ABI names.
//
// They are out of line, in the section .text.doorbell (runtime/doorbell.cpp),
// so that the guest image has exactly one place where CPL3 code does port
// I/O: tests/guest_image checks that no other CPL3 code does, and that these
// use only the ports the VMM's TSS I/O bitmap grants. A call costs nothing
// next to the exit each of them makes.
#pragma once
#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/types.h"

namespace guest {
using namespace lockvisor::abi;

i64 kvm_hypercall(u64 nr, u64 a0 = 0, u64 a1 = 0, u64 a2 = 0, u64 a3 = 0);

struct SbiRet {
  i64 error;
  i64 value;
};
SbiRet sbi_call(u32 eid, u32 fid, u64 a0 = 0, u64 a1 = 0, u64 a2 = 0);

void ucall_doorbell(const void* ucall);

// A bare exit to the VMM that does nothing: the baseline of the doorbell benchmark.
void nop_exit();

// COM1: transmit one byte; read the line status register.
void serial_byte(char c);
u8 serial_line_status();

}  // namespace guest
