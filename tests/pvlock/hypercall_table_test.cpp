// The hypercall table (vmm/pvlock/hypercall_table.h) without /dev/kvm: every
// number of both transports, every bad argument, each PV switch on and off,
// and the registration rule (each (transport, number) once).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "vmm/pvlock/hypercall_table.h"
#include "vmm/pvlock/userspace_backend.h"

namespace lockvisor::pvlock {
namespace {
namespace abi = lockvisor::abi;

// Records every kick; halted state set by the test.
class FakeBackend final : public PvBackend {
 public:
  explicit FakeBackend(unsigned vcpus) : halted_(vcpus, false), counters_(vcpus) {}
  std::string_view name() const override { return "fake"; }
  VmSetup vm_setup() const override { return {}; }
  KickResult kick(unsigned from, int target) override {
    kicks.emplace_back(from, target);
    return target < 0 ? KickResult::kNoSuchTarget : KickResult::kDelivered;
  }
  KickResult kick_if_halted(unsigned from, int target) override {
    lossy_kicks.emplace_back(from, target);
    return target < 0 ? KickResult::kNoSuchTarget : KickResult::kDropped;
  }
  HaltOutcome halt(unsigned, std::uint64_t) override {
    ++halts;
    return HaltOutcome::kImmediate;
  }
  void yield_to(unsigned from, int target) override { yields.emplace_back(from, target); }
  void stop() override {}
  VcpuPvState vcpu_state(unsigned vcpu) const override { return {halted_[vcpu], false, known}; }
  std::uint64_t epoch() const override { return 0; }
  const VcpuPvCounters& counters(unsigned vcpu) const override { return counters_[vcpu]; }
  std::vector<std::uint64_t> wake_latencies(unsigned) const override { return {}; }

  void set_halted(unsigned vcpu, bool halted) { halted_[vcpu] = halted; }
  std::vector<std::pair<unsigned, int>> kicks;
  std::vector<std::pair<unsigned, int>> lossy_kicks;  // kick_if_halted
  std::vector<std::pair<unsigned, int>> yields;
  unsigned halts = 0;
  bool known = true;

 private:
  std::vector<bool> halted_;
  std::vector<VcpuPvCounters> counters_;
};

constexpr std::uint32_t kAlias = abi::kSbiExtPvlockExperimentalDefault;

// Three vCPUs with APIC IDs 0, 2, 4 (index != APIC ID on purpose).
int apic_to_index(std::uint64_t apic_id) {
  switch (apic_id) {
    case 0: return 0;
    case 2: return 1;
    case 4: return 2;
    default: return -1;
  }
}

HypercallConfig config(bool pv = true, bool sbi = true) {
  HypercallConfig c;
  c.pv_unhalt = pv;
  c.sbi_pvlock = sbi;
  c.sbi_experimental_eid = kAlias;
  return c;
}

HypercallInput kvm_call(std::uint64_t nr, std::uint64_t rbx = 0, std::uint64_t rcx = 0, unsigned caller = 0) {
  return {nr, rbx, rcx, 0, 0, caller};
}
HypercallInput sbi_call(std::uint64_t eid, std::uint64_t fid, std::uint64_t a0 = 0, unsigned caller = 0) {
  return {eid, fid, a0, 0, 0, caller};
}
std::int64_t as_signed(std::uint64_t v) { return static_cast<std::int64_t>(v); }

// ---------------------------------------------------------------- KVM, port 0xE4

TEST(HypercallTableKvm, KickCpuToValidApicIdKicksThatIndexAndReturnsZero) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, 4, 1));
  EXPECT_TRUE(r.known);
  EXPECT_EQ(r.number, abi::kHcKickCpu);
  EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess);
  EXPECT_FALSE(r.output.rbx.has_value());
  EXPECT_FALSE(r.output.halt);
  ASSERT_EQ(backend.kicks.size(), 1u);
  EXPECT_EQ(backend.kicks[0], (std::pair<unsigned, int>{1, 2}));
}

TEST(HypercallTableKvm, KickCpuIgnoresFlags) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, /*flags=*/0xFFFF'FFFF'FFFF'FFFF, 2));
  EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess);
  ASSERT_EQ(backend.kicks.size(), 1u);
  EXPECT_EQ(backend.kicks[0], (std::pair<unsigned, int>{0, 1}));
}

