// One file (over 500 lines) for the whole hostile-guest suite, so each abuse
// sits beside the others and shares the guest's launch helpers.
// The hostile-guest suite: guests that abuse every doorbell and every
// report-channel message (guest/programs/hostile.cpp at CPL3, and
// cpl0_probe.S for what only CPL0 can do), booted on /dev/kvm through the
// Machine API and through the lockvisor binary. Each test asserts the
// outcome and exit code, the reason line, and that the VMM kept no more than
// its limits (vmm/machine/guest_limits.h) — by its own accounting and by
// the process's peak resident memory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/ucall.h"
#include "tests/support/kvm_required.h"
#include "vmm/guest_image.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/serial_console.h"
#include "vmm/report/run_report.h"

namespace lockvisor::hostile {
namespace {

using machine::MachineConfig;
using machine::Outcome;
using machine::RunResult;
using namespace std::chrono_literals;

// cpl0_probe.S reads BootInfo::seed at this offset.
static_assert(offsetof(abi::BootInfo, seed) == 56);

constexpr std::uint64_t kMiB = 1ull << 20;

MachineConfig hostile(const std::string& attack, unsigned vcpus = 2, const std::string& extra = "") {
  MachineConfig config;
  config.vcpus = vcpus;
  config.program = "hostile";
  config.args = "attack=" + attack + (extra.empty() ? "" : " " + extra);
  config.echo_guest_prints = false;
  config.capture_serial = true;
  config.timeout_s = 60;  // a hang is a failure, not a stuck CI job
  return config;
}

RunResult boot(const kvm::KvmSystem& kvm, MachineConfig config,
               std::span<const std::byte> image = embedded_guest_image()) {
  machine::Machine vm(kvm, std::move(config), image);
  return vm.run();
}

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(bytes.size());
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

MachineConfig probe(std::uint64_t scenario) {
  MachineConfig config;
  config.vcpus = 1;
  config.program = "probe";
  config.seed = scenario;
  config.echo_guest_prints = false;
  config.capture_serial = true;
  config.timeout_s = 60;
  return config;
}

std::string describe(const RunResult& r) {
  return std::string(machine::outcome_name(r.outcome)) + ": " + r.reason;
}

void expect_guest_fault(const RunResult& r, const std::string& mention) {
  EXPECT_EQ(r.outcome, Outcome::kGuestFault) << describe(r);
  EXPECT_EQ(machine::exit_code(r.outcome), 3);
  EXPECT_NE(r.reason.find(mention), std::string::npos) << "expected '" << mention << "' in: " << r.reason;
  EXPECT_EQ(r.reason.find('\n'), std::string::npos) << "the reason must be one line: " << r.reason;
}

// ---- the process's resident memory (VmHWM: its peak) ------------------------

std::uint64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field) + 1));
  return 0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so that the peak measured
// afterwards belongs to what follows; false where the kernel cannot.
bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

// ---- the lockvisor binary as a child ----------------------------------------

struct Child {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
  bool timed_out = false;
};

