// The VMM's parser of the /init's console report, against well-formed
// reports and against hostile consoles: cut, over-long, repeated and
// out-of-range lines, bad escapes, wrong checksums and binary garbage.
#include "vmm/linuxinit/init_report.h"

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "guest/linux/console_protocol.h"
#include "guest/linux/report_line.h"

namespace lockvisor::linux_guest {
namespace {

namespace proto = lockvisor::linux_init;
using linux_init::ReportLine;

// A line with any body the test likes and a correct checksum: hostile
// content that a bare checksum test would not get past.
std::string signed_line(std::string_view body) {
  const std::string line = std::string(proto::kLinePrefix) + std::string(body);
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", static_cast<unsigned>(proto::crc32(line)));
  return line + " crc32=" + crc;
}

std::string start_line(unsigned version = proto::kProtocolVersion) {
  return signed_line("start version=" + std::to_string(version) +
                     " workload=futex-hash duration_ms=200 threads=2 seed=7 sample_every=64 pid1=1");
}

// A complete, consistent report of two workers (lines without their '\n').
std::vector<std::string> good_report() {
  std::vector<std::string> lines = {
      start_line(),
      ReportLine("mount").text("target", "/proc").number("errno", 0).finish(),
      ReportLine("mount").text("target", "/dev").number("errno", 19).finish(),
      ReportLine("spinlock_log").text("source", "kmsg").number("errno", 0).number("lines", 1).finish(),
      ReportLine("spinlock").text("text", "kvm-guest: PV spinlocks enabled").finish(),
      ReportLine("cpus").number("sysconf", 2).number("sysfs", 2).text("list", "0-1").finish(),
      ReportLine("thread").number("index", 0).number("ops", 100).finish(),
      ReportLine("thread").number("index", 1).number("ops", 300).finish(),
      ReportLine("result").number("threads", 2).number("ops", 400).number("elapsed_ns", 200'000'000).finish(),
      ReportLine("latency")
          .number("every", 64)
          .number("samples", 6)
          .number("p50_ns", 200)
          .number("p90_ns", 300)
          .number("p99_ns", 900)
          .number("p999_ns", 900)
          .number("max_ns", 900)
          .number("mean_ns", 280)
          .finish(),
      ReportLine("exit").number("status", 0).finish(),
  };
  for (std::string& line : lines)
    if (line.ends_with('\n')) line.pop_back();
  return lines;
}

InitReport parse(const std::vector<std::string>& lines) {
  InitReportParser parser;
  for (const auto& line : lines) parser.feed_line(line);
  return parser.finish();
}

TEST(InitReport, ParsesACompleteReport) {
  const InitReport r = parse(good_report());
  EXPECT_TRUE(r.complete) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(r.lines_rejected, 0u);
  EXPECT_EQ(r.protocol_version, 1u);
  EXPECT_EQ(r.workload, "futex-hash");
  EXPECT_EQ(r.duration_ms, 200u);
  EXPECT_EQ(r.threads_requested, 2u);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_TRUE(r.pid1);
  ASSERT_EQ(r.mounts.size(), 2u);
  EXPECT_EQ(r.mounts[1].target, "/dev");
  EXPECT_EQ(r.mounts[1].error, 19u);
  EXPECT_EQ(r.spinlock_log, std::vector<std::string>{"kvm-guest: PV spinlocks enabled"});
  ASSERT_TRUE(r.cpus);
  EXPECT_EQ(r.cpus->sysfs, 2u);
  EXPECT_EQ(r.cpus->list, "0-1");
  EXPECT_EQ(r.per_thread_ops(), (std::vector<std::uint64_t>{100, 300}));
  ASSERT_TRUE(r.result);
  EXPECT_EQ(r.result->ops, 400u);
  ASSERT_TRUE(r.latency);
  EXPECT_EQ(r.latency->p99_ns, 900u);
  EXPECT_EQ(r.exit_status, 0u);

  const nlohmann::json j = init_report_json(r);
  EXPECT_EQ(j["workload"], "futex-hash");
  EXPECT_EQ(j["workload_exit_status"], 0);
  EXPECT_EQ(j["guest_cpus_online"], 2);
  EXPECT_EQ(j["guest_spinlock_log"], nlohmann::json::array({"kvm-guest: PV spinlocks enabled"}));
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["ops_total"], 400);
  EXPECT_DOUBLE_EQ(j["duration_s"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j["ops_per_sec"].get<double>(), 2000.0);
  EXPECT_EQ(j["per_thread_ops"], nlohmann::json::array({100, 300}));
  // Jain: (100 + 300)^2 / (2 * (100^2 + 300^2)) = 0.8; max/min 3.
  EXPECT_DOUBLE_EQ(j["fairness"]["jain"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["fairness"]["max_min_ratio"].get<double>(), 3.0);
  // The fairness-factor readings beside Jain: 100/300, 200/300, 100/400.
  EXPECT_DOUBLE_EQ(j["fairness"]["min_over_max"].get<double>(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(j["fairness"]["mean_over_max"].get<double>(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(j["fairness"]["slowest_half_share"].get<double>(), 0.25);
  EXPECT_EQ(j["latency_ns"]["p50"], 200);
  EXPECT_EQ(j["latency_ns"]["count"], 6);
  EXPECT_EQ(j["latency_ns"]["every"], 64);
  EXPECT_EQ(j["guest_init"]["complete"], true);
  EXPECT_EQ(j["guest_init"]["mounts"][1]["errno"], 19);
  EXPECT_EQ(j["guest_init"]["spinlock_log_source"], "kmsg");
}

TEST(InitReport, KernelLinesAreIgnoredAndPrefixMayFollowKernelText) {
  auto lines = good_report();
  lines.insert(lines.begin(), "[    0.000000] Linux version 6.1.0-13-amd64");
  lines.insert(lines.begin() + 3, "kvm-guest: PV spinlocks enabled");
  // A kernel message that had not ended its line when the init wrote one,
  // and the serial port's "\r\n".
  lines[5] = "[    1.234] random: crng init done" + lines[5] + "\r\n";
  const InitReport r = parse(lines);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.lines_ignored, 2u);
  EXPECT_EQ(r.lines_rejected, 0u);
  EXPECT_EQ(r.lines_seen, lines.size());
}

TEST(InitReport, ALineCutByAKernelMessageIsRefusedNotMisread) {
  auto lines = good_report();
  // "thread index=0 ops=100": the kernel's message lands after "ops=1".
  const std::string whole = lines[6];
  const std::size_t cut = whole.find("ops=1") + 5;
  lines[6] = whole.substr(0, cut);
  lines.insert(lines.begin() + 7, "[    2.000] kernel says hello" + whole.substr(cut));
  const InitReport r = parse(lines);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.lines_rejected, 1u);
  EXPECT_EQ(r.lines_ignored, 1u);
  EXPECT_FALSE(r.per_thread_ops());  // worker 0 is missing, not "1"
  EXPECT_EQ(r.thread_ops.count(0), 0u);
}

TEST(InitReport, WrongChecksumIsRefused) {
  auto lines = good_report();
  std::string& exit_line = lines.back();
  exit_line[exit_line.size() - 1] = exit_line.back() == '0' ? '1' : '0';
  auto r = parse(lines);
  EXPECT_FALSE(r.exit_status);
  EXPECT_FALSE(r.complete);
  // Upper-case hex, a short or a missing checksum: all refused.
  for (const std::string& bad :
       {std::string("lockvisor-init: exit status=0"), std::string("lockvisor-init: exit status=0 crc32=1234"),
        std::string("lockvisor-init: exit status=0 crc32=")}) {
    InitReportParser p;
    p.feed_line(start_line());
    p.feed_line(bad);
    EXPECT_EQ(p.report().lines_rejected, 1u) << bad;
    EXPECT_FALSE(p.report().exit_status) << bad;
  }
  const std::string good = ReportLine("exit").number("status", 0).finish();
  std::string upper = good;
  for (std::size_t i = upper.rfind('=') + 1; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  if (upper != good) {
    InitReportParser p;
    p.feed_line(start_line());
    p.feed_line(upper);
    EXPECT_FALSE(p.report().exit_status);
  }
}

// The checksum marker " crc32=" begins with a blank, and the prefix ends
// with one: a line that is the prefix and a checksum has no record at all.
TEST(InitReport, APrefixAndAChecksumAloneAreRefused) {
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", static_cast<unsigned>(proto::crc32("lockvisor-init:")));
  for (const std::string& bad : {std::string("lockvisor-init: crc32=") + crc, std::string("lockvisor-init: crc32=00000000")}) {
    InitReportParser p;
    p.feed_line(start_line());
    EXPECT_NO_THROW(p.feed_line(bad)) << bad;
    EXPECT_EQ(p.report().lines_rejected, 1u) << bad;
  }
}

TEST(InitReport, OverLongLinesAreRefused) {
  InitReportParser p;
  p.feed_line(start_line());
  p.feed_line(signed_line("error text=" + std::string(proto::kMaxLineBytes, 'a')));
  p.feed_line(std::string(1 << 20, 'x'));  // a megabyte of kernel junk: ignored
  EXPECT_EQ(p.report().lines_rejected, 1u);
  EXPECT_EQ(p.report().lines_ignored, 1u);
  EXPECT_TRUE(p.report().errors.empty());
  // Text longer than kMaxTextBytes once unescaped, in a line short enough.
  p.feed_line(signed_line("error text=" + std::string(proto::kMaxTextBytes + 1, 'b')));
  EXPECT_EQ(p.report().lines_rejected, 2u);
  p.feed_line(signed_line("error text=" + std::string(proto::kMaxTextBytes, 'b')));
  EXPECT_EQ(p.report().errors.size(), 1u);
}

TEST(InitReport, NumbersMustBePlainInRangeDecimals) {
  const auto thread_ops = [](std::string_view value) {
    InitReportParser p;
    p.feed_line(start_line());
    p.feed_line(signed_line("thread index=0 ops=" + std::string(value)));
    return p.report().thread_ops.count(0) ? std::optional(p.report().thread_ops.at(0)) : std::nullopt;
  };
  EXPECT_EQ(thread_ops("0"), 0u);
  EXPECT_EQ(thread_ops("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"18446744073709551616", "99999999999999999999999", "-5", "+5", "5.0", "NaN", "nan", "inf",
                          "0x10", "", "1e3", "12a", " 1", "00000000000000000000001"})
    EXPECT_FALSE(thread_ops(bad)) << bad;

  // Range checks of the fields that have one.
  const auto accepted = [](const std::string& body) {
    InitReportParser p;
    p.feed_line(start_line());
    p.feed_line(signed_line(body));
    return p.report().lines_rejected == 0;
  };
  EXPECT_TRUE(accepted("thread index=255 ops=1"));
  EXPECT_FALSE(accepted("thread index=256 ops=1"));
  EXPECT_FALSE(accepted("result threads=0 ops=0 elapsed_ns=1"));
  EXPECT_FALSE(accepted("result threads=257 ops=0 elapsed_ns=1"));
  EXPECT_FALSE(accepted("result threads=2 ops=0 elapsed_ns=0"));
  EXPECT_FALSE(accepted("result threads=2 ops=0 elapsed_ns=18446744073709551615"));
  EXPECT_FALSE(accepted("exit status=256"));
  EXPECT_FALSE(accepted("mount target=/proc errno=4096"));
  EXPECT_FALSE(accepted("cpus sysconf=65537 list=0"));
  EXPECT_TRUE(accepted("cpus sysconf=1 list=0"));  // sysfs may be absent
  EXPECT_FALSE(accepted("latency every=64 samples=3 p50_ns=5 p90_ns=4 p99_ns=6 p999_ns=6 max_ns=6 mean_ns=5"));
  EXPECT_FALSE(accepted("latency every=64 samples=3 p50_ns=1 p90_ns=2 p99_ns=3 p999_ns=4 max_ns=5 mean_ns=6"));
  EXPECT_FALSE(accepted("latency every=0 samples=3 p50_ns=1 p90_ns=2 p99_ns=3 p999_ns=4 max_ns=5 mean_ns=2"));
  EXPECT_FALSE(accepted("spinlock_log source=kmsg errno=0 lines=9"));
}

TEST(InitReport, StartLineIsCheckedToo) {
  for (const char* bad : {"start version=1 workload=x duration_ms=3600001 threads=1 seed=0 sample_every=1 pid1=0",
                          "start version=1 workload=x duration_ms=1 threads=300 seed=0 sample_every=1 pid1=0",
                          "start version=1 workload=x duration_ms=1 threads=1 seed=0 sample_every=0 pid1=0",
                          "start version=1 workload=x duration_ms=1 threads=1 seed=0 sample_every=1 pid1=2",
                          "start version=1 duration_ms=1 threads=1 seed=0 sample_every=1 pid1=0"}) {
    InitReportParser p;
    p.feed_line(signed_line(bad));
    p.feed_line(ReportLine("exit").number("status", 0).finish());
    const InitReport r = p.finish();
    EXPECT_FALSE(r.started) << bad;
    EXPECT_FALSE(r.complete) << bad;
    EXPECT_EQ(r.lines_rejected, 2u) << bad;  // and the exit line came "before start"
  }
}

TEST(InitReport, DuplicateKeysAndRecords) {
  auto lines = good_report();
  lines.insert(lines.end() - 1, signed_line("thread index=0 ops=5"));  // a worker again
  lines.insert(lines.end() - 1, ReportLine("result").number("threads", 2).number("ops", 1).number("elapsed_ns", 1).finish());
  lines.insert(lines.end() - 1, start_line());
  lines.insert(lines.end() - 1, signed_line("cpus sysconf=1 sysconf=2 list=0"));
  lines.insert(lines.end() - 1, ReportLine("cpus").number("sysconf", 8).text("list", "0-7").finish());
  lines.insert(lines.end() - 1, ReportLine("spinlock_log").text("source", "x").number("errno", 0).number("lines", 0).finish());
  const InitReport r = parse(lines);
  EXPECT_EQ(r.lines_rejected, 6u);
  // The first of each stands.
  EXPECT_EQ(r.per_thread_ops(), (std::vector<std::uint64_t>{100, 300}));
  EXPECT_EQ(r.result->ops, 400u);
  EXPECT_EQ(r.cpus->sysconf, 2u);
  EXPECT_EQ(r.spinlock_log_source, "kmsg");
  EXPECT_TRUE(r.complete);  // the figures it kept are consistent
  EXPECT_EQ(r.problems.size(), 6u);
}

TEST(InitReport, MissingExitLineOrMissingFigures) {
  auto lines = good_report();
  lines.pop_back();
  InitReport r = parse(lines);
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.exit_status);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems.back().find("no exit line"), std::string::npos);
  EXPECT_TRUE(init_report_json(r)["workload_exit_status"].is_null());

  // Nothing at all.
  r = parse({});
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.problems.size(), 2u);
  const auto j = init_report_json(r);
  EXPECT_TRUE(j["ops_per_sec"].is_null());
  EXPECT_TRUE(j["guest_cpus_online"].is_null());
  EXPECT_TRUE(j["fairness"].is_null());

  // A worker's line missing: the total cannot be split, so no fairness.
  lines = good_report();
  lines.erase(lines.begin() + 7);
  r = parse(lines);
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.per_thread_ops());
  EXPECT_TRUE(init_report_json(r)["per_thread_ops"].is_null());

  // Workers that do not add up to the total.
  lines = good_report();
  lines[7] = ReportLine("thread").number("index", 1).number("ops", 301).finish();
  r = parse(lines);
  EXPECT_FALSE(r.complete);

  // Sums that overflow do not add up either.
  lines = good_report();
  lines[6] = ReportLine("thread").number("index", 0).number("ops", UINT64_MAX).finish();
  lines[7] = ReportLine("thread").number("index", 1).number("ops", 401).finish();
  r = parse(lines);
  EXPECT_FALSE(r.complete);

  // A worker index beyond the workers.
  lines = good_report();
  lines[7] = ReportLine("thread").number("index", 2).number("ops", 300).finish();
  r = parse(lines);
  EXPECT_FALSE(r.complete);

  // An announced spinlock line that never came.
  lines = good_report();
  lines.erase(lines.begin() + 4);
  r = parse(lines);
  EXPECT_FALSE(r.complete);
}

TEST(InitReport, OrderBeforeStartAndAfterExit) {
  auto lines = good_report();
  lines.insert(lines.begin(), ReportLine("error").text("text", "early").finish());
  lines.push_back(ReportLine("error").text("text", "late").finish());
  lines.push_back(ReportLine("exit").number("status", 1).finish());
  const InitReport r = parse(lines);
  EXPECT_EQ(r.lines_rejected, 3u);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.exit_status, 0u);
  EXPECT_TRUE(r.complete);
}

TEST(InitReport, OtherProtocolVersionsAreNotRead) {
  auto lines = good_report();
  lines[0] = start_line(2);
  const InitReport r = parse(lines);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.protocol_version, 2u);
  EXPECT_FALSE(r.result);
  EXPECT_FALSE(r.exit_status);
  EXPECT_EQ(r.lines_rejected, lines.size());
  EXPECT_EQ(r.problems.size(), 2u);  // the version and "no exit line"; nothing per later line
}

