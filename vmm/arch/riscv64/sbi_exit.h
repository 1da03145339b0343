// One exit of a RISC-V vCPU, decoded from its kvm_run page into plain values,
// and the answer to an SBI call written back.
//
// RISC-V KVM (Linux 6.1) leaves the vCPU loop with few exit reasons: an SBI
// call the kernel does not serve itself (the experimental and vendor EID
// ranges, the legacy console putchar; KVM_EXIT_RISCV_SBI), SBI SRST
// (KVM_EXIT_SYSTEM_EVENT), an access no memslot covers (KVM_EXIT_MMIO) and a
// run interrupted by a signal (KVM_EXIT_INTR); all but the first decode as on
// x86 (vmm/kvm/vcpu_exit.h). Decoding is a pure function
// over the page, so it is unit-tested in the x86 build too: x86's
// <linux/kvm.h> has the same kvm_run with its riscv_sbi member, and its
// `unsigned long` fields are 64 bits wide on both.
#pragma once
#include <linux/kvm.h>

#include <array>
#include <cstdint>
#include <cstddef>

#include "vmm/kvm/vcpu_exit.h"
#include "vmm/pvlock/hypercall_table.h"

namespace lockvisor::arch::riscv64 {

struct SbiCall {
  std::uint32_t eid = 0;  // a7
  std::uint32_t fid = 0;  // a6
  std::array<std::uint64_t, 6> args{};  // a0..a5
};

// An SBI call for the VMM to answer (answer_sbi), or any other exit decoded
// as on every architecture (kvm::decode_exit: SRST as kSystemEvent, kMmio,
// kIntr, the errors). An SBI exit whose EID or FID is wider than 32 bits is
// `common` with kind kMalformed.
struct RvExit {
  bool is_sbi = false;
  SbiCall sbi;
  kvm::VcpuExit common;
};

// `run` is the vCPU's kvm_run mapping, `run_bytes` its size.
RvExit decode_rv_exit(kvm_run& run, std::size_t run_bytes);

// Writes the sbiret KVM puts in the guest's a0 (error) and a1 (value) when
// the vCPU next enters KVM_RUN.
void answer_sbi(kvm_run& run, std::int64_t error, std::uint64_t value);

// The call in the registers the hypercall table's SBI transport reads
// (Transport::kSbi: a7 in rax, a6 in rbx, a0 in rcx, a1 in rdx, a2 in rsi),
// and the table's answer back in SBI's terms (rax: error, rbx: value, 0 when
// the handler left it unset).
pvlock::HypercallInput to_hypercall_input(const SbiCall& call, unsigned caller);
struct SbiRet {
  std::int64_t error = 0;
  std::uint64_t value = 0;
};
SbiRet to_sbiret(const pvlock::HypercallOutput& output);

}  // namespace lockvisor::arch::riscv64