// Runs lockvisor with `args`, optionally under RLIMIT_AS, killing it after
// `timeout`. 128 + N for death by signal N (what a shell would show).
Child lockvisor(const std::vector<std::string>& args, std::optional<rlim_t> address_space = std::nullopt,
                std::chrono::seconds timeout = 60s) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  std::vector<std::string> argv_storage = {LOCKVISOR_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    if (address_space) {
      const rlimit limit{*address_space, *address_space};
      ::setrlimit(RLIMIT_AS, &limit);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  Child child;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      child.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fd{pipe_fds[0], POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    child.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return child;
}

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("lockvisor-hostile-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

// ---- bad pointers, bad structures --------------------------------------------

TEST(HostileGuest, BadReportChannelPointersAndStructures) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const struct {
    const char* attack;
    const char* mention;
  } cases[] = {
      {"ucall-outside", "outside guest memory"},   {"ucall-straddle", "outside guest memory"},
      {"ucall-wrap", "outside guest memory"},      {"bad-magic", "bad magic"},
      {"unknown-type", "unknown type 99"},         {"array-outside", "lies outside guest memory"},
      {"array-straddle", "lies outside guest memory"}, {"array-wrap", "lies outside guest memory"},
      {"array-huge-count", "18446744073709551615 values is longer than 4194304"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.attack);
    const auto r = boot(*kvm, hostile(c.attack));
    expect_guest_fault(r, c.mention);
    EXPECT_EQ(r.vcpus[0].final_state, machine::VcpuState::kFaulted);
    EXPECT_TRUE(r.vcpus[0].results.empty());
  }
}

TEST(HostileGuest, DoneWithAHugeExitCodeIsAFailedProgram) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto r = boot(*kvm, hostile("done-code"));
  EXPECT_EQ(r.outcome, Outcome::kGuestFailed) << describe(r);
  EXPECT_NE(r.reason.find("exited with code 18446744073709551615"), std::string::npos) << r.reason;
}

// ---- floods: every one ends at its limit, never in an allocation failure ---------

TEST(HostileGuest, ResultArrayFloodStopsAtTheReportByteLimit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  // 64 arrays of the ABI's maximum length would be 2 GiB kept; the default
  // limit (64 MiB) must stop the flood at the second one.
  auto config = hostile("array-flood", 1, "n=64");
  config.memory_mib = 128;
  const machine::GuestLimits defaults;
  ASSERT_EQ(config.limits.report_bytes, defaults.report_bytes);
  const bool measured = reset_peak_rss();
  const std::uint64_t rss_before = status_kib("VmRSS:");
  const auto r = boot(*kvm, config);
  const std::uint64_t peak = status_kib("VmHWM:");
  expect_guest_fault(r, "--max-report-bytes");
  EXPECT_LE(r.guest_usage.report_bytes, defaults.report_bytes);
  std::uint64_t kept = 0;
  for (const auto& result : r.vcpus[0].results) kept += result.values.size() * sizeof(std::uint64_t);
  EXPECT_LE(kept, defaults.report_bytes);
  EXPECT_EQ(r.vcpus[0].results.size(), 1u) << "one 32 MiB array fits, the second would cross 64 MiB";
  if (measured) {
    // Kept reports (<= 64 MiB) plus what the guest touched of its 128 MiB,
    // with room for the allocator; without the limit this is 2 GiB.
    const std::uint64_t grown_mib = (peak - std::min(peak, rss_before)) / 1024;
    EXPECT_LE(grown_mib, 64u + 128u + 64u) << "peak RSS grew by " << grown_mib << " MiB";
  }
}

TEST(HostileGuest, PrintFloodStopsAtTheMessageLimit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("print-flood", 1, "n=1000000");
  config.limits.report_messages = 10000;  // the default is 10^6; a smaller one keeps the test short
  const auto r = boot(*kvm, config);
  expect_guest_fault(r, "--max-report-messages");
  EXPECT_NE(r.reason.find("more than 10000 messages"), std::string::npos) << r.reason;
  EXPECT_EQ(r.guest_prints.size(), 10000u);
  EXPECT_EQ(r.guest_usage.report_messages, 10001u);
}

TEST(HostileGuest, PrintFloodStopsAtTheReportByteLimit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("print-flood", 1, "n=1000000");
  config.limits.report_bytes = 128 * 1024;
  const auto r = boot(*kvm, config);
  expect_guest_fault(r, "--max-report-bytes");
  EXPECT_LE(r.guest_usage.report_bytes, 128u * 1024);
  std::uint64_t kept = 0;
  for (const auto& line : r.guest_prints) kept += line.size();
  EXPECT_LE(kept, 128u * 1024);
  EXPECT_GT(r.guest_prints.size(), 1000u);
}

TEST(HostileGuest, ResultFloodStopsAtTheReportByteLimit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("result-flood", 1, "n=1000000");
  config.limits.report_bytes = 128 * 1024;
  const auto r = boot(*kvm, config);
  expect_guest_fault(r, "--max-report-bytes");
  EXPECT_LE(r.guest_usage.report_bytes, 128u * 1024);
  EXPECT_GT(r.vcpus[0].results.size(), 1000u);
  EXPECT_LT(r.vcpus[0].results.size(), 128u * 1024 / machine::GuestLimits::kKeptItemOverhead);
}

TEST(HostileGuest, CaseFloodStopsAtTheOpenCaseLimit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto r = boot(*kvm, hostile("case-flood", 1));
  expect_guest_fault(r, "--max-open-cases");
  EXPECT_NE(r.reason.find("more than 256 cases open"), std::string::npos) << r.reason;
  EXPECT_EQ(r.vcpus[0].cases.size(), 256u);
}

TEST(HostileGuest, CaseChurnIsLinear) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  // CASE_END used to scan every case ever begun; a CASE_END that matches
  // nothing scanned them all. The exits themselves are the cost now (the
  // algorithm alone: tests/machine/report_channel_test.cpp). 10000 rounds of
  // three messages keep the test short on PVM, where an exit costs ~100 us.
  const auto start = std::chrono::steady_clock::now();
  const auto r = boot(*kvm, hostile("case-churn", 1, "n=10000"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << describe(r);
  ASSERT_EQ(r.vcpus[0].cases.size(), 10001u);
  for (const auto& c : r.vcpus[0].cases) {
    EXPECT_TRUE(c.ended && c.passed) << c.name;
    if (!(c.ended && c.passed)) break;
  }
  const double exits = static_cast<double>(r.guest_usage.report_messages);
  std::printf("  case churn: %.2f s for %.0f messages (%.1f us each)\n", seconds, exits, seconds * 1e6 / exits);
  EXPECT_LT(seconds, 30.0);
}

TEST(HostileGuest, SerialFloodIsSplitPerVcpuAndStopsAtTheSerialLimit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("serial-flood", 2, "n=1000000");
  config.limits.serial_bytes = 20000;
  const auto r = boot(*kvm, config);
  expect_guest_fault(r, "--max-serial-bytes");
  EXPECT_LE(r.guest_usage.serial_bytes, 20000u);
  std::size_t bytes = 0;
  ASSERT_FALSE(r.serial_lines.empty());
  for (const auto& line : r.serial_lines) {
    // "vCPU N: text" for a line's first segment, "vCPU N+ text" after a split.
    ASSERT_GE(line.size(), 8u) << line;
    const char vcpu = line[5];
    EXPECT_TRUE(line.rfind("vCPU 0", 0) == 0 || line.rfind("vCPU 1", 0) == 0) << line.substr(0, 40);
    EXPECT_TRUE(line[6] == ':' || line[6] == '+') << line.substr(0, 40);
    const std::string text = line.substr(8);
    EXPECT_LE(text.size(), machine::SerialConsole::kMaxLineBytes);
    // Each vCPU sends only its own letter: a merged line would mix them.
    EXPECT_EQ(text.find_first_not_of(static_cast<char>('a' + (vcpu - '0'))), std::string::npos)
        << "a line mixes vCPUs: " << line.substr(0, 60);
    bytes += text.size();
  }
  EXPECT_GT(bytes, 15000u);
  EXPECT_GE(r.serial_lines.size(), 4u) << "20000 bytes without a newline must come out in 4096-byte segments";
}

TEST(HostileGuest, SerialOnStdoutIsEscapedPrefixedAndSplit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("serial-flood", 1, "n=10000");
  config.capture_serial = false;  // to stdout, as `lockvisor run` does
  testing::internal::CaptureStdout();
  const auto r = boot(*kvm, config);
  std::fflush(stdout);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << describe(r);
  std::istringstream lines(out);
  std::size_t count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_TRUE(line.rfind(count == 0 ? "serial vCPU 0| " : "serial vCPU 0+ ", 0) == 0) << line.substr(0, 40);
    EXPECT_LE(line.size(), std::string("serial vCPU 0+ ").size() + machine::SerialConsole::kMaxLineBytes);
  }
  EXPECT_EQ(count, 3u) << "10000 bytes: 4096 + 4096 + 1808";
}

// ---- hostile text ---------------------------------------------------------------

TEST(HostileGuest, InvalidUtf8AndControlCharactersNeverBreakTheJsonOrTheConsole) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("bad-text", 1);
  config.echo_guest_prints = true;
  config.capture_serial = false;
  testing::internal::CaptureStdout();
  const auto r = boot(*kvm, config);
  std::fflush(stdout);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << describe(r);
  // PRINT, the result key, the case name; the unterminated text is ASCII.
  EXPECT_GE(r.guest_text_replaced(), 3u);
  std::string dumped;
  ASSERT_NO_THROW(dumped = report::run_to_json(r, config).dump());
  const auto j = nlohmann::json::parse(dumped);
  EXPECT_GE(j["guest_text_replaced"].get<std::uint64_t>(), 3u);
  EXPECT_EQ(j["vcpus"][0]["cases"].size(), 1u);
  // The unterminated 240-byte text was read up to its capacity, no further.
  ASSERT_EQ(r.guest_prints.size(), 2u);
  EXPECT_EQ(r.guest_prints[1].size(), std::string("vCPU 0: ").size() + abi::kUcallTextBytes);
  // Nothing the guest sent reaches the console raw.
  for (const char c : out) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_FALSE((u < 0x20 && c != '\n') || u == 0x7F) << "raw control character " << int(u) << " in:\n" << out;
  }
  EXPECT_EQ(out.find("\xC2\x9B"), std::string::npos) << "raw C1 CSI on the console";
  EXPECT_NE(out.find("\\x1b[2K\\r\\u009b"), std::string::npos) << out;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(line.rfind("guest vCPU 0| ", 0) == 0 || line.rfind("serial vCPU 0| ", 0) == 0) << line;
}