TEST(HypercallTableKvm, KickCpuToUnknownApicIdReturnsZeroAndNamesNobody) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  for (const std::uint64_t apic : {std::uint64_t{1}, std::uint64_t{255}, std::uint64_t{256}, ~std::uint64_t{0}}) {
    const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, apic));
    EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess) << apic;  // KVM's answer
  }
  ASSERT_EQ(backend.kicks.size(), 4u);
  for (const auto& k : backend.kicks) EXPECT_EQ(k.second, -1);
}

TEST(HypercallTableKvm, KickCpuToSelfKicksSelf) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, 2, 1));
  EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess);
  ASSERT_EQ(backend.kicks.size(), 1u);
  EXPECT_EQ(backend.kicks[0], (std::pair<unsigned, int>{1, 1}));
}

TEST(HypercallTableKvm, KickCpuWithPvOffReturnsEnosysAndWakesNobody) {
  UserspaceBackend backend(3, BackendOptions{});
  auto table = make_pv_hypercall_table(backend, config(/*pv=*/false), apic_to_index);
  const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, 2));
  EXPECT_TRUE(r.known);  // a registered number that answers "off", not an unknown one
  EXPECT_EQ(as_signed(r.output.rax), abi::kKvmEnosys);
  EXPECT_EQ(as_signed(r.output.rax), -1000);
  EXPECT_EQ(backend.counters(0).kicks_sent.load(), 0u);
  EXPECT_EQ(backend.counters(1).kicks_received.load(), 0u);
  EXPECT_FALSE(backend.kick_pending(1));
  EXPECT_EQ(table->unknown_calls(Transport::kKvm), 0u);
}

// KVM without KVM_CAP_ENFORCE_PV_FEATURE_CPUID kicks even with PV_UNHALT
// hidden; --enforce-pv-cpuid off matches it.
TEST(HypercallTableKvm, KickCpuWithPvOffButNotEnforcedKicksAndReturnsZero) {
  UserspaceBackend backend(3, BackendOptions{});
  auto c = config(/*pv=*/false);
  c.enforce_pv_feature_cpuid = false;
  auto table = make_pv_hypercall_table(backend, c, apic_to_index);
  const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, 2));
  EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess);
  EXPECT_EQ(backend.counters(1).kicks_received.load(), 1u);
  EXPECT_TRUE(backend.kick_pending(1));
}

// A backend that cannot see halts (kvm without the `blocking` statistic)
// answers QUERY_HALTED with -EOPNOTSUPP, never with a guess.
TEST(HypercallTableKvm, QueryHaltedWhenTheBackendCannotTellIsEopnotsupp) {
  FakeBackend backend(3);
  backend.known = false;
  backend.set_halted(1, true);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcQueryHalted, 2));
  EXPECT_EQ(as_signed(r.output.rax), abi::kKvmEopnotsupp);
}

TEST(HypercallTableKvm, KickCpuThroughTheUserspaceBackendSetsTheLatch) {
  UserspaceBackend backend(3, BackendOptions{});
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, 4, 0));
  table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, 7, 0));
  EXPECT_TRUE(backend.kick_pending(2));
  EXPECT_FALSE(backend.is_halted(2));
  EXPECT_EQ(backend.counters(0).kicks_sent.load(), 2u);
  EXPECT_EQ(backend.counters(0).kicks_invalid.load(), 1u);
  EXPECT_EQ(backend.counters(2).kicks_received.load(), 1u);
}

TEST(HypercallTableKvm, HaltAsksTheCallerToHaltWithPvOnOrOff) {
  for (const bool pv : {true, false}) {
    FakeBackend backend(3);
    auto table = make_pv_hypercall_table(backend, config(pv), apic_to_index);
    const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcHalt, 0, 0, 2));
    EXPECT_TRUE(r.known);
    EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess);
    EXPECT_TRUE(r.output.halt);
    EXPECT_EQ(backend.halts, 0u);  // the exit loop halts, not the table
    EXPECT_TRUE(backend.kicks.empty());
  }
}

