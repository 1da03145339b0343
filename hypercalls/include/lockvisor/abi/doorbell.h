// The x86 transport of lockvisor's PV interface: I/O-port "doorbells" that
// CPL3 guest code can ring (the VMM starts CPL3 code with RFLAGS.IOPL = 3).
//
// Why not `vmcall`: a userspace VMM never sees it (KVM handles or refuses
// every hypercall number but KVM_HC_MAP_GPA_RANGE in the kernel), and on the
// PVM backend of the project's machines `vmcall` never completes at all. A
// port write exits to userspace on every KVM backend, and the VMM reads and
// writes the registers through KVM_CAP_SYNC_REGS, so a doorbell costs one
// exit and no extra ioctls.
//
// Every doorbell is `out %eax, $PORT` with an 8-bit immediate port, which
// leaves RDX free to carry an argument. The data byte itself is ignored.
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// KVM convention: RAX = number, RBX = a0, RCX = a1, RDX = a2, RSI = a3.
// Result in RAX. Numbers: kvm_hypercall.h.
inline constexpr u16 kPortKvmHypercall = 0xE4;

// SBI convention mapped onto x86 registers:
//   RAX = EID (a7), RBX = FID (a6), RCX = a0, RDX = a1, RSI = a2.
// Result: RAX = sbiret.error, RBX = sbiret.value. IDs: sbi_pvlock.h.
inline constexpr u16 kPortSbiCall = 0xE5;

// Report channel (ucall.h): RBX = guest-physical address of a struct Ucall.
inline constexpr u16 kPortUcall = 0xE6;

// Exception report from the guest's CPL0 handlers. Never returns:
//   RBX = vector, RCX = error code, RDX = faulting RIP, RSI = CR2, RDI = CS.
inline constexpr u16 kPortFault = 0xE7;

// A port the VMM acknowledges and does nothing with: the cost of a bare
// exit to userspace, the baseline the doorbell benchmark is compared with.
inline constexpr u16 kPortNop = 0xE8;

// COM1, 16550-style transmit only: a write to THR prints one byte.
inline constexpr u16 kPortCom1 = 0x3F8;
inline constexpr u16 kPortCom1Lsr = 0x3FD;  // reads 0x60: transmitter always empty

// Software interrupt that CPL3 code uses to run `hlt` at CPL0 (a DPL=3 trap
// gate whose handler is `hlt; iretq`): lets one guest exercise both halts.
inline constexpr u8 kVectorKernelHalt = 0x80;

}  // namespace lockvisor::abi