TEST(InitReport, TextEscapes) {
  static constexpr char kNasty[] = "a b%c\n\r\t\x01\x7f\xff\xc3\xa9 end";
  std::string nasty(kNasty, sizeof kNasty - 1);
  nasty += '\0';
  InitReportParser p;
  p.feed_line(start_line());
  p.feed_line(ReportLine("spinlock").text("text", nasty).finish());
  p.feed_line(ReportLine("spinlock").text("text", "").finish());
  for (const char* bad : {"spinlock text=%4", "spinlock text=%G0", "spinlock text=%4a", "spinlock text=abc%"})
    p.feed_line(signed_line(bad));
  const InitReport r = p.finish();
  ASSERT_EQ(r.spinlock_log.size(), 2u);
  EXPECT_EQ(r.spinlock_log[0], nasty);
  EXPECT_EQ(r.spinlock_log[1], "");
  EXPECT_EQ(r.lines_rejected, 4u);
  // Valid UTF-8 in the JSON, whatever the guest sent.
  const std::string dumped = init_report_json(r).dump();
  EXPECT_NE(dumped.find("\\u0000"), std::string::npos);
  EXPECT_NE(dumped.find("\xc3\xa9"), std::string::npos);
}

TEST(InitReport, MalformedFieldLists) {
  for (const char* bad : {"exit  status=0", "exit status=0 ", "exit status", "exit =0", "exit Status=0", "Exit status=0",
                          "exit status=0 status=0", "unknown_record a=1", "exit status=0 x-y=1"}) {
    InitReportParser p;
    p.feed_line(start_line());
    p.feed_line(signed_line(bad));
    EXPECT_EQ(p.report().lines_rejected, 1u) << bad;
    EXPECT_FALSE(p.report().exit_status) << bad;
  }
  // Too many fields.
  std::string body = "exit status=0";
  for (int i = 0; i < 16; ++i) body += " f" + std::to_string(i) + "=1";
  InitReportParser p;
  p.feed_line(start_line());
  p.feed_line(signed_line(body));
  EXPECT_EQ(p.report().lines_rejected, 1u);
  // Unknown fields of a known record are tolerated (a newer init may add some).
  p.feed_line(signed_line("exit status=3 reason=x"));
  EXPECT_EQ(p.report().exit_status, 3u);
}

