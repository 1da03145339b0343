// Tests for the RISC-V exit decoding: each exit kind from a kvm_run filled as
// RISC-V KVM fills it, the malformed ones, and the SBI answer's way into and
// out of the hypercall table's registers.
#include "vmm/arch/riscv64/sbi_exit.h"

#include <gtest/gtest.h>

#include "lockvisor/abi/sbi_lockvisor.h"
#include "lockvisor/abi/sbi_pvlock.h"

namespace lockvisor::arch::riscv64 {
namespace {

kvm_run sbi_run(unsigned long eid, unsigned long fid) {
  kvm_run run{};
  run.exit_reason = KVM_EXIT_RISCV_SBI;
  run.riscv_sbi.extension_id = eid;
  run.riscv_sbi.function_id = fid;
  for (unsigned i = 0; i < 6; ++i) run.riscv_sbi.args[i] = 100 + i;
  return run;
}

RvExit decode(kvm_run& run) { return decode_rv_exit(run, sizeof run); }

TEST(RvExit, SbiCallCarriesEidFidAndSixArguments) {
  kvm_run run = sbi_run(abi::kSbiExtLockvisor, abi::kLvSbiPutchar);
  const RvExit exit = decode(run);
  ASSERT_TRUE(exit.is_sbi);
  EXPECT_EQ(exit.sbi.eid, abi::kSbiExtLockvisor);
  EXPECT_EQ(exit.sbi.fid, abi::kLvSbiPutchar);
  for (unsigned i = 0; i < 6; ++i) EXPECT_EQ(exit.sbi.args[i], 100u + i) << "a" << i;
  EXPECT_EQ(exit.common.reason, static_cast<std::uint32_t>(KVM_EXIT_RISCV_SBI));
}

TEST(RvExit, EidOrFidWiderThan32BitsIsMalformed) {
  for (auto run : {sbi_run(0x1'0000'0000ul | abi::kSbiExtLockvisor, 0), sbi_run(abi::kSbiExtLockvisor, 1ul << 40)}) {
    const RvExit exit = decode(run);
    EXPECT_FALSE(exit.is_sbi);
    EXPECT_EQ(exit.common.kind, kvm::VcpuExit::Kind::kMalformed);
    EXPECT_NE(exit.common.what.find("malformed SBI exit"), std::string::npos) << exit.common.what;
  }
}

// Every other exit is decoded as on x86: SRST's system event, a signal's
// KVM_EXIT_INTR, an exit RISC-V KVM has and the VMM does not serve.
TEST(RvExit, OtherExitsDecodeAsOnEveryArchitecture) {
  kvm_run run{};
  run.exit_reason = KVM_EXIT_SYSTEM_EVENT;
  run.system_event.type = KVM_SYSTEM_EVENT_SHUTDOWN;
  RvExit exit = decode(run);
  EXPECT_FALSE(exit.is_sbi);
  EXPECT_EQ(exit.common.kind, kvm::VcpuExit::Kind::kSystemEvent);
  EXPECT_EQ(exit.common.system_event, static_cast<std::uint32_t>(KVM_SYSTEM_EVENT_SHUTDOWN));
  run.exit_reason = KVM_EXIT_INTR;
  EXPECT_EQ(decode(run).common.kind, kvm::VcpuExit::Kind::kIntr);
  run.exit_reason = KVM_EXIT_RISCV_CSR;
  exit = decode(run);
  EXPECT_FALSE(exit.is_sbi);
  EXPECT_EQ(exit.common.kind, kvm::VcpuExit::Kind::kUnknown);
  EXPECT_EQ(exit.common.reason, static_cast<std::uint32_t>(KVM_EXIT_RISCV_CSR));
}

TEST(RvExit, AnswerLandsInRetAsA0AndA1) {
  kvm_run run = sbi_run(abi::kSbiExtPvlockExperimentalDefault, abi::kSbiPvlockKickCpu);
  answer_sbi(run, abi::kSbiErrInvalidParam, 0x5a5a);
  EXPECT_EQ(static_cast<long>(run.riscv_sbi.ret[0]), abi::kSbiErrInvalidParam);
  EXPECT_EQ(run.riscv_sbi.ret[1], 0x5a5au);
}

TEST(RvExit, HypercallTableRegistersFollowTheSbiTransport) {
  kvm_run run = sbi_run(abi::kSbiExtPvlockExperimentalDefault, abi::kSbiPvlockKickCpu);
  const RvExit exit = decode(run);
  const pvlock::HypercallInput in = to_hypercall_input(exit.sbi, 3);
  EXPECT_EQ(in.rax, abi::kSbiExtPvlockExperimentalDefault);
  EXPECT_EQ(in.rbx, abi::kSbiPvlockKickCpu);
  EXPECT_EQ(in.rcx, 100u);
  EXPECT_EQ(in.rdx, 101u);
  EXPECT_EQ(in.rsi, 102u);
  EXPECT_EQ(in.caller, 3u);
  EXPECT_EQ(pvlock::HypercallTable::number_of(pvlock::Transport::kSbi, in),
            pvlock::HypercallTable::sbi_number(abi::kSbiExtPvlockExperimentalDefault, abi::kSbiPvlockKickCpu));

  pvlock::HypercallOutput out;
  out.rax = static_cast<std::uint64_t>(abi::kSbiErrNotSupported);
  const SbiRet not_supported = to_sbiret(out);
  EXPECT_EQ(not_supported.error, abi::kSbiErrNotSupported);
  EXPECT_EQ(not_supported.value, 0u);
  out.rax = 0;
  out.rbx = 1;
  const SbiRet probe = to_sbiret(out);
  EXPECT_EQ(probe.error, 0);
  EXPECT_EQ(probe.value, 1u);
}

}  // namespace
}  // namespace lockvisor::arch::riscv64