TEST(HostileGuest, AGuestCannotPrintTheVmmsOutcomeLine) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("fake-outcome", 1);
  config.echo_guest_prints = true;
  config.capture_serial = false;
  testing::internal::CaptureStdout();
  const auto r = boot(*kvm, config);
  std::fflush(stdout);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(r.outcome, Outcome::kGuestFailed) << describe(r);
  std::istringstream lines(out);
  std::size_t count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_TRUE(line.rfind("guest vCPU 0| ", 0) == 0 || line.rfind("serial vCPU 0| ", 0) == 0) << line;
    EXPECT_EQ(line.find('\r'), std::string::npos);
    EXPECT_EQ(line.find('\x1b'), std::string::npos);
  }
  EXPECT_EQ(count, 5u) << out;
  // The reason (printed after "outcome: ...") is one line with the text escaped.
  for (const char c : r.reason) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << r.reason;
  EXPECT_NE(r.reason.find("\\noutcome: completed (exit code 0): fake\\n"), std::string::npos) << r.reason;
}

// ---- forged statistics --------------------------------------------------------------

TEST(HostileGuest, ForgedStatisticsSaturateInsteadOfWrapping) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto r = boot(*kvm, hostile("forged-stats", 2));
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << describe(r);
  lockstat::LockRun run;
  run.mode = "guest";
  run.lock = "forged";
  run.workload = "lockbench";
  run.cpus = 2;
  run.vmm = lockstat::vmm_counters(r);
  // vCPU 1 returns at once without a record: a malformed run, found as such.
  EXPECT_THROW(lockstat::workload_stats_from(r), Error);
  // vCPU 0's forged record counted twice: two times 2^63 violations.
  const auto* record = r.result(0, abi::kWorkloadStatsKey);
  ASSERT_NE(record, nullptr);
  ASSERT_EQ(record->values.size(), abi::kWorkloadStatsWords);
  abi::WorkloadStats stats;
  std::memcpy(&stats, record->values.data(), sizeof stats);
  EXPECT_EQ(stats.violations, 1ull << 63);
  run.samples = {{stats, 0, 0, std::nullopt, std::nullopt}, {stats, 0, 0, std::nullopt, std::nullopt}};
  nlohmann::json m;
  ASSERT_NO_THROW(m = lockstat::to_json(run));
  EXPECT_EQ(m["violations"].get<std::uint64_t>(), ~0ull) << "2^63 + 2^63 must not wrap to 0";
  EXPECT_EQ(m["ops_total"].get<std::uint64_t>(), ~0ull);
  EXPECT_EQ(m["latency_ns"]["count"].get<std::uint64_t>(), ~0ull);
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  EXPECT_NO_THROW(lockstat::print_summary(run, m, sink));
  std::fclose(sink);
}