TEST(InitReport, CountsStayBounded) {
  InitReportParser p;
  p.feed_line(start_line());
  for (int i = 0; i < 1000; ++i) {
    p.feed_line(ReportLine("error").text("text", "e").finish());
    p.feed_line(ReportLine("spinlock").text("text", "s").finish());
    p.feed_line(ReportLine("mount").text("target", "/m").number("errno", 0).finish());
    p.feed_line(signed_line("exit status=999"));
  }
  const InitReport r = p.finish();
  EXPECT_EQ(r.errors.size(), proto::kMaxErrorLines);
  EXPECT_EQ(r.errors_dropped, 1000u - proto::kMaxErrorLines);
  EXPECT_EQ(r.spinlock_log.size(), proto::kMaxSpinlockLines);
  EXPECT_EQ(r.mounts.size(), proto::kMaxMountLines);
  EXPECT_EQ(r.problems.size(), kMaxProblems);
  EXPECT_GT(r.problems_dropped, 1000u);
  EXPECT_EQ(init_report_json(r)["guest_init"]["problems"].size(), kMaxProblems);
}

TEST(InitReport, BinaryGarbageNeverBreaksIt) {
  std::mt19937_64 rng(12345);
  InitReportParser p;
  p.feed_line(start_line());
  const auto good = good_report();
  for (int i = 0; i < 20000; ++i) {
    std::string line;
    const std::size_t n = rng() % 300;
    for (std::size_t k = 0; k < n; ++k) line += static_cast<char>(rng() & 0xFF);
    switch (i % 4) {
      case 0: break;  // pure garbage
      case 1: line = std::string(proto::kLinePrefix) + line; break;
      case 2: line.insert(rng() % (line.size() + 1), good[1 + rng() % (good.size() - 2)]); break;
      default: {  // a good line with a few bytes flipped
        line = good[1 + rng() % (good.size() - 2)];
        for (int flips = 0; flips < 3; ++flips) line[rng() % line.size()] = static_cast<char>(rng() & 0xFF);
      }
    }
    p.feed_line(line);
  }
  const InitReport r = p.finish();
  EXPECT_EQ(r.lines_seen, 20001u);
  EXPECT_LE(r.errors.size(), proto::kMaxErrorLines);
  EXPECT_LE(r.spinlock_log.size(), proto::kMaxSpinlockLines);
  EXPECT_LE(r.thread_ops.size(), proto::kMaxThreads);
  EXPECT_LE(r.problems.size(), kMaxProblems);
  EXPECT_FALSE(r.exit_status);  // no exit line was ever fed
  EXPECT_NO_THROW(init_report_json(r).dump());
}

