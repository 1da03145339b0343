// The run-state page wired into the VMM (docs/runstate.md): boots
// the guest's `runstate` program (guest/programs/runstate.cpp) and checks
// what the guest read from the page against what the host counted.
//
// Label "kvm" (boots guests). The page needs BPF (root, kernel BTF): without
// it the live-page test skips with the reason, except with CI=true, where it
// fails. The off and read-only tests need only KVM; the "on fails" test needs
// root (it drops the BPF privilege in a child).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "tests/support/ci_required.h"
#include "tests/support/kvm_required.h"
#include "tests/support/run_failure.h"
#include "vmm/guest_image.h"
#include "vmm/machine/machine.h"
#include "vmm/report/run_report.h"
#include "vmm/runstate/runstate_page.h"
#include "vmm/runstate/runstate_pool.h"

namespace lockvisor::machine {
namespace {

MachineConfig runstate_config(unsigned vcpus, const std::string& args, RunStateMode mode) {
  MachineConfig config;
  config.vcpus = vcpus;
  config.program = "runstate";
  config.args = args;
  config.runstate = mode;
  config.echo_guest_prints = false;
  config.capture_serial = true;
  config.timeout_s = 60;
  return config;
}

RunResult run(const kvm::KvmSystem& kvm, MachineConfig config) {
  Machine vm(kvm, std::move(config), embedded_guest_image());
  return vm.run();
}

// Runs `config` (--runstate on); nullopt with the reason in `why` when the
// page cannot be published here.
std::optional<RunResult> run_with_page(const kvm::KvmSystem& kvm, const MachineConfig& config, std::string& why) {
  try {
    return run(kvm, config);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

// Declares `const RunResult& name`, a completed run with a live page; skips
// the test with the reason when the page cannot load (fails with CI=true).
#define LOCKVISOR_RUN_WITH_PAGE(name, kvm, config)                                                  \
  std::string name##_why_;                                                                         \
  const std::optional<RunResult> name##_ran_ = run_with_page(kvm, config, name##_why_);            \
  if (!name##_ran_) {                                                                              \
    if (test::in_ci()) FAIL() << "the run-state page must be live in CI (CI=true): " << name##_why_; \
    GTEST_SKIP() << "the run-state page cannot load here: " << name##_why_;                        \
  }                                                                                                \
  const RunResult& name = *name##_ran_;                                                            \
  ASSERT_EQ(name.outcome, Outcome::kCompleted) << test::run_failure(name);                         \
  ASSERT_EQ(name.runstate, "bpf") << name.runstate_detail

std::uint64_t value(const RunResult& r, unsigned vcpu, const char* key) {
  const ResultValue* v = r.result(vcpu, key);
  if (v == nullptr || v->values.size() != 1) {
    ADD_FAILURE() << "vCPU " << vcpu << " reported no " << key;
    return 0;
  }
  return v->values[0];
}

// Several vCPUs pinned to one host CPU spin for 0.5 s at CPL3: the host
// preempts them round-robin, and the page must say so, exactly. With
// --runstate on the page is live from the first guest instruction, so the
// whole window counts however long the program takes to load (under
// --runstate auto it arrives when the load ends, and the guest reads
// "unknown" until then).
TEST(RunStateMachine, PinnedVcpusPageCountsEqualInvoluntarySwitches) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  for (const unsigned vcpus : {2u, 4u}) {
    SCOPED_TRACE(fmt::format("{} vCPUs on host CPU 0", vcpus));
    auto config = runstate_config(vcpus, "ms=500", RunStateMode::kOn);
    config.pcpus = {0};
    LOCKVISOR_RUN_WITH_PAGE(r, *kvm, config);
    const auto json = report::run_to_json(r, config);
    EXPECT_EQ(json["runstate"], "bpf");
    EXPECT_EQ(json["vcpus"][0]["runstate"]["preemptions"], r.vcpus[0].runstate->preemptions);
    for (const auto& v : r.vcpus) {
      SCOPED_TRACE(fmt::format("vCPU {}", v.index));
      ASSERT_TRUE(v.runstate.has_value());
      const auto& c = *v.runstate;
      std::printf("[ measured ] %u vCPUs, vCPU %u: page preemptions %llu (record %llu), involuntary switches %llu, sleeps %llu, "
                  "runs %llu, missed switches %llu; guest: %llu samples, own slot running %llu / unknown %llu / "
                  "other %llu, peers seen preempted %llu, running %llu, own preemptions read %llu\n",
                  vcpus, v.index, static_cast<unsigned long long>(c.preemptions),
                  static_cast<unsigned long long>(c.record_preemptions),
                  static_cast<unsigned long long>(c.involuntary_switches), static_cast<unsigned long long>(c.sleeps),
                  static_cast<unsigned long long>(c.runs), static_cast<unsigned long long>(c.anomalies),
                  static_cast<unsigned long long>(value(r, v.index, "samples")),
                  static_cast<unsigned long long>(value(r, v.index, "self_running")),
                  static_cast<unsigned long long>(value(r, v.index, "self_unknown")),
                  static_cast<unsigned long long>(value(r, v.index, "self_other")),
                  static_cast<unsigned long long>(value(r, v.index, "peer_preempted")),
                  static_cast<unsigned long long>(value(r, v.index, "peer_running")),
                  static_cast<unsigned long long>(value(r, v.index, "own_preemptions")));
      // Exact: both counts are sampled on the vCPU thread between two equal
      // seq reads of its record (vcpu_runner.cpp), as in tests/runstate's
      // thread experiment, where they never differed.
      EXPECT_EQ(c.preemptions, c.involuntary_switches);
      EXPECT_GT(c.preemptions, 0u) << "spinning vCPUs sharing one CPU were never preempted";
      EXPECT_EQ(value(r, v.index, "live"), 1u);
      // While it runs, the guest reads its own slot as "running"; a missed
      // switch-in (anomalies) can leave it "preempted" for up to one slice.
      const std::uint64_t samples = value(r, v.index, "samples");
      EXPECT_GT(value(r, v.index, "self_running"), samples / 2);
      EXPECT_GT(value(r, v.index, "peer_preempted"), 0u) << "never saw a peer preempted";
      // The guest reads its record, which counts from the thread's
      // registration; the host's delta starts at the first sample after it,
      // so a switch in between is in the record and not in the delta.
      EXPECT_GE(c.record_preemptions, c.preemptions);
      EXPECT_LE(value(r, v.index, "own_preemptions"), c.record_preemptions);
    }
  }
}

// The page comes after the guest started (runstate_loader.h): the guest
// first reads the zeros, then the live page at the same address, and never
// a record the host did not write for this run. Three runs: four vCPUs
// leave records 0..3 of a pooled page written; two vCPUs then lease a
// pooled program (records 2..63 must read zeros throughout); and two vCPUs
// with no pool load their own program (a cold load, tens of milliseconds
// after the first guest instruction here). Each vCPU thread registers late
// and still counts exactly.
TEST(RunStateMachine, PageArrivingAfterBootIsNeverMisread) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  struct Case {
    const char* name;
    unsigned vcpus;
    bool pooled;
  };
  for (const Case c : {Case{"pooled, 4 vCPUs", 4, true}, Case{"pooled, 2 vCPUs", 2, true},
                       Case{"cold, 2 vCPUs", 2, false}}) {
    SCOPED_TRACE(c.name);
    if (!c.pooled) ::setenv(runstate::kPoolVariable, "off", 1);
    // The guest goes on until it has seen its own record "running": a cold
    // load on a loaded host can take longer than any fixed spin.
    auto config = runstate_config(c.vcpus, "ms=300 until_live=1", RunStateMode::kAuto);
    config.pcpus = {0};
    const RunResult r = run(*kvm, config);
    ::unsetenv(runstate::kPoolVariable);
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
    if (r.runstate != "bpf") {
      if (test::in_ci()) FAIL() << "the run-state page must be live in CI (CI=true): " << r.runstate_detail;
      GTEST_SKIP() << "the run-state page cannot load here: " << r.runstate_detail;
    }
    ASSERT_GT(r.startup.runstate_live, 0.0) << "a live page has a publication time";
    std::printf("[ measured ] %s: first guest instruction %.2f ms, page live %.2f ms after the start\n", c.name,
                r.seconds_to_first_entry * 1e3, r.startup.runstate_live * 1e3);
    EXPECT_EQ(value(r, 0, "foreign_reads"), 0u) << "a record past the last vCPU read non-zero";
    for (const auto& v : r.vcpus) {
      SCOPED_TRACE(fmt::format("vCPU {}", v.index));
      EXPECT_EQ(value(r, v.index, "live"), 1u);
      ASSERT_TRUE(v.runstate.has_value()) << "the vCPU thread never registered";
      EXPECT_EQ(v.runstate->preemptions, v.runstate->involuntary_switches);
      EXPECT_GT(value(r, v.index, "self_running"), 0u) << "the live page never reached the guest";
    }
  }
}

// As many vCPUs as a VM may have, all on host CPU 0: every vCPU finds its
// own record (the ones past the first page included) and sees it "running".
TEST(RunStateMachine, EveryVcpuOfTheLargestVmFindsItsRecord) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = runstate_config(abi::kMaxVcpus, "ms=300 until_live=1", RunStateMode::kOn);
  config.pcpus = {0};
  // Their stacks need more than the default --memory.
  config.memory_mib = std::max(config.memory_mib, minimum_memory_mib(abi::kMaxVcpus, embedded_guest_image()));
  LOCKVISOR_RUN_WITH_PAGE(r, *kvm, config);
  ASSERT_EQ(r.vcpus.size(), abi::kMaxVcpus);
  EXPECT_EQ(value(r, 0, "foreign_reads"), 0u);
  for (const auto& v : r.vcpus) {
    SCOPED_TRACE(fmt::format("vCPU {}", v.index));
    EXPECT_EQ(value(r, v.index, "live"), 1u);
    ASSERT_TRUE(v.runstate.has_value()) << "the vCPU thread never registered";
    EXPECT_GT(value(r, v.index, "self_running"), 0u) << "the guest never read its own record as running";
  }
}

// --runstate off: a page of zeros, every slot "unknown" from the guest.
TEST(RunStateMachine, OffReadsUnknownForEveryVcpu) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = runstate_config(3, "ms=100", RunStateMode::kOff);
  config.pcpus = {0};
  const RunResult r = run(*kvm, config);
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  EXPECT_EQ(r.runstate, "unknown");
  EXPECT_EQ(r.runstate_detail, "--runstate off");
  for (const auto& v : r.vcpus) {
    SCOPED_TRACE(fmt::format("vCPU {}", v.index));
    EXPECT_FALSE(v.runstate.has_value());
    EXPECT_EQ(value(r, v.index, "live"), 0u);
    EXPECT_EQ(value(r, v.index, "self_running"), 0u);
    EXPECT_EQ(value(r, v.index, "self_other"), 0u);
    EXPECT_EQ(value(r, v.index, "self_unknown"), value(r, v.index, "samples"));
    EXPECT_EQ(value(r, v.index, "peer_preempted"), 0u);
    EXPECT_EQ(value(r, v.index, "peer_running"), 0u);
    EXPECT_EQ(value(r, v.index, "own_preemptions"), 0u);
  }
  EXPECT_EQ(value(r, 0, "nonzero_words"), 0u);
  const auto json = report::run_to_json(r, config);
  EXPECT_EQ(json["runstate"], "unknown");
  EXPECT_EQ(json["runstate_detail"], "--runstate off");
  EXPECT_TRUE(json["vcpus"][0]["runstate"].is_null());
}