// ---- doorbells ------------------------------------------------------------------------

TEST(HostileGuest, KickStormsAtEveryApicIdAndAbsurdOnes) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto r = boot(*kvm, hostile("kick-storm", 4, "n=2"));
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << describe(r);
  for (unsigned v = 0; v < 4; ++v) {
    // Per round: 1020 x86 kicks and 1020 SBI kicks to missing IDs, 3 + 6 absurd ones.
    EXPECT_GE(r.pv(v).kicks_invalid, 2u * (1020 + 9)) << "vCPU " << v;
  }
}

TEST(HostileGuest, UnknownHypercallNumbersAndSbiCalls) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto r = boot(*kvm, hostile("unknown-hypercall", 1));
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << describe(r);
}

TEST(HostileGuest, EveryVcpuHaltedIsADeadlock) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto r = boot(*kvm, hostile("all-halt", 3));
  EXPECT_EQ(r.outcome, Outcome::kDeadlock) << describe(r);
  EXPECT_EQ(machine::exit_code(r.outcome), 5);
  ASSERT_EQ(r.details.size(), 3u);
  for (const auto& line : r.details) EXPECT_NE(line.find("halted, kick not pending"), std::string::npos) << line;
}

TEST(HostileGuest, SpinningForeverMeetsTheWatchdogAndIsNotShownAsRunningAfterwards) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = hostile("spin", 2);
  // Long enough for vCPU 1 to boot and finish on a slow or loaded host (the
  // nested machine under ASan), so its line says "done".
  config.timeout_s = 3;
  const auto r = boot(*kvm, config);
  EXPECT_EQ(r.outcome, Outcome::kTimeout) << describe(r);
  EXPECT_EQ(machine::exit_code(r.outcome), 4);
  ASSERT_EQ(r.details.size(), 2u);
  // vCPU 0 never exited to the VMM: no RIP to show, and never "RIP 0x0".
  EXPECT_NE(r.details[0].find("vCPU 0: running"), std::string::npos) << r.details[0];
  EXPECT_NE(r.details[0].find("no exit yet"), std::string::npos) << r.details[0];
  EXPECT_EQ(r.details[0].find("RIP 0x0"), std::string::npos) << r.details[0];
  EXPECT_NE(r.details[1].find("vCPU 1: done"), std::string::npos) << r.details[1];
  EXPECT_NE(r.details[1].find("RIP 0x"), std::string::npos) << r.details[1];
  // Once the run has ended, the spinning vCPU is no longer "running".
  EXPECT_EQ(r.vcpus[0].final_state, machine::VcpuState::kStopped);
  EXPECT_FALSE(r.vcpus[0].exited);
  const auto j = report::run_to_json(r, config);
  EXPECT_EQ(j["vcpus"][0]["state"], "stopped");
  EXPECT_TRUE(j["vcpus"][0]["rip"].is_null());
}