// A real console: Debian 12's kernel 6.1.0-57-amd64 booted by QEMU (TCG,
// two CPUs, no KVM, so the kernel printed no PV spinlock line) with this
// initramfs and lockvisor.workload=lockref lockvisor.duration=0.5
// lockvisor.threads=2, firmware and kernel messages included.
TEST(InitReport, ARealGuestConsole) {
  std::ifstream in(LOCKVISOR_LINUX_TEST_DATA "/qemu-tcg-debian-6.1-lockref.console", std::ios::binary);
  ASSERT_TRUE(in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const InitReport r = parse_init_report(text);
  EXPECT_TRUE(r.complete) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.lines_rejected, 0u);
  EXPECT_GT(r.lines_ignored, 300u);
  EXPECT_TRUE(r.pid1);
  EXPECT_EQ(r.workload, "lockref");
  ASSERT_EQ(r.mounts.size(), 3u);
  for (const auto& m : r.mounts) EXPECT_EQ(m.error, 0u) << m.target;
  EXPECT_EQ(r.spinlock_log_source, "kmsg");
  EXPECT_TRUE(r.spinlock_log.empty());
  EXPECT_EQ(r.cpus->sysfs, 2u);
  EXPECT_EQ(r.per_thread_ops(), (std::vector<std::uint64_t>{5128, 5626}));
  EXPECT_EQ(r.exit_status, 0u);
  EXPECT_EQ(init_report_json(r)["guest_cpus_online"], 2);
}

TEST(InitReport, ParseWholeText) {
  std::string text;
  for (const auto& line : good_report()) text += line + "\r\n";
  const InitReport r = parse_init_report(text);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.lines_seen, good_report().size());
}

}  // namespace
}  // namespace lockvisor::linux_guest
