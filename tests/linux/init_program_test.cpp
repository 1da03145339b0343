// The Linux /init run natively, as an ordinary process: every workload
// really works (operations on every worker), and what it prints is parsed
// by the VMM's parser into a complete report.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/linux/run_program.h"
#include "vmm/linuxinit/init_report.h"

namespace lockvisor::linux_guest {
namespace {

struct Parsed {
  test::ProgramRun run;
  InitReport report;
};

Parsed run_init(const std::vector<std::string>& args, const char* program = LOCKVISOR_LINUX_INIT_PROGRAM) {
  Parsed p;
  p.run = test::run_program(program, args);
  p.report = parse_init_report(p.run.output);
  return p;
}

std::string problems(const InitReport& r) {
  std::string out;
  for (const auto& p : r.problems) out += p + "; ";
  for (const auto& e : r.errors) out += "error: " + e + "; ";
  return out;
}

class CountingWorkload : public testing::TestWithParam<const char*> {};

TEST_P(CountingWorkload, EveryWorkerDoesWorkAndTheReportIsComplete) {
  // Every 4th operation timed, so even the slow spawn workload has samples.
  const Parsed p = run_init({"--workload", GetParam(), "--duration", "0.2", "--threads", "2", "--sample-every", "4"});
  ASSERT_EQ(p.run.exit_code, 0) << p.run.output;
  const InitReport& r = p.report;
  EXPECT_TRUE(r.complete) << problems(r) << p.run.output;
  EXPECT_EQ(r.lines_ignored, 0u) << p.run.output;  // nothing but protocol lines on stdout
  EXPECT_EQ(r.lines_rejected, 0u) << problems(r);
  EXPECT_EQ(r.workload, GetParam());
  EXPECT_FALSE(r.pid1);
  EXPECT_TRUE(r.mounts.empty());  // not PID 1: nothing mounted
  EXPECT_EQ(r.exit_status, 0u);
  EXPECT_TRUE(r.errors.empty()) << problems(r);
  ASSERT_TRUE(r.result);
  EXPECT_EQ(r.result->threads, 2u);
  // The run lasted its duration (the sleep is at least 200 ms).
  EXPECT_GE(r.result->elapsed_ns, 200'000'000u);
  const auto ops = r.per_thread_ops();
  ASSERT_TRUE(ops);
  ASSERT_EQ(ops->size(), 2u);
  for (const std::uint64_t n : *ops) EXPECT_GT(n, 0u);
  ASSERT_TRUE(r.latency);
  EXPECT_GT(r.latency->samples, 0u);
  EXPECT_EQ(r.latency->every, 4u);
  EXPECT_GT(r.latency->max_ns, 0u);
  ASSERT_TRUE(r.cpus);
  EXPECT_GE(r.cpus->sysconf, 1u);
  ASSERT_TRUE(r.spinlock_log_source);

  const auto j = init_report_json(r);
  EXPECT_GT(j["ops_per_sec"].get<double>(), 0.0);
  EXPECT_GT(j["fairness"]["jain"].get<double>(), 0.0);
  EXPECT_LE(j["fairness"]["jain"].get<double>(), 1.0);
  EXPECT_EQ(j["per_thread_ops"].size(), 2u);
  EXPECT_EQ(j["workload_exit_status"], 0);
}

INSTANTIATE_TEST_SUITE_P(Linux, CountingWorkload, testing::Values("futex-hash", "lockref", "pipe", "spawn"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(LinuxInit, PipeRunsPairs) {
  const Parsed p = run_init({"--workload", "pipe", "--duration", "0.1", "--threads", "3"});
  ASSERT_EQ(p.run.exit_code, 0) << p.run.output;
  ASSERT_TRUE(p.report.result);
  EXPECT_EQ(p.report.result->threads, 2u);
  EXPECT_EQ(p.report.threads_requested, 3u);
  const auto ops = p.report.per_thread_ops();
  ASSERT_TRUE(ops);
  // The echoer echoes what the starter sent: never more, at most one less
  // (the stop can come between the two halves of a round trip).
  EXPECT_LE((*ops)[0], (*ops)[1] + 1);
  EXPECT_LE((*ops)[1], (*ops)[0] + 1);
}

TEST(LinuxInit, HelloAndIdleCountNothing) {
  for (const char* workload : {"hello", "idle"}) {
    const Parsed p = run_init({"--workload", workload, "--duration", "0.05"});
    ASSERT_EQ(p.run.exit_code, 0) << p.run.output;
    EXPECT_TRUE(p.report.complete) << problems(p.report);
    EXPECT_EQ(p.report.workload, workload);
    EXPECT_FALSE(p.report.result);
    EXPECT_FALSE(p.report.latency);
    EXPECT_EQ(p.report.exit_status, 0u);
    ASSERT_TRUE(p.report.cpus);
    EXPECT_TRUE(init_report_json(p.report)["ops_per_sec"].is_null());
  }
}

TEST(LinuxInit, DefaultThreadsAreTheOnlineCpus) {
  const Parsed p = run_init({"--workload", "futex-hash", "--duration", "0.05"});
  ASSERT_EQ(p.run.exit_code, 0) << p.run.output;
  ASSERT_TRUE(p.report.result);
  ASSERT_TRUE(p.report.cpus);
  EXPECT_EQ(p.report.threads_requested, 0u);
  EXPECT_EQ(p.report.result->threads, p.report.cpus->sysconf);
}

TEST(LinuxInit, BadParametersExitTwoWithTheReasons) {
  const Parsed p = run_init({"--workload", "nosuch", "--threads", "999", "--duration", "0", "--bogus", "1"});
  EXPECT_EQ(p.run.exit_code, 2);
  EXPECT_EQ(p.report.exit_status, 2u);
  EXPECT_TRUE(p.report.complete) << problems(p.report);
  EXPECT_EQ(p.report.errors.size(), 4u) << problems(p.report);
  EXPECT_FALSE(p.report.result);
  EXPECT_FALSE(p.report.spinlock_log_source);  // nothing ran
}

TEST(LinuxInit, SpawnChildExitsAtOnceAndSilently) {
  const test::ProgramRun run = test::run_program(LOCKVISOR_LINUX_INIT_PROGRAM, {"--spawn-child"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output, "");
}

TEST(LinuxInit, TheEmbeddedStrippedCopyRunsToo) {
  const Parsed p = run_init({"--workload", "hello"}, LOCKVISOR_LINUX_INIT_STRIPPED_PROGRAM);
  ASSERT_EQ(p.run.exit_code, 0) << p.run.output;
  EXPECT_TRUE(p.report.complete) << problems(p.report);
}

TEST(LinuxInit, HelpPrintsTheKeys) {
  const test::ProgramRun run = test::run_program(LOCKVISOR_LINUX_INIT_PROGRAM, {"--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* key : {"lockvisor.workload=", "lockvisor.duration=", "lockvisor.threads=", "lockvisor.seed=",
                          "lockvisor.sample_every=", "lockvisor.futexes="})
    EXPECT_NE(run.output.find(key), std::string::npos) << key;
  EXPECT_EQ(run.output.find("lockvisor-init: "), std::string::npos);
}

}  // namespace
}  // namespace lockvisor::linux_guest
