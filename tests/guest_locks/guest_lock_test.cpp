// Every lock of the registry inside a real guest: torture at 1:1, 2:1, 4:1
// and 8:1 overcommit (vCPUs : host CPUs) with zero mutual-exclusion
// violations, and an uncontended run that makes no exit to the VMM at all
// (no hypercall, no halt) while it is measured.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>

#include "locks/registry.h"
#include "tests/guest_locks/workload_config.h"
#include "tests/support/ci_required.h"
#include "tests/support/kvm_required.h"
#include "tests/support/run_failure.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/util/error.h"

namespace lockvisor {
namespace {

struct Ratio {
  const char* name;
  unsigned vcpus;
  unsigned pcpus;
};
constexpr Ratio kRatios[] = {{"1to1", 2, 2}, {"2to1", 4, 2}, {"4to1", 4, 1}, {"8to1", 8, 1}};

std::vector<std::string> lock_names() {
  std::vector<std::string> names;
  for (const auto& l : locks::kLocks) names.push_back(l.name);
  return names;
}

machine::RunResult boot(const kvm::KvmSystem& kvm, machine::MachineConfig config) {
  config.echo_guest_prints = false;
  config.timeout_s = 300;
  machine::Machine vm(kvm, config, embedded_guest_image());
  return vm.run();
}

class GuestLock : public ::testing::TestWithParam<std::string> {};

TEST_P(GuestLock, TortureHasNoViolationsAtEveryOvercommit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto allowed = host::allowed_cpus();
  for (const auto& ratio : kRatios) {
    SCOPED_TRACE(ratio.name);
    machine::MachineConfig config;
    config.vcpus = ratio.vcpus;
    config.program = "torture";
    auto& p = test::set_workload(config, abi::WorkloadKind::kTorture, GetParam().c_str());
    p.duration_ns = 300'000'000;
    p.nlocks = 4;
    p.cs_ns = 200;
    p.delay_ns = 170;
    p.long_hold_ns = 50000;
    p.long_hold_every = 500;
    config.pcpus.assign(allowed.begin(), allowed.begin() + std::min<std::size_t>(ratio.pcpus, allowed.size()));
    p.cpus = config.vcpus;
    const auto run = boot(*kvm, config);
    ASSERT_EQ(run.outcome, machine::Outcome::kCompleted) << test::run_failure(run);
    std::uint64_t ops = 0, violations = 0, guest_kicks = 0;
    for (const auto& s : lockstat::workload_stats_from(run)) {
      ops += s.ops;
      violations += s.violations;
      guest_kicks += s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_kick)];
    }
    EXPECT_EQ(violations, 0u);
    EXPECT_GT(ops, 0u);
    std::uint64_t vmm_kicks = 0;
    for (unsigned i = 0; i < run.vcpus.size(); ++i) vmm_kicks += run.pv(i).kicks_sent;
    EXPECT_EQ(guest_kicks, vmm_kicks) << "every guest pv_kick must be one KICK_CPU the VMM saw";
  }
}

// 8 vCPUs on 2 host CPUs in 2 virtual nodes (--vnuma 2: vCPUs 0-3 on the
// first CPU, 4-7 on the second) with the modelled remote cost on: the
// NUMA-aware locks reorder their queues by node, the others must not care.
TEST_P(GuestLock, TortureHasNoViolationsOnTwoVirtualNodes) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto allowed = host::allowed_cpus();
  if (allowed.size() < 2) LOCKVISOR_SKIP_OUTSIDE_CI("needs two allowed host CPUs");
  machine::MachineConfig config;
  config.vcpus = 8;
  config.program = "torture";
  auto& p = test::set_workload(config, abi::WorkloadKind::kTorture, GetParam().c_str());
  p.duration_ns = 300'000'000;
  p.nlocks = 2;
  p.cs_ns = 200;
  p.delay_ns = 170;
  p.long_hold_ns = 50000;
  p.long_hold_every = 500;
  config.vnuma = machine::parse_vnuma("2", config.vcpus, {allowed[0], allowed[1]}, true);
  config.vnuma_remote_ns = 1000;
  const auto run = boot(*kvm, config);
  ASSERT_EQ(run.outcome, machine::Outcome::kCompleted) << test::run_failure(run);
  std::uint64_t ops = 0, violations = 0, guest_kicks = 0, local = 0, handoffs = 0, within = 0, across = 0;
  for (const auto& s : lockstat::workload_stats_from(run)) {
    ops += s.ops;
    violations += s.violations;
    guest_kicks += s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_kick)];
    local += s.lock_events[static_cast<unsigned>(locks::LockEvent::numa_local_pass)];
    handoffs += s.handoffs_local + s.handoffs_remote + s.handoffs_self;
    within += s.handoffs_local;
    across += s.handoffs_remote;
  }
  EXPECT_EQ(violations, 0u);
  EXPECT_GT(ops, 0u);
  // Every acquisition but each lock's first is a handoff of one kind.
  EXPECT_GE(ops - handoffs, 1u);
  EXPECT_LE(ops - handoffs, p.nlocks);
  std::uint64_t vmm_kicks = 0;
  for (unsigned i = 0; i < run.vcpus.size(); ++i) vmm_kicks += run.pv(i).kicks_sent;
  EXPECT_EQ(guest_kicks, vmm_kicks) << "every guest pv_kick must be one KICK_CPU the VMM saw";
  std::printf("[ measured ] %s, 8 vCPUs / 2 host CPUs / 2 virtual nodes, modelled remote 1 us: %llu ops, "
              "%llu same-node passes, handoffs %llu within / %llu across nodes\n",
              GetParam().c_str(), static_cast<unsigned long long>(ops), static_cast<unsigned long long>(local),
              static_cast<unsigned long long>(within), static_cast<unsigned long long>(across));
}