// ---- CPL0: ports and vectors CPL3 cannot reach ------------------------------------------

class Cpl0Probe : public ::testing::Test {
 protected:
  std::vector<std::byte> image_ = read_file(LOCKVISOR_CPL0_PROBE_ELF);
};

TEST_F(Cpl0Probe, DoorbellPortsReadAsFloatingAndTheFaultPortReadIsNoFault) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  ASSERT_FALSE(image_.empty());
  const auto r = boot(*kvm, probe(0), image_);
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << describe(r);
  const auto* ports = r.result(0, "in_ports");
  ASSERT_NE(ports, nullptr);
  ASSERT_EQ(ports->values.size(), 1u);
  EXPECT_EQ(ports->values[0], 0xFF'FFFF'FFFFull) << std::hex << "in from E4 E5 E6 E7 E8: " << ports->values[0];
  EXPECT_EQ(r.vcpus[0].exits.at("fault"), 1u);
}

TEST_F(Cpl0Probe, ReservedAndImpossibleVectorsAreNamedAndCounted) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto r22 = boot(*kvm, probe(1), image_);
  expect_guest_fault(r22, "guest exception vector 22 (reserved)");
  EXPECT_EQ(r22.reason.find("exception exception"), std::string::npos) << r22.reason;
  EXPECT_EQ(r22.vcpus[0].exits.count("fault") ? r22.vcpus[0].exits.at("fault") : 0, 1u)
      << "the fault exit must be counted";
  const auto r300 = boot(*kvm, probe(2), image_);
  expect_guest_fault(r300, "vector 300 (no such vector)");
}

// ---- the lockvisor binary ------------------------------------------------------------------

TEST(HostileCli, PingpongWithAnEmptyElapsedArrayDoesNotCrash) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto c = lockvisor({"run", "--workload", "pingpong", "--vcpus", "1", "--image", LOCKVISOR_CPL0_PROBE_ELF,
                            "--seed", "3"});
  // An elapsed time the guest did not give is no result: a guest fault
  // (exit 3, README "Exit codes"), named, and no crash.
  EXPECT_EQ(c.exit_code, 3) << c.output;
  EXPECT_NE(c.output.find("elapsed_ns report has 0 values"), std::string::npos) << c.output;
}