// HALT_FOR: a halt with the guest's limit, which the table checks (a0 is
// the guest's: 0 or above the maximum is refused, and nobody halts).
TEST(HypercallTableKvm, HaltForAsksForAHaltWithTheLimitAndRefusesALimitOutOfRange) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  for (const std::uint64_t ns : {std::uint64_t{1}, std::uint64_t{1000000}, abi::kHaltForMaxNs}) {
    const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcHaltFor, ns));
    EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess);
    EXPECT_TRUE(r.output.halt);
    EXPECT_EQ(r.output.halt_limit_ns, ns);
  }
  for (const std::uint64_t ns : {std::uint64_t{0}, abi::kHaltForMaxNs + 1, ~std::uint64_t{0}}) {
    const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcHaltFor, ns));
    EXPECT_EQ(as_signed(r.output.rax), abi::kKvmEinval) << ns;
    EXPECT_FALSE(r.output.halt) << ns;
  }
  const auto plain = table->dispatch(Transport::kKvm, kvm_call(abi::kHcHalt, 12345));
  EXPECT_EQ(plain.output.halt_limit_ns, 0u) << "HALT ignores a0: no limit";
  EXPECT_EQ(backend.halts, 0u);
}

TEST(HypercallTableKvm, QueryHaltedAnswersPerVcpu) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  backend.set_halted(1, true);
  EXPECT_EQ(table->dispatch(Transport::kKvm, kvm_call(abi::kHcQueryHalted, 2)).output.rax, 1u);
  EXPECT_EQ(table->dispatch(Transport::kKvm, kvm_call(abi::kHcQueryHalted, 4)).output.rax, 0u);
  EXPECT_EQ(table->dispatch(Transport::kKvm, kvm_call(abi::kHcQueryHalted, 0)).output.rax, 0u);
  const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcQueryHalted, 2));
  EXPECT_FALSE(r.output.halt);
  EXPECT_FALSE(r.output.rbx.has_value());
  EXPECT_TRUE(backend.kicks.empty());
}

TEST(HypercallTableKvm, QueryHaltedOfUnknownApicIdIsEinval) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  for (const std::uint64_t apic : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{1} << 40})
    EXPECT_EQ(as_signed(table->dispatch(Transport::kKvm, kvm_call(abi::kHcQueryHalted, apic)).output.rax),
              abi::kKvmEinval);
}

// YIELD_TO (11, KVM_HC_SCHED_YIELD): a0 (RBX) names the target by APIC ID;
// the answer is 0 whether or not a vCPU has it, as in KVM, and an unknown one
// reaches the backend as -1.
TEST(HypercallTableKvm, YieldToPassesTheTargetIndexAndAnswersZero) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  for (const std::uint64_t apic : {std::uint64_t{4}, std::uint64_t{3}, std::uint64_t{1} << 40}) {
    const auto r = table->dispatch(Transport::kKvm, kvm_call(abi::kHcSchedYield, apic, 0, 1));
    EXPECT_TRUE(r.known);
    EXPECT_EQ(as_signed(r.output.rax), abi::kKvmSuccess);
    EXPECT_FALSE(r.output.halt);
  }
  ASSERT_EQ(backend.yields.size(), 3u);
  EXPECT_EQ(backend.yields[0], (std::pair<unsigned, int>{1, 2}));
  EXPECT_EQ(backend.yields[1], (std::pair<unsigned, int>{1, -1}));
  EXPECT_EQ(backend.yields[2], (std::pair<unsigned, int>{1, -1}));
  EXPECT_TRUE(backend.kicks.empty());
}

TEST(HypercallTableKvm, YieldToThroughTheUserspaceBackendIsCounted) {
  BackendOptions options;
  options.boost = BoostMechanism::kOff;  // counted, nothing applied
  UserspaceBackend backend(3, options);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  table->dispatch(Transport::kKvm, kvm_call(abi::kHcSchedYield, 4, 0, 0));
  table->dispatch(Transport::kKvm, kvm_call(abi::kHcSchedYield, 9, 0, 0));
  EXPECT_EQ(backend.counters(0).yield_to_calls.load(), 2u);
  EXPECT_EQ(backend.counters(2).boosts.load(), 0u);  // mechanism off
}