TEST_P(GuestLock, UncontendedPathMakesNoExit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  machine::MachineConfig config;
  config.vcpus = 2;
  config.program = "uncontended";
  test::set_workload(config, abi::WorkloadKind::kUncontended, GetParam().c_str()).iterations = 100000;
  const auto run = boot(*kvm, config);
  ASSERT_EQ(run.outcome, machine::Outcome::kCompleted) << test::run_failure(run);
  const auto stats = lockstat::workload_stats_from(run);
  EXPECT_EQ(stats[0].ops, 100000u);
  EXPECT_EQ(stats[1].ops, 0u);
  for (unsigned i = 0; i < run.vcpus.size(); ++i) {
    EXPECT_EQ(run.pv(i).halts, 0u);
    EXPECT_EQ(run.pv(i).kicks_sent, 0u);
    // The only exits: the two window marks (outside the timed loop),
    // reporting the stats array and DONE.
    const auto& exits = run.vcpus[i].exits;
    EXPECT_EQ(exits.count("hypercall"), 0u);
    EXPECT_LE(exits.at("ucall"), 4u);
  }
}

// Negative control: the broken lock must be caught inside the guest too.
TEST(GuestLockControl, BustedLockViolationsAreDetected) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  machine::MachineConfig config;
  config.vcpus = 4;
  config.program = "torture";
  auto& p = test::set_workload(config, abi::WorkloadKind::kTorture, "busted");
  p.duration_ns = 1'000'000'000;
  p.nlocks = 1;
  p.cs_ns = 20000;
  p.delay_ns = 0;
  // Two CPUs must pass the check within one window together, which is
  // likely, not certain, within a second (busted.h): up to three runs, until
  // one has a violation. Every run completes: the checker reports, it does
  // not stop the program.
  std::uint64_t violations = 0;
  for (int attempt = 0; attempt < 3 && violations == 0; ++attempt) {
    const auto run = boot(*kvm, config);
    ASSERT_EQ(run.outcome, machine::Outcome::kCompleted) << test::run_failure(run);
    for (const auto& s : lockstat::workload_stats_from(run)) violations += s.violations;
  }
  EXPECT_GT(violations, 0u) << "the broken lock was never caught, in three runs";
}

// pvbounded says which release its settings gave it (pvb_store_release,
// pvbounded.h "HOW A RESERVED HEAD WAITS"): a plain store by default, where
// its reserved heads halt with the doorbell's limit (HALT_FOR), and with
// heads that only spin; a read-modify-write with heads that halt until
// kicked. Each excludes at 4 vCPUs on one CPU, where heads halt.
TEST(GuestLockControl, PvboundedReportsWhetherItsReleaseIsAStore) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const std::pair<const char*, std::uint64_t> cases[] = {{"", 1}, {"pvb_head_halt=kicked", 0}, {"pvb_head_halt=spin", 1}};
  for (const auto& [args, store] : cases) {
    SCOPED_TRACE(args);
    machine::MachineConfig config;
    config.vcpus = 4;
    config.pcpus = {host::allowed_cpus().at(0)};
    config.program = "torture";
    config.args = args;
    test::set_workload(config, abi::WorkloadKind::kTorture, "pvbounded").duration_ns = 300'000'000;
    const auto run = boot(*kvm, config);
    ASSERT_EQ(run.outcome, machine::Outcome::kCompleted) << test::run_failure(run);
    const auto* reported = run.result(0, "pvb_store_release");
    ASSERT_NE(reported, nullptr) << "vCPU 0 did not report pvb_store_release";
    EXPECT_EQ(reported->values, std::vector<std::uint64_t>{store});
    std::uint64_t violations = 0;
    for (const auto& s : lockstat::workload_stats_from(run)) violations += s.violations;
    EXPECT_EQ(violations, 0u);
  }
}

