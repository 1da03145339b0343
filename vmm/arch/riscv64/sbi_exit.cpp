#include "vmm/arch/riscv64/sbi_exit.h"

#include <fmt/format.h>

namespace lockvisor::arch::riscv64 {

namespace {

// SBI EIDs and FIDs are 32-bit (SBI v1.0, "Binary encoding"): a7 and a6 are
// XLEN wide, and a guest that leaves garbage in the upper half made a call
// no extension defines. Reported rather than truncated into a valid one.
bool fits_32(unsigned long v) { return v <= 0xFFFFFFFFul; }

}  // namespace

RvExit decode_rv_exit(kvm_run& run, std::size_t run_bytes) {
  RvExit exit;
  if (run.exit_reason != KVM_EXIT_RISCV_SBI) {
    exit.common = kvm::decode_exit(run, run_bytes);
    return exit;
  }
  exit.common.reason = run.exit_reason;
  const auto& sbi = run.riscv_sbi;
  if (!fits_32(sbi.extension_id) || !fits_32(sbi.function_id)) {
    exit.common.kind = kvm::VcpuExit::Kind::kMalformed;
    exit.common.what = fmt::format("malformed SBI exit (EID {:#x}, FID {:#x}: wider than 32 bits)",
                                   sbi.extension_id, sbi.function_id);
    return exit;
  }
  exit.is_sbi = true;
  exit.sbi.eid = static_cast<std::uint32_t>(sbi.extension_id);
  exit.sbi.fid = static_cast<std::uint32_t>(sbi.function_id);
  for (std::size_t i = 0; i < exit.sbi.args.size(); ++i) exit.sbi.args[i] = sbi.args[i];
  return exit;
}

void answer_sbi(kvm_run& run, std::int64_t error, std::uint64_t value) {
  run.riscv_sbi.ret[0] = static_cast<unsigned long>(error);
  run.riscv_sbi.ret[1] = value;
}

pvlock::HypercallInput to_hypercall_input(const SbiCall& call, unsigned caller) {
  return {.rax = call.eid,
          .rbx = call.fid,
          .rcx = call.args[0],
          .rdx = call.args[1],
          .rsi = call.args[2],
          .caller = caller};
}

SbiRet to_sbiret(const pvlock::HypercallOutput& output) {
  return {static_cast<std::int64_t>(output.rax), output.rbx.value_or(0)};
}

}  // namespace lockvisor::arch::riscv64
