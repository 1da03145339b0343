// The x86 transport of lockvisor's PV interface: I/O-port "doorbells" that
// CPL3 guest code can ring. CPL3 runs with RFLAGS.IOPL = 0 on every KVM, so
// what CPL3 may touch is decided by each vCPU's TSS I/O permission bitmap
// alone, which grants exactly kCpl3PortAccesses below. That is the only
// mechanism PVM honours (it discards IOPL at CPL3), and using it everywhere
// makes hardware KVM exercise the very path PVM takes.
//
// Why not `vmcall`: a userspace VMM never sees it (KVM handles or refuses
// every hypercall number but KVM_HC_MAP_GPA_RANGE in the kernel), and on the
// PVM backend of the project's machines `vmcall` never completes at all. A
// port write exits to userspace on every KVM backend, and the VMM reads and
// writes the registers through KVM_CAP_SYNC_REGS, so a doorbell costs one
// exit and no extra ioctls.
//
// Every doorbell is `outb %al, $PORT` with an 8-bit immediate port, which
// leaves RDX free to carry an argument. The data byte itself is ignored. It
// is one byte wide on purpose: the bitmap must allow every byte an access
// covers, and a byte access covers only the doorbell's own port.
#pragma once
#include "lockvisor/abi/guest_layout.h"
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

// Every port access CPL3 code makes, with its width in bytes and direction.
// The VMM builds each vCPU's TSS I/O bitmap from this table (one bit per
// byte covered); tests/guest_image checks that the guest's CPL3 code makes
// no other. kPortFault is absent: only CPL0 exception handlers use it.
// Every port here must lie below kIoBitmapPorts (guest_layout.h).
struct PortAccess {
  u16 port;
  u8 width;
  bool is_in;
};
inline constexpr PortAccess kCpl3PortAccesses[] = {
    {kPortKvmHypercall, 1, false}, {kPortSbiCall, 1, false}, {kPortUcall, 1, false},
    {kPortNop, 1, false},          {kPortCom1, 1, false},    {kPortCom1Lsr, 1, true},
};
static_assert([] {
  for (const auto& a : kCpl3PortAccesses)
    if (a.port + a.width > kIoBitmapPorts) return false;
  return true;
}(), "a CPL3 port lies outside the TSS I/O bitmap");

// How CPL3 code asks for a real `hlt` at CPL0 (the `*-cpl0-hlt` cases and
// `--halt kernel`): `int3`, the one software interrupt PVM delivers from CPL3
// (`int $n` is #UD there). The vector-3 gate is DPL3; its handler runs `hlt`
// only when the `int3` is the one at the guest's kernel-halt site, and reports
// any other breakpoint as a #BP fault.
inline constexpr u8 kVectorKernelHalt = 3;

}  // namespace lockvisor::abi