TEST(HypercallTableKvm, UnknownNumbersAnswerEnosysAndAreCounted) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  const std::uint64_t unknown[] = {0, 1, 4, 6, 10, 12, 0x4c560000, 0x4c560004, 0x5'0000'0005, ~std::uint64_t{0}};
  for (const auto nr : unknown) {
    const auto r = table->dispatch(Transport::kKvm, kvm_call(nr, 0, 2));
    EXPECT_FALSE(r.known) << nr;
    EXPECT_EQ(r.number, nr);
    EXPECT_EQ(as_signed(r.output.rax), abi::kKvmEnosys) << nr;
    EXPECT_FALSE(r.output.halt);
  }
  EXPECT_EQ(table->unknown_calls(Transport::kKvm), std::size(unknown));
  EXPECT_EQ(table->unknown_calls(Transport::kSbi), 0u);
  EXPECT_TRUE(backend.kicks.empty());
}

// ---------------------------------------------------------------- SBI, port 0xE5

TEST(HypercallTableSbi, ProbeEachPvlockEidOnAndOff) {
  for (const bool on : {true, false}) {
    FakeBackend backend(3);
    auto table = make_pv_hypercall_table(backend, config(true, on), apic_to_index);
    for (const std::uint64_t eid : {std::uint64_t{abi::kSbiExtPvlock}, std::uint64_t{abi::kSbiExtPvlockLegacy},
                                    std::uint64_t{kAlias}}) {
      const auto r = table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtBase, abi::kSbiBaseProbeExtension, eid));
      EXPECT_TRUE(r.known);
      EXPECT_EQ(as_signed(r.output.rax), abi::kSbiSuccess);
      ASSERT_TRUE(r.output.rbx.has_value());
      EXPECT_EQ(*r.output.rbx, on ? 1u : 0u) << std::hex << eid;
    }
    // Anything else probes absent, whatever the switch.
    for (const std::uint64_t eid : {std::uint64_t{0}, std::uint64_t{abi::kSbiExtBase}, std::uint64_t{0x0850564D},
                                    std::uint64_t{abi::kSbiExtPvlock} | (std::uint64_t{1} << 32)}) {
      const auto r = table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtBase, abi::kSbiBaseProbeExtension, eid));
      EXPECT_EQ(as_signed(r.output.rax), abi::kSbiSuccess);
      EXPECT_EQ(r.output.rbx.value_or(99), 0u) << std::hex << eid;
    }
    EXPECT_TRUE(backend.kicks.empty());
  }
}

TEST(HypercallTableSbi, ProbeFollowsTheConfiguredAlias) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, {true, true, 0x08ABCDEF}, apic_to_index);
  EXPECT_EQ(table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtBase, abi::kSbiBaseProbeExtension, 0x08ABCDEF))
                .output.rbx.value_or(99),
            1u);
  EXPECT_EQ(table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtBase, abi::kSbiBaseProbeExtension, kAlias))
                .output.rbx.value_or(99),
            0u);
  EXPECT_TRUE(table->dispatch(Transport::kSbi, sbi_call(0x08ABCDEF, abi::kSbiPvlockKickCpu, 2)).known);
  EXPECT_FALSE(table->dispatch(Transport::kSbi, sbi_call(kAlias, abi::kSbiPvlockKickCpu, 2)).known);
}

TEST(HypercallTableSbi, KickValidHartAtEachEid) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  for (const std::uint32_t eid : {abi::kSbiExtPvlock, abi::kSbiExtPvlockLegacy, kAlias}) {
    const auto r = table->dispatch(Transport::kSbi, sbi_call(eid, abi::kSbiPvlockKickCpu, 4, 1));
    EXPECT_TRUE(r.known);
    EXPECT_EQ(r.number, HypercallTable::sbi_number(eid, abi::kSbiPvlockKickCpu));
    EXPECT_EQ(as_signed(r.output.rax), abi::kSbiSuccess);
    EXPECT_EQ(r.output.rbx.value_or(99), 0u);
    EXPECT_FALSE(r.output.halt);
  }
  ASSERT_EQ(backend.kicks.size(), 3u);
  for (const auto& k : backend.kicks) EXPECT_EQ(k, (std::pair<unsigned, int>{1, 2}));
}