TEST(HostileCli, AFloodUnderAnAddressSpaceLimitEndsAsAGuestFaultNotSigabrt) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  // Left out of ASan builds by tests/hostile/CMakeLists.txt (RLIMIT_AS and shadow memory).
  const std::vector<std::string> flood = {"run", "--workload", "hello", "--vcpus", "1", "--image",
                                          LOCKVISOR_CPL0_PROBE_ELF, "--seed", "4"};
  // 384 MiB of address space (small enough for the 1 GiB tools/nested-kvm
  // machine): the default 64 MiB report limit ends the run.
  const rlim_t address_space = rlim_t{384} << 20;
  const auto limited = lockvisor(flood, address_space);
  EXPECT_EQ(limited.exit_code, 3) << limited.output;
  EXPECT_NE(limited.output.find("--max-report-bytes"), std::string::npos) << limited.output;
  // With the limit raised past the address space, the allocation fails
  // first: a host error with a line, not std::terminate (134).
  auto unlimited = flood;
  unlimited.insert(unlimited.end(), {"--max-report-bytes", "64GiB"});
  const auto failed = lockvisor(unlimited, address_space);
  EXPECT_EQ(failed.exit_code, 6) << failed.output;
  EXPECT_NE(failed.output.find("out of host memory"), std::string::npos) << failed.output;
}

TEST(HostileCli, SerialWriteErrorsAreReported) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto c = lockvisor({"run", "--workload", "hello", "--serial", "/dev/full"});
  EXPECT_EQ(c.exit_code, 6) << c.output;
  EXPECT_NE(c.output.find("/dev/full): write failed"), std::string::npos) << c.output;
}

TEST(HostileCli, SerialFifoWithoutReaderIsRefusedAtOnce) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const std::string fifo = scratch("fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto c = lockvisor({"run", "--workload", "hello", "--serial", fifo}, std::nullopt, 20s);
  std::filesystem::remove(fifo);
  EXPECT_FALSE(c.timed_out) << "blocked opening a FIFO with no reader";
  EXPECT_EQ(c.exit_code, 2) << c.output;
  EXPECT_NE(c.output.find("FIFO with no reader"), std::string::npos) << c.output;
}

TEST(HostileCli, SerialFileIsUntouchedWhenSetUpFails) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  // Left out of ASan builds by tests/hostile/CMakeLists.txt (RLIMIT_AS and shadow memory).
  const std::string path = scratch("serial.txt");
  { std::ofstream(path) << "keep me\n"; }
  // 4 GiB of guest memory cannot be mapped under a 1 GiB address space: the
  // VM's set-up fails after the serial console exists, before it opens.
  const auto c = lockvisor({"run", "--workload", "hello", "--memory", "4096", "--serial", path}, rlim_t{1} << 30);
  EXPECT_NE(c.exit_code, 0) << c.output;
  std::ifstream in(path);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "keep me\n");
  std::filesystem::remove(path);
}

TEST(HostileCli, ParamKeysWithTheirOwnOptionAreRefusedAndOthersReachTheJsonAsUtf8) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto refused = lockvisor({"run", "--workload", "lockbench", "--lock", "ticket", "--param", "lock=tas"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--lock"), std::string::npos) << refused.output;
  const std::string json = scratch("param.json");
  const auto c = lockvisor({"run", "--workload", "hello", "--param", "note=\xff\xfe", "--json", json});
  EXPECT_EQ(c.exit_code, 0) << c.output;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_TRUE(j["text_replaced"].get<bool>());
  EXPECT_NE(j["config"]["args"].get<std::string>().find("note=\xEF\xBF\xBD"), std::string::npos);
  std::filesystem::remove(json);
}

TEST(HostileCli, GuestOutputOnTheConsoleIsPrefixed) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto c = lockvisor({"run", "--workload", "hello"});
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("\nserial vCPU 0| hello from lockvisor guest\n"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("\nguest vCPU 0| vCPUs: "), std::string::npos) << c.output;
}

TEST(HostileCli, LimitOptionsAreValidated) {
  for (const char* bad : {"--max-report-bytes=-1", "--max-report-messages=0", "--max-open-cases=-5",
                          "--max-serial-bytes=lots"}) {
    const auto c = lockvisor({"run", bad});
    EXPECT_EQ(c.exit_code, 2) << bad << ": " << c.output;
  }
}

}  // namespace
}  // namespace lockvisor::hostile
