// The Linux case group (`lockvisor conformance --linux`) without KVM: its
// case table, its checks against hand-written run reports (data/linux/),
// its verdicts on child runs, and the command's refusals, which come before
// anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/command_output.h"
#include "vmm/conformance/linux_cases.h"
#include "vmm/kvm/kvm_system.h"

namespace lockvisor::conformance {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const LinuxKernels kKernels{"/k/amd64", "/k/cloud-amd64", "/scratch/truncated"};

const LinuxCase& find_case(const std::vector<LinuxCase>& cases, const std::string& name) {
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

json report(const std::string& file) {
  std::ifstream in(std::string(LOCKVISOR_CONFORMANCE_TEST_DATA) + "/linux/" + file);
  EXPECT_TRUE(in) << file;
  return json::parse(in);
}

bool has_args(const LinuxCase& c, const std::vector<std::string>& wanted) {
  return std::search(c.args.begin(), c.args.end(), wanted.begin(), wanted.end()) != c.args.end();
}

TEST(LinuxConformanceCases, TheSixCasesInOrder) {
  const auto cases = linux_cases(kKernels);
  std::vector<std::string> names;
  for (const auto& c : cases) {
    names.push_back(c.name);
    EXPECT_FALSE(c.summary.empty()) << c.name;
    EXPECT_LE(c.name.size(), 34u) << c.name << ": wider than the name column";
    EXPECT_TRUE(c.not_applicable.empty()) << c.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pv-4-on-1-kicks-and-halts", "tas-when-pv-unhalt-hidden",
                                             "native-with-realtime-hint", "cloud-kernel-every-cpu-online",
                                             "truncated-kernel-refused", "never-reaches-init-times-out",
                                             "unmountable-root-is-a-kernel-panic"}));
}

TEST(LinuxConformanceCases, WhatEachCaseRuns) {
  const auto cases = linux_cases(kKernels);
  const auto& pv = find_case(cases, "pv-4-on-1-kicks-and-halts");
  EXPECT_TRUE(has_args(pv, {"--kernel", "/k/amd64", "--vcpus", "4", "--pcpus", "0", "--guest-lock", "pv"}));
  EXPECT_TRUE(has_args(pv, {"--workload", "futex-hash"}));
  EXPECT_EQ(pv.expected_exit, 0);
  EXPECT_TRUE(pv.check);
  EXPECT_TRUE(has_args(find_case(cases, "tas-when-pv-unhalt-hidden"), {"--guest-lock", "tas"}));
  EXPECT_TRUE(has_args(find_case(cases, "native-with-realtime-hint"), {"--guest-lock", "native"}));
  const auto& cloud = find_case(cases, "cloud-kernel-every-cpu-online");
  EXPECT_TRUE(has_args(cloud, {"--kernel", "/k/cloud-amd64", "--vcpus", "4"}));
  const auto& truncated = find_case(cases, "truncated-kernel-refused");
  EXPECT_TRUE(has_args(truncated, {"--kernel", "/scratch/truncated"}));
  EXPECT_EQ(truncated.expected_exit, 2);
  EXPECT_FALSE(truncated.check);
  EXPECT_TRUE(truncated.prepare);
  const auto& never = find_case(cases, "never-reaches-init-times-out");
  EXPECT_TRUE(has_args(never, {"--append", "rdinit=/nonexistent panic=0", "--timeout", "20"}));
  EXPECT_EQ(never.expected_exit, 4);
  EXPECT_FALSE(never.check);
  const auto& panic = find_case(cases, "unmountable-root-is-a-kernel-panic");
  EXPECT_TRUE(has_args(panic, {"--append", "rdinit=/nonexistent", "--timeout", "60"}));
  EXPECT_EQ(panic.expected_exit, 3);
  ASSERT_TRUE(panic.check);
  // Its check reads the outcome's name and the panic line of the report.
  const json panicked = {{"outcome", "kernel-panic"},
                         {"vm", {{"reason", "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"}}},
                         {"linux", {{"kernel_end", {{"kind", "kernel-panic"},
                                                    {"line", "Kernel panic - not syncing: VFS: Unable to mount root fs on "
                                                             "unknown-block(0,0)"}}}}}};
  EXPECT_FALSE(panic.check(panicked));
  json reset = panicked;
  reset["outcome"] = "completed";
  EXPECT_TRUE(panic.check(reset));
}

// Without --linux-cloud the cloud case is not applicable: reported so,
// never run and never passed.
TEST(LinuxConformanceCases, CloudCaseNotApplicableWithoutACloudKernel) {
  const auto cases = linux_cases({"/k/amd64", "", "/scratch/truncated"});
  const auto& cloud = find_case(cases, "cloud-kernel-every-cpu-online");
  EXPECT_NE(cloud.not_applicable.find("--linux-cloud"), std::string::npos);
  const auto result = run_linux_case(cloud, "/nonexistent/lockvisor", "/nonexistent", 1);
  EXPECT_FALSE(result.applicable);
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.reason, cloud.not_applicable);
}