// --sbi-kick proposed: SBI kicks go through kick_if_halted (lost unless the
// target is halted), KVM-convention kicks stay sticky.
TEST(HypercallTableSbi, ProposedSbiKickIsLostUnlessHalted) {
  UserspaceBackend backend(3, BackendOptions{});
  auto c = config();
  c.sbi_kick_proposed = true;
  auto table = make_pv_hypercall_table(backend, c, apic_to_index);
  const auto r = table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtPvlock, abi::kSbiPvlockKickCpu, 2));
  EXPECT_EQ(as_signed(r.output.rax), abi::kSbiSuccess);  // the call succeeds; the kick is lost
  EXPECT_FALSE(backend.kick_pending(1));
  EXPECT_EQ(backend.counters(1).kicks_dropped.load(), 1u);
  table->dispatch(Transport::kKvm, kvm_call(abi::kHcKickCpu, 0, 2));
  EXPECT_TRUE(backend.kick_pending(1));  // KICK_CPU is unaffected
  FakeBackend fake(3);
  auto fake_table = make_pv_hypercall_table(fake, c, apic_to_index);
  fake_table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtPvlockLegacy, abi::kSbiPvlockKickCpu, 4));
  EXPECT_TRUE(fake.kicks.empty());
  ASSERT_EQ(fake.lossy_kicks.size(), 1u);
  EXPECT_EQ(fake.lossy_kicks[0], (std::pair<unsigned, int>{0, 2}));
}

TEST(HypercallTableSbi, KickInvalidHartIsInvalidParamAndCountedAsInvalid) {
  UserspaceBackend backend(3, BackendOptions{});
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  const auto r = table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtPvlock, abi::kSbiPvlockKickCpu, 3));
  EXPECT_EQ(as_signed(r.output.rax), abi::kSbiErrInvalidParam);
  EXPECT_EQ(r.output.rbx.value_or(99), 0u);
  EXPECT_EQ(backend.counters(0).kicks_sent.load(), 1u);
  EXPECT_EQ(backend.counters(0).kicks_invalid.load(), 1u);
  for (unsigned v = 0; v < 3; ++v) EXPECT_FALSE(backend.kick_pending(v));
}

TEST(HypercallTableSbi, UnknownFidUnknownEidAndUpperBitsAreNotSupported) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  const std::pair<std::uint64_t, std::uint64_t> calls[] = {
      {abi::kSbiExtPvlock, 1},                       // unknown FID
      {abi::kSbiExtPvlockLegacy, 7},                 // unknown FID
      {kAlias, 0xFFFFFFFF},                          // unknown FID
      {abi::kSbiExtBase, 0},                         // Base, not PROBE
      {abi::kSbiExtBase, 2},
      {0x0850564D, abi::kSbiPvlockKickCpu},          // not the alias
      {0x735049, 0},                                 // another extension (IPI)
  };
  for (const auto& [eid, fid] : calls) {
    const auto r = table->dispatch(Transport::kSbi, sbi_call(eid, fid, 2));
    EXPECT_FALSE(r.known) << std::hex << eid << "/" << fid;
    EXPECT_EQ(as_signed(r.output.rax), abi::kSbiErrNotSupported);
    EXPECT_EQ(r.output.rbx.value_or(99), 0u);
  }
  EXPECT_EQ(table->unknown_calls(Transport::kSbi), std::size(calls));
  EXPECT_EQ(table->unknown_calls(Transport::kKvm), 0u);
  EXPECT_TRUE(backend.kicks.empty());
  // Only the low 32 bits of a7/a6 are the EID/FID, as on RV32/RV64 SBI.
  const auto r = table->dispatch(Transport::kSbi,
                                 sbi_call((std::uint64_t{1} << 32) | abi::kSbiExtPvlock, std::uint64_t{1} << 32, 2));
  EXPECT_TRUE(r.known);
  EXPECT_EQ(r.number, HypercallTable::sbi_number(abi::kSbiExtPvlock, 0));
}