// pvbounded's word names the queue head's CPU: in a VM of 320 vCPUs on two
// host CPUs, every vCPU takes the lock a fixed number of times (20), every
// fifth hold long enough (50 us) that a vCPU beside the holder gives up
// stealing and queues; so vCPUs numbered above what a byte could name head
// the queue and take the lock from it, with mutual exclusion intact.  (Every
// CPU number up to the VM's limit: PvBounded.ExcludesAndQueuesAcrossEveryCpuNumber,
// on host threads; 320 keeps this run short in the nested machine.)
TEST(GuestLockControl, PvboundedQueuesVcpusAboveAByte) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto allowed = host::allowed_cpus();
  if (allowed.size() < 2) LOCKVISOR_SKIP_OUTSIDE_CI("needs two allowed host CPUs");
  machine::MachineConfig config;
  config.vcpus = 320;
  config.pcpus = {allowed[0], allowed[1]};
  config.memory_mib = std::max(config.memory_mib, machine::minimum_memory_mib(config.vcpus, embedded_guest_image()));
  config.program = "torture";
  auto& p = test::set_workload(config, abi::WorkloadKind::kTorture, "pvbounded");
  p.iterations = 20;
  p.long_hold_ns = 50000;
  p.long_hold_every = 5;
  p.cpus = config.vcpus;
  const auto run = boot(*kvm, config);
  ASSERT_EQ(run.outcome, machine::Outcome::kCompleted) << test::run_failure(run);
  std::uint64_t ops = 0, violations = 0, high_heads = 0;
  const auto stats = lockstat::workload_stats_from(run);
  for (std::size_t v = 0; v < stats.size(); ++v) {
    const auto& s = stats[v];
    ops += s.ops;
    violations += s.violations;
    if (v >= 256)
      high_heads += s.lock_events[static_cast<unsigned>(locks::LockEvent::lock_queue)] +
                    s.lock_events[static_cast<unsigned>(locks::LockEvent::pv_reserved)];
  }
  EXPECT_EQ(violations, 0u);
  EXPECT_EQ(ops, std::uint64_t{config.vcpus} * p.iterations) << "every vCPU finished its acquisitions";
  EXPECT_GT(high_heads, 0u) << "no vCPU above 255 took the lock as the queue head";
  std::printf("[ measured ] pvbounded, %u vCPUs on 2 host CPUs: %llu acquisitions from the queue head by vCPUs 256 and up\n",
              config.vcpus, static_cast<unsigned long long>(high_heads));
}

// The lock programs take their parameters only from BootInfo::workload: a
// run without the record fails with one clear guest report, not with
// defaults; text arguments are not read.
TEST(GuestLockControl, NoBinaryParametersIsAClearGuestFailure) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  machine::MachineConfig config;
  config.vcpus = 2;
  config.program = "lockbench";
  config.args = "lock=ticket duration_ms=10";
  const auto run = boot(*kvm, config);
  EXPECT_EQ(run.outcome, machine::Outcome::kGuestFailed) << run.reason;
  EXPECT_NE(run.reason.find("no workload parameters"), std::string::npos) << run.reason;
}

// A record the host would never write (a field outside the range its
// options share with the guest, lockvisor/abi/workload_limits.h) is refused
// by the guest, naming the field, its value and the range.
TEST(GuestLockControl, OutOfRangeParametersAreAClearGuestFailure) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  machine::MachineConfig config;
  config.vcpus = 2;
  config.program = "lockbench";
  test::set_workload(config, abi::WorkloadKind::kLockbench, "ticket").delay_ns = abi::kDelayNs.max + 1;
  const auto run = boot(*kvm, config);
  EXPECT_EQ(run.outcome, machine::Outcome::kGuestFailed) << run.reason;
  EXPECT_NE(run.reason.find("delay_ns 1000000001 is out of range 0..1000000000"), std::string::npos) << run.reason;
}

TEST(GuestLockControl, ParametersForAnotherVcpuCountAreRefusedBeforeBoot) {
  machine::MachineConfig config;
  config.vcpus = 2;
  config.program = "lockbench";
  test::set_workload(config, abi::WorkloadKind::kLockbench, "ticket").cpus = 3;
  EXPECT_THROW(machine::validate_config(config), Error);
}

INSTANTIATE_TEST_SUITE_P(Registry, GuestLock, ::testing::ValuesIn(lock_names()), [](const auto& info) {
  std::string name = info.param;
  for (auto& c : name)
    if (c == '-') c = '_';
  return name;
});

}  // namespace
}  // namespace lockvisor