// --runstate on fails with the reason when the page cannot be published:
// here because the process has no BPF privilege (a root test drops it in a
// child by becoming nobody; the KVM device stays open). --runstate auto with
// the same VM runs, with a page of "unknown".
TEST(RunStateMachine, OnFailsAsAHostErrorWhenThePageCannotBePublished) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  if (::geteuid() != 0) LOCKVISOR_SKIP_OUTSIDE_CI("needs root, to drop the BPF privilege in a child");
  auto config = runstate_config(4, "ms=1", RunStateMode::kOn);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(20);
    try {
      Machine vm(*kvm, config, embedded_guest_image());
      ::_exit(10);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kHost) ::_exit(11);
      if (std::string(e.what()).find("--runstate on: the vCPU run-state page cannot be published: ") ==
          std::string::npos)
        ::_exit(12);
    }
    config.runstate = RunStateMode::kAuto;
    const RunResult r = run(*kvm, config);
    if (r.outcome != Outcome::kCompleted) ::_exit(13);
    if (r.runstate != "unknown") ::_exit(14);
    if (value(r, 3, "self_unknown") != value(r, 3, "samples")) ::_exit(15);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: on built a VM without the page, 11: not a host error, 12: another "
                                       "message, 13: auto did not complete, 14: auto had a page, 15: a read was "
                                       "not unknown, 20: could not drop privilege";
}

// A guest write to the page (after making its own PTE writable) is dropped by
// the read-only memslot and ends the run as a guest fault naming the page.
TEST(RunStateMachine, GuestWriteToThePageIsAGuestFault) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  for (const auto mode : {RunStateMode::kAuto, RunStateMode::kOff}) {
    const RunResult r = run(*kvm, runstate_config(1, "mode=write", mode));
    EXPECT_EQ(r.outcome, Outcome::kGuestFault) << r.reason;
    EXPECT_NE(r.reason.find("MMIO write of 4 bytes at GPA 0x100000004: the vCPU run-state page is read-only"),
              std::string::npos)
        << r.reason;
    EXPECT_TRUE(r.guest_prints.empty());
  }
}

}  // namespace
}  // namespace lockvisor::machine