TEST(HypercallTableSbi, PvlockOffIsNotSupportedAndKicksNobody) {
  UserspaceBackend backend(3, BackendOptions{});
  auto table = make_pv_hypercall_table(backend, config(true, /*sbi=*/false), apic_to_index);
  for (const std::uint32_t eid : {abi::kSbiExtPvlock, abi::kSbiExtPvlockLegacy, kAlias}) {
    const auto r = table->dispatch(Transport::kSbi, sbi_call(eid, abi::kSbiPvlockKickCpu, 2));
    EXPECT_EQ(as_signed(r.output.rax), abi::kSbiErrNotSupported);
    EXPECT_EQ(r.output.rbx.value_or(99), 0u);
  }
  EXPECT_EQ(backend.counters(0).kicks_sent.load(), 0u);
  EXPECT_FALSE(backend.kick_pending(1));
}

TEST(HypercallTableSbi, PvOffDoesNotTouchSbi) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(/*pv=*/false, true), apic_to_index);
  EXPECT_EQ(as_signed(table->dispatch(Transport::kSbi, sbi_call(abi::kSbiExtPvlock, 0, 2)).output.rax),
            abi::kSbiSuccess);
  EXPECT_EQ(backend.kicks.size(), 1u);
}

// ---------------------------------------------------------------- registration

TEST(HypercallTableRegistration, EachNumberRegisteredExactlyOnce) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, config(), apic_to_index);
  EXPECT_EQ(table->size(), 9u);  // 5 KVM + PROBE + KICK at 3 EIDs
  for (const std::uint64_t nr : {abi::kHcKickCpu, abi::kHcHalt, abi::kHcHaltFor, abi::kHcQueryHalted, abi::kHcSchedYield})
    EXPECT_TRUE(table->registered(Transport::kKvm, nr));
  EXPECT_TRUE(table->registered(Transport::kSbi,
                                HypercallTable::sbi_number(abi::kSbiExtBase, abi::kSbiBaseProbeExtension)));
  for (const std::uint32_t eid : {abi::kSbiExtPvlock, abi::kSbiExtPvlockLegacy, kAlias})
    EXPECT_TRUE(table->registered(Transport::kSbi, HypercallTable::sbi_number(eid, abi::kSbiPvlockKickCpu)));
  // Transports are separate name spaces.
  EXPECT_FALSE(table->registered(Transport::kSbi, abi::kHcKickCpu));
  const auto noop = [](const HypercallInput&) { return HypercallOutput{}; };
  for (const std::uint64_t nr : {abi::kHcKickCpu, abi::kHcHalt, abi::kHcHaltFor, abi::kHcQueryHalted, abi::kHcSchedYield})
    EXPECT_THROW(table->register_handler(Transport::kKvm, nr, noop), std::logic_error);
  EXPECT_THROW(table->register_handler(Transport::kSbi, HypercallTable::sbi_number(kAlias, abi::kSbiPvlockKickCpu), noop),
               std::logic_error);
  EXPECT_EQ(table->size(), 9u);
}

TEST(HypercallTableRegistration, RegisteringTwiceFailsAndKeepsTheFirst) {
  HypercallTable table;
  table.register_handler(Transport::kKvm, 42, [](const HypercallInput&) { return HypercallOutput{1, std::nullopt, false}; });
  EXPECT_THROW(table.register_handler(Transport::kKvm, 42,
                                      [](const HypercallInput&) { return HypercallOutput{2, std::nullopt, false}; }),
               std::logic_error);
  EXPECT_NO_THROW(table.register_handler(Transport::kSbi, 42, [](const HypercallInput&) { return HypercallOutput{}; }));
  EXPECT_THROW(table.register_handler(Transport::kKvm, 43, HypercallTable::Handler{}), std::logic_error);
  EXPECT_EQ(table.dispatch(Transport::kKvm, HypercallInput{42, 0, 0, 0, 0, 0}).output.rax, 1u);
  EXPECT_EQ(table.size(), 2u);
}

TEST(HypercallTableRegistration, AliasEqualToAFixedEidIsRegisteredOnce) {
  FakeBackend backend(3);
  auto table = make_pv_hypercall_table(backend, {true, true, abi::kSbiExtPvlock}, apic_to_index);
  EXPECT_EQ(table->size(), 8u);
}

}  // namespace
}  // namespace lockvisor::pvlock