// Each hand-written report against each case's check: "" when it must
// pass, otherwise the start of the reason it must fail with.
struct CheckRow {
  const char* file;
  const char* case_name;
  const char* failure;
};

void PrintTo(const CheckRow& row, std::ostream* os) {
  *os << row.file << " against " << row.case_name << (*row.failure ? ": fails" : ": passes");
}

class LinuxConformanceCheck : public ::testing::TestWithParam<CheckRow> {};

TEST_P(LinuxConformanceCheck, Report) {
  const auto& row = GetParam();
  const auto cases = linux_cases(kKernels);
  const auto& c = find_case(cases, row.case_name);
  ASSERT_TRUE(c.check);
  const auto verdict = c.check(report(row.file));
  if (std::string(row.failure).empty()) {
    EXPECT_FALSE(verdict) << *verdict;
  } else {
    ASSERT_TRUE(verdict) << row.file << " passed " << row.case_name;
    EXPECT_EQ(verdict->rfind(row.failure, 0), 0u) << *verdict;
    EXPECT_NE(verdict->find("guest_spinlock="), std::string::npos) << "the figures are missing: " << *verdict;
  }
}

constexpr CheckRow kCheckRows[] = {
    {"pv-4-cpus.json", "pv-4-on-1-kicks-and-halts", ""},
    {"pv-4-cpus.json", "cloud-kernel-every-cpu-online", ""},
    {"pv-no-halts.json", "pv-4-on-1-kicks-and-halts", "halt_exits: expected more than 0, reported 0"},
    {"pv-no-kicks.json", "pv-4-on-1-kicks-and-halts", "hypercalls: expected more than 0, reported 0"},
    {"pv-3-cpus.json", "pv-4-on-1-kicks-and-halts", "guest_cpus_online: expected 4, reported 3"},
    {"pv-no-ops.json", "pv-4-on-1-kicks-and-halts", "ops_per_sec: expected more than 0, reported -"},
    {"tas-2-cpus.json", "pv-4-on-1-kicks-and-halts", "guest_spinlock: expected pv, reported tas"},
    {"tas-2-cpus.json", "tas-when-pv-unhalt-hidden", ""},
    {"pv-4-cpus.json", "tas-when-pv-unhalt-hidden", "guest_spinlock: expected tas, reported pv"},
    {"tas-no-ops.json", "tas-when-pv-unhalt-hidden", "ops_per_sec: expected more than 0, reported 0"},
    {"native-2-cpus.json", "native-with-realtime-hint", ""},
    {"tas-2-cpus.json", "native-with-realtime-hint", "guest_spinlock: expected native, reported tas"},
    {"native-no-ops.json", "native-with-realtime-hint", "ops_per_sec: expected more than 0, reported -"},
    {"pv-3-cpus.json", "cloud-kernel-every-cpu-online", "guest_cpus_online: expected 4, reported 3"},
    {"unknown-lock-4-cpus.json", "cloud-kernel-every-cpu-online", "guest_spinlock: expected pv, reported unknown"},
};
INSTANTIATE_TEST_SUITE_P(Reports, LinuxConformanceCheck, ::testing::ValuesIn(kCheckRows),
                         [](const ::testing::TestParamInfo<CheckRow>& info) {
                           std::string name = std::to_string(info.index) + "_" + info.param.file;
                           for (auto& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(LinuxConformanceReport, FiguresAreTheReportsOrADash) {
  const std::string expected =
      "guest_spinlock=pv, guest_cpus_online=4, halt_exits=2500, hypercalls=25, ops_per_sec=294000";
  EXPECT_EQ(linux_figures_text(report("pv-4-cpus.json")), expected);
  EXPECT_EQ(linux_figures_text(json(nullptr)),
            "guest_spinlock=-, guest_cpus_online=-, halt_exits=-, hypercalls=-, ops_per_sec=-");
}

TEST(LinuxConformanceVerdict, ExitCodeReportAndTimeout) {
  const auto cases = linux_cases(kKernels);
  const auto& pv = find_case(cases, "pv-4-on-1-kicks-and-halts");
  const auto& truncated = find_case(cases, "truncated-kernel-refused");
  const auto& never = find_case(cases, "never-reaches-init-times-out");
  machine::ChildRun run;
  run.report = report("pv-4-cpus.json");
  EXPECT_FALSE(judge_linux_run(pv, run, 600));
  run.exit_code = 3;
  EXPECT_EQ(judge_linux_run(pv, run, 600), "exit code 3 (guest-fault), expected 0 (completed)");
  run.exit_code = 0;
  run.report = nullptr;
  EXPECT_EQ(judge_linux_run(pv, run, 600), "no --json report");
  // The exit-code cases need no report.
  run.exit_code = 2;
  EXPECT_FALSE(judge_linux_run(truncated, run, 600));
  run.exit_code = 0;
  EXPECT_EQ(judge_linux_run(truncated, run, 600), "exit code 0 (completed), expected 2 (usage-error)");
  run.exit_code = 4;
  EXPECT_FALSE(judge_linux_run(never, run, 600));
  run.timed_out = true;
  run.exit_code = 137;
  EXPECT_EQ(judge_linux_run(never, run, 600), "no end within 600 s: killed");
}

// The truncated case writes its kernel: the first 100000 bytes of --linux.
TEST(LinuxConformanceCases, TruncatedCopy) {
  const fs::path dir = fs::temp_directory_path() / "lockvisor-linux-cases-test";
  fs::create_directories(dir);
  const auto kernel = (dir / "kernel").string();
  std::ofstream(kernel, std::ios::binary) << std::string(150000, 'k');
  const auto cases = linux_cases({kernel, "", (dir / "truncated").string()});
  find_case(cases, "truncated-kernel-refused").prepare();
  EXPECT_EQ(fs::file_size(dir / "truncated"), 100000u);
  fs::remove_all(dir);
}

// ---- the command, through the built binary: nothing here boots ----

using Outcome = test::CommandOutput;

Outcome lockvisor(const std::string& args) { return test::run_command(std::string(LOCKVISOR_BINARY) + " " + args); }

void expect_one_line_error(const Outcome& o, const std::string& mention) {
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_EQ(o.output.rfind("lockvisor: error: ", 0), 0u) << o.output;
  EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << "more than one line: " << o.output;
  EXPECT_NE(o.output.find(mention), std::string::npos) << o.output;
}

class LinuxConformanceCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_);
    // No kernel: what the command checks before anything runs needs none,
    // and the one case run here expects this file to be refused.
    std::ofstream(not_a_kernel_, std::ios::binary) << std::string(4096, '\0');
  }
  void TearDown() override { fs::remove_all(dir_); }
  // One directory per test: ctest runs them side by side.
  const fs::path dir_ = fs::temp_directory_path() /
                        ("lockvisor-linux-conformance-" +
                         std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  const std::string not_a_kernel_ = (dir_ / "notakernel").string();
};

TEST_F(LinuxConformanceCommand, BadPathsAreOneLineBeforeAnythingRuns) {
  expect_one_line_error(lockvisor("conformance --linux /nonexistent/vmlinuz"), "--linux /nonexistent/vmlinuz");
  expect_one_line_error(lockvisor("conformance --linux " + dir_.string()), "is a directory");
  std::ofstream(dir_ / "empty");
  expect_one_line_error(lockvisor("conformance --linux " + (dir_ / "empty").string()), "empty");
  expect_one_line_error(lockvisor("conformance --linux ''"), "--linux: the value is empty");
  expect_one_line_error(lockvisor("conformance --linux " + not_a_kernel_ + " --linux-cloud /nonexistent/cloud"),
                        "--linux-cloud /nonexistent/cloud");
}

TEST_F(LinuxConformanceCommand, OptionsOfTheOtherGroupAreRefused) {
  expect_one_line_error(lockvisor("conformance --linux-cloud " + not_a_kernel_), "requires --linux");
  for (const std::string option : {"--backend kvm", "--image x", "--pingpong-rounds 5"})
    expect_one_line_error(lockvisor("conformance --linux " + not_a_kernel_ + " " + option), "excludes");
  expect_one_line_error(lockvisor("conformance --linux " + not_a_kernel_ + " --filter no-such-case"),
                        "matches no case");
  expect_one_line_error(lockvisor("conformance --linux " + not_a_kernel_ + " --json " + dir_.string()), "--json");
}

TEST_F(LinuxConformanceCommand, ListsTheLinuxCases) {
  const auto o = lockvisor("conformance --linux " + not_a_kernel_ + " --list");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  for (const auto& c : linux_cases(kKernels)) EXPECT_NE(o.output.find(c.name + " "), std::string::npos) << o.output;
  EXPECT_EQ(std::count(o.output.begin(), o.output.end(), '\n'), static_cast<std::ptrdiff_t>(linux_cases(kKernels).size()))
      << o.output;
  // And not the freestanding ones.
  EXPECT_EQ(o.output.find("pingpong"), std::string::npos) << o.output;
}

// On PVM the group is refused, with run --kernel's sentence; elsewhere the
// one case that boots nothing runs (the child refuses the file; no KVM).
TEST_F(LinuxConformanceCommand, RefusedOnPvmElseTheTruncatedCaseRuns) {
  const auto json_path = dir_ / "c.json";
  const auto o = lockvisor("conformance --linux " + not_a_kernel_ + " --filter truncated --json " + json_path.string());
  if (kvm::detect_backend() == kvm::Backend::kPvm) {
    expect_one_line_error(o, "--linux: Linux guests cannot run on this PVM host");
    EXPECT_FALSE(fs::exists(json_path));
    return;
  }
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("PASS truncated-kernel-refused"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("1 passed, 0 failed, 0 not applicable"), std::string::npos) << o.output;
  std::ifstream in(json_path);
  const auto j = json::parse(in);
  EXPECT_EQ(j["passed"], 1);
  EXPECT_EQ(j["cases"][0]["outcome"], "usage-error");
  EXPECT_EQ(j["linux"]["kernel"], not_a_kernel_);
}

}  // namespace
}  // namespace lockvisor::conformance
