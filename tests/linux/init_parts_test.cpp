// The Linux /init's pieces, linked into the test: its parameters, its line
// writer, its CPU list parser, its sampling and its percentiles (which must
// agree with the VMM's definition, vmm/metrics/summary.h).
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "guest/linux/console_protocol.h"
#include "guest/linux/cpus.h"
#include "guest/linux/parameters.h"
#include "guest/linux/report_line.h"
#include "guest/linux/workload.h"
#include "vmm/metrics/summary.h"

namespace lockvisor::linux_init {
namespace {

TEST(LinuxInitParameters, KernelCommandLine) {
  const auto parsed = parse_kernel_command_line(
      "BOOT_IMAGE=/vmlinuz root=/dev/vda console=ttyS0 quiet lockvisor.workload=pipe lockvisor.duration=2.5 "
      "lockvisor.threads=3 lockvisor.seed=18446744073709551615 lockvisor.sample-every=8 lockvisor.futexes=16 "
      "init=\"/init x\" lockvisor.threads=4\n");
  EXPECT_TRUE(parsed.errors.empty()) << parsed.errors[0];
  const Parameters& p = parsed.parameters;
  EXPECT_EQ(p.workload, "pipe");
  EXPECT_EQ(p.duration_ms, 2500u);
  EXPECT_EQ(p.threads, 4u);  // the later one wins
  EXPECT_EQ(p.seed, UINT64_MAX);
  EXPECT_EQ(p.sample_every, 8u);
  EXPECT_EQ(p.futexes, 16u);
}

TEST(LinuxInitParameters, DefaultsWithoutOurKeys) {
  const auto parsed = parse_kernel_command_line("console=ttyS0 nopvspin");
  EXPECT_TRUE(parsed.errors.empty());
  EXPECT_EQ(parsed.parameters.workload, "hello");
  EXPECT_EQ(parsed.parameters.duration_ms, 1000u);
  EXPECT_EQ(parsed.parameters.threads, 0u);
  EXPECT_EQ(parsed.parameters.sample_every, 64u);
}

TEST(LinuxInitParameters, BadValuesAreErrors) {
  for (const char* bad : {"lockvisor.duration=0", "lockvisor.duration=0.0001", "lockvisor.duration=3600.001",
                          "lockvisor.duration=1.", "lockvisor.duration=.5", "lockvisor.duration=-1",
                          "lockvisor.duration=1e3", "lockvisor.duration=abc", "lockvisor.threads=257",
                          "lockvisor.threads=-1", "lockvisor.threads=", "lockvisor.sample_every=0",
                          "lockvisor.futexes=65537", "lockvisor.seed=18446744073709551616", "lockvisor.nosuch=1",
                          "lockvisor.workload", "lockvisor.workload=" }) {
    const auto parsed = parse_kernel_command_line(bad);
    EXPECT_EQ(parsed.errors.size(), 1u) << bad;
  }
  const auto ok = parse_kernel_command_line("lockvisor.duration=3600 lockvisor.duration=0.001");
  EXPECT_TRUE(ok.errors.empty());
  EXPECT_EQ(ok.parameters.duration_ms, 1u);
  EXPECT_EQ(parse_kernel_command_line("lockvisor.duration=0.25").parameters.duration_ms, 250u);
}

TEST(LinuxInitParameters, ProgramOptions) {
  const std::vector<std::string_view> args = {"--workload", "spawn", "--duration=0.5", "--sample_every", "2",
                                              "--threads", "1"};
  const auto parsed = parse_program_options(args);
  EXPECT_TRUE(parsed.errors.empty());
  EXPECT_EQ(parsed.parameters.workload, "spawn");
  EXPECT_EQ(parsed.parameters.duration_ms, 500u);
  EXPECT_EQ(parsed.parameters.sample_every, 2u);
  EXPECT_EQ(parsed.parameters.threads, 1u);
  EXPECT_EQ(parse_program_options({"--threads"}).errors.size(), 1u);
  EXPECT_EQ(parse_program_options({"stray"}).errors.size(), 1u);
  EXPECT_EQ(parse_program_options({"--"}).errors.size(), 1u);
  EXPECT_TRUE(parse_program_options({"--help"}).help);
}

TEST(LinuxInitReportLine, FormatAndChecksum) {
  const std::string line = ReportLine("thread").number("index", 3).number("ops", 42).text("note", "a b").finish();
  ASSERT_TRUE(line.ends_with('\n'));
  const std::string body = line.substr(0, line.rfind(" crc32="));
  EXPECT_EQ(body, "lockvisor-init: thread index=3 ops=42 note=a%20b");
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", static_cast<unsigned>(crc32(body)));
  EXPECT_EQ(line, body + " crc32=" + crc + "\n");
}

TEST(LinuxInitReportLine, EscapingAndBounds) {
  EXPECT_EQ(escape_text("ok!~"), "ok!~");
  EXPECT_EQ(escape_text("a b%\n\x7f\xff"), "a%20b%25%0A%7F%FF");
  EXPECT_EQ(escape_text(std::string(1, '\0')), "%00");
  // The longest text, every byte escaped, still fits in one line.
  const std::string worst(kMaxTextBytes + 100, '\x01');
  EXPECT_EQ(escape_text(worst).size(), 3 * kMaxTextBytes);
  const std::string line = ReportLine("spinlock").text("text", worst).finish();
  EXPECT_LE(line.size() - 1, kMaxLineBytes);
}

TEST(LinuxInitCpus, CpuLists) {
  EXPECT_EQ(count_cpu_list("0"), 1u);
  EXPECT_EQ(count_cpu_list("0-3"), 4u);
  EXPECT_EQ(count_cpu_list("0-3,6,8-9"), 7u);
  for (const char* bad : {"", "a", "3-1", "0-", "-1", "0,,1", "0-3,", "99999"}) EXPECT_FALSE(count_cpu_list(bad)) << bad;
  const OnlineCpus here = online_cpus();
  EXPECT_GE(here.sysconf, 1);
  if (here.sysfs) {
    EXPECT_EQ(static_cast<long>(*here.sysfs), here.sysconf);
  }
}

TEST(LinuxInitWorker, CountsOpsAndTimesEveryNth) {
  std::atomic<bool> stop{false};
  Worker worker(0, stop, 4, 1);
  int calls = 0;
  worker.loop([&] { return ++calls <= 100; });
  EXPECT_EQ(calls, 101);
  EXPECT_EQ(worker.ops(), 100u);
  EXPECT_EQ(worker.samples().size(), 25u);
  EXPECT_FALSE(worker.failure());

  Worker untimed(1, stop, 1, 1);
  calls = 0;
  untimed.loop([&] { return ++calls <= 10; }, false);
  EXPECT_EQ(untimed.ops(), 10u);
  EXPECT_TRUE(untimed.samples().empty());

  Worker stopped(2, stop, 1, 1);
  stop = true;
  stopped.loop([&] { return true; });
  EXPECT_EQ(stopped.ops(), 0u);

  stop = false;
  Worker failing(3, stop, 1, 1);
  failing.loop([&] {
    failing.fail("first");
    failing.fail("second");
    return false;
  });
  EXPECT_EQ(failing.failure(), "worker 3: first");
}

TEST(LinuxInitWorker, SamplesStayBoundedAndSeedsDiffer) {
  std::atomic<bool> stop{false};
  Worker worker(0, stop, 1, 1);
  std::uint64_t n = 0;
  worker.loop([&] { return ++n <= 3 * Worker::kMaxSamples; });
  EXPECT_EQ(worker.samples().size(), Worker::kMaxSamples);
  Worker a(0, stop, 1, 1), b(1, stop, 1, 1), c(0, stop, 1, 2), a2(0, stop, 1, 1);
  const std::uint64_t ra = a.random();
  EXPECT_NE(ra, b.random());
  EXPECT_NE(ra, c.random());
  EXPECT_EQ(ra, a2.random());
}

TEST(LinuxInitLatency, PercentilesAgreeWithTheVmmDefinition) {
  EXPECT_EQ(latency_percentiles({}).samples, 0u);
  std::mt19937_64 rng(7);
  for (std::size_t n : {1u, 2u, 3u, 9u, 10u, 99u, 100u, 101u, 999u, 1000u, 1001u, 4567u}) {
    std::vector<std::uint64_t> samples(n);
    for (auto& s : samples) s = rng() % 100000;
    const LatencyPercentiles mine = latency_percentiles(samples);
    const metrics::LatencySummary vmm = metrics::summarize_latency(samples);
    EXPECT_EQ(mine.samples, n);
    EXPECT_EQ(static_cast<double>(mine.p50), vmm.p50) << n;
    EXPECT_EQ(static_cast<double>(mine.p90), vmm.p90) << n;
    EXPECT_EQ(static_cast<double>(mine.p99), vmm.p99) << n;
    EXPECT_EQ(static_cast<double>(mine.p999), vmm.p999) << n;
    EXPECT_EQ(static_cast<double>(mine.max), vmm.max) << n;
    EXPECT_NEAR(static_cast<double>(mine.mean), vmm.mean, 1.0) << n;
  }
  // Huge values do not overflow the mean.
  const auto big = latency_percentiles({UINT64_MAX, UINT64_MAX});
  EXPECT_EQ(big.mean, UINT64_MAX);
}

}  // namespace
}  // namespace lockvisor::linux_init
