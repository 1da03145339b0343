// Bad input to the lockvisor command: a clear one-line error and the
// documented non-zero exit code, never a crash or a hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>

#include "tests/support/kvm_required.h"


namespace {

struct Outcome {
  int exit_code;
  std::string output;
};

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lockvisor-cli-test-" + name)).string();
}

Outcome lockvisor(const std::string& args) {
  const std::string command = std::string(LOCKVISOR_BINARY) + " " + args + " 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe)) output += buffer.data();
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

void expect_one_line_error(const Outcome& o, int code, const std::string& mention) {
  EXPECT_EQ(o.exit_code, code) << o.output;
  EXPECT_EQ(o.output.find("lockvisor: error: "), 0u) << o.output;
  EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << "more than one line: " << o.output;
  EXPECT_NE(o.output.find(mention), std::string::npos) << o.output;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Checked before /dev/kvm is touched: no KVM needed.
TEST(CliBadInput, UsageErrors) {
  expect_one_line_error(lockvisor("run --vcpus 0"), 2, "--vcpus 0");
  expect_one_line_error(lockvisor("run --vcpus 1000"), 2, "--vcpus 1000");
  expect_one_line_error(lockvisor("run --no-such-option"), 2, "no-such-option");
  expect_one_line_error(lockvisor("run --pcpus 99999"), 2, "CPU");
  expect_one_line_error(lockvisor("run --pcpus 1-0"), 2, "backwards");
  expect_one_line_error(lockvisor("run --pcpus 1000"), 2, "does not exist");
  expect_one_line_error(lockvisor("run --memory 3"), 2, "--memory 3");
  expect_one_line_error(lockvisor("run --workload nope"), 2, "nope");
  expect_one_line_error(lockvisor("run --kick maybe"), 2, "maybe");
  expect_one_line_error(lockvisor("run --sbi-eid 0x123"), 2, "experimental range");
  expect_one_line_error(lockvisor("run --param novalue"), 2, "key=value");
  expect_one_line_error(lockvisor("frobnicate"), 2, "frobnicate");
  expect_one_line_error(lockvisor("run --workload torture --lock nope"), 2, "unknown lock");
  expect_one_line_error(lockvisor("run --workload lockbench --lock pvqspinlock --no-pv"), 2, "PV_UNHALT");
  expect_one_line_error(lockvisor("run --workload lockbench --cs-lines 17"), 2, "--cs-lines");
  expect_one_line_error(lockvisor("run --workload lockbench --duration 0"), 2, "--duration");
}

TEST(CliBadInput, ImageFiles) {
  expect_one_line_error(lockvisor("run --image /nonexistent/guest.elf"), 2, "guest image");
  const std::string empty = scratch("empty.elf");
  write_file(empty, "");
  expect_one_line_error(lockvisor("run --image " + empty), 2, "empty");
  const std::string text = scratch("text.elf");
  write_file(text, "this is not an ELF file at all, just text\n");
  expect_one_line_error(lockvisor("run --image " + text), 2, "not an ELF");
  std::ifstream guest(LOCKVISOR_GUEST_ELF, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(guest)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 4096u);
  const std::string truncated = scratch("truncated.elf");
  write_file(truncated, bytes.substr(0, 4200));  // cuts into the first PT_LOAD (file offset 0x1000)
  expect_one_line_error(lockvisor("run --image " + truncated), 2, "guest image");
  expect_one_line_error(lockvisor("run --memory 4 --vcpus 8"), 2, "too small");
  expect_one_line_error(lockvisor("run --image " + text + " --timeout -1"), 2, "--timeout");
}

// Exit codes by whose fault an error is (README.md, "Exit codes"), checked with
// LOCKVISOR_KVM_DEVICE naming a device that is missing or no KVM device: no
// test here needs /dev/kvm, so they run in every CI.

struct SplitOutcome {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs `env NAME=VALUE... lockvisor args`, stdout and stderr apart.
SplitOutcome lockvisor_env(const std::string& env, const std::string& args) {
  const std::string out_path = scratch("stdout-" + std::to_string(::getpid()) + ".out");
  std::filesystem::remove(out_path);
  const std::string command = "env " + env + " " + LOCKVISOR_BINARY + " " + args + " 2>&1 >" + out_path;
  std::FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string err;
  std::array<char, 4096> buffer{};
  while (pipe != nullptr && std::fgets(buffer.data(), buffer.size(), pipe)) err += buffer.data();
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  std::ifstream in(out_path);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(out_path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out, err};
}

// Exactly one line on stderr, "lockvisor: error: ...", containing every one of `mentions`.
void expect_stderr_line(const SplitOutcome& o, int code, std::initializer_list<std::string> mentions,
                        const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(o.exit_code, code) << "stderr: " << o.err << "stdout: " << o.out;
  EXPECT_EQ(o.err.rfind("lockvisor: error: ", 0), 0u) << o.err;
  ASSERT_FALSE(o.err.empty());
  EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "not exactly one line: " << o.err;
  for (const auto& mention : mentions) EXPECT_NE(o.err.find(mention), std::string::npos) << mention << " in " << o.err;
}

const std::string kMissingDevice = "/nonexistent/kvm";
const std::string kNoDevice = "LOCKVISOR_KVM_DEVICE=" + kMissingDevice;

TEST(CliNoKvm, GuestCommandsExit6NamingTheMissingDevice) {
  for (const std::string args : {"run", "run --workload hello --vcpus 2", "conformance", "conformance --filter kick",
                                 "bench", "bench --contended"}) {
    const auto o = lockvisor_env(kNoDevice, args);
    expect_stderr_line(o, 6, {"no usable KVM at " + kMissingDevice, std::strerror(ENOENT), "LOCKVISOR_KVM_DEVICE"},
                       args);
    EXPECT_EQ(o.out, "") << args;
  }
}

TEST(CliNoKvm, DoctorSaysNoUsableKvmAtThePathAndExits6) {
  const auto o = lockvisor_env(kNoDevice, "doctor");
  expect_stderr_line(o, 6, {"no usable KVM at " + kMissingDevice, std::strerror(ENOENT)}, "doctor");
  EXPECT_NE(o.out.find("KVM device     : " + kMissingDevice + ": no usable KVM at this path"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("none can run here"), std::string::npos) << o.out;
}

TEST(CliNoKvm, DeviceThatIsNoKvmExits6WithTheErrnoText) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  struct Case {
    std::string device;
    std::string errno_text;
  };
  const Case cases[] = {{"/dev/null", std::strerror(ENOTTY)}, {dir, std::strerror(EISDIR)}};
  for (const auto& c : cases)
    for (const std::string command : {"run", "conformance", "bench", "doctor"}) {
      const auto o = lockvisor_env("LOCKVISOR_KVM_DEVICE=" + c.device, command);
      expect_stderr_line(o, 6, {"no usable KVM at " + c.device, c.errno_text}, command + " on " + c.device);
    }
}

TEST(CliNoKvm, BadOptionsStillExit2) {
  // Usage errors are found before the KVM device is opened: 2, not 6.
  const std::pair<std::string, std::string> cases[] = {
      {"run --no-such-option", "no-such-option"},
      {"run --vcpus 1000", "--vcpus 1000"},
      {"run --vcpus 0", "--vcpus 0"},
      {"frobnicate", "unknown command 'frobnicate'"},
      {"conformance --no-such-option", "no-such-option"},
      {"conformance --filter no-such-case", "matches no case"},
      {"bench --repeat many", "many"},
  };
  for (const auto& [args, mention] : cases) {
    const auto o = lockvisor_env(kNoDevice, args);
    expect_stderr_line(o, 2, {mention}, args);
    EXPECT_EQ(o.err.find("KVM"), std::string::npos) << args << ": " << o.err;
  }
}

TEST(CliNoKvm, MissingImageFileIsBadInputExit2) {
  const std::string image = "/nonexistent/guest.elf";
  for (const std::string command : {"run", "conformance"}) {
    const auto o = lockvisor_env(kNoDevice, command + " --image " + image);
    expect_stderr_line(o, 2, {"guest image", image, std::strerror(ENOENT)}, command);
    EXPECT_EQ(o.err.find(kMissingDevice), std::string::npos) << o.err;
  }
}

TEST(CliNoKvm, BadJsonPathIsBadInputExit2) {
  const auto o = lockvisor_env(kNoDevice, "run --native --workload uncontended --vcpus 1 --iterations 1000 --json "
                                          "/nonexistent/dir/report.json");
  expect_stderr_line(o, 2, {"--json /nonexistent/dir/report.json"}, "--json");
}

TEST(CliNoKvm, NativeRunsNeedNoKvmDevice) {
  const auto o = lockvisor_env(kNoDevice, "run --native --workload uncontended --vcpus 1 --iterations 1000");
  EXPECT_EQ(o.exit_code, 0) << o.err << o.out;
  EXPECT_EQ(o.err, "");
}


// Runs lockvisor, sends it SIGINT after `delay`, returns exit code and output.
Outcome interrupt_after(const std::string& args, std::chrono::milliseconds delay) {
  // Per-process name, removed first: a stale file from an earlier run must
  // not look like this run's header.
  const std::string out_path = scratch("sigint-" + std::to_string(::getpid()) + ".out");
  std::filesystem::remove(out_path);
  const std::string command = std::string("exec ") + LOCKVISOR_BINARY + " " + args + " > " + out_path + " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  // Signal only once the VM runs (its header line is out): start-up can be
  // slow under sanitizers and emulation, and an early SIGINT tests nothing.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    std::ifstream partial(out_path);
    const std::string text((std::istreambuf_iterator<char>(partial)), std::istreambuf_iterator<char>());
    if (text.find("lockvisor run:") != std::string::npos || std::chrono::steady_clock::now() > give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(out_path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
          std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The keys every lock-run report carries (issue: lock runtime, metrics).
void expect_lock_report_keys(const nlohmann::json& j) {
  for (const char* key : {"lock", "workload", "vcpus", "pcpus", "params", "duration_s", "ops_total", "ops_per_sec",
                          "per_vcpu_ops", "fairness", "latency_ns", "violations", "pv", "vmm", "cpu_seconds",
                          "ops_per_cpu_second", "host_preemptions", "steal_ns", "host"})
    EXPECT_TRUE(j.contains(key)) << "missing key " << key;
  for (const char* key : {"jain", "max_min_ratio", "cv"}) EXPECT_TRUE(j["fairness"].contains(key)) << key;
  for (const char* key : {"p50", "p90", "p99", "p999", "max"}) EXPECT_TRUE(j["latency_ns"].contains(key)) << key;
  for (const char* key : {"kvm", "cpu_model", "kernel", "lockvisor_version"}) EXPECT_TRUE(j["host"].contains(key)) << key;
  EXPECT_GT(j["ops_total"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(j["violations"].get<std::uint64_t>(), 0u);
  EXPECT_GT(j["cpu_seconds"].get<double>(), 0.0);
}

TEST(CliNative, LockbenchJsonHasEveryKey) {
  const std::string json = scratch("native.json");
  std::filesystem::remove(json);
  const auto o = lockvisor("run --native --workload lockbench --lock ticket --vcpus 2 --duration 0.2 --json " + json);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const auto j = read_json(json);
  expect_lock_report_keys(j);
  EXPECT_EQ(j["mode"], "native");
  EXPECT_TRUE(j["vmm"].is_null());
}

TEST(CliKvm, GuestLockbenchJsonHasEveryKey) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const std::string json = scratch("guest.json");
  std::filesystem::remove(json);
  const auto o = lockvisor("run --workload lockbench --lock pvqspinlock --vcpus 4 --pcpus 0 --duration 0.3 --json " + json);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const auto j = read_json(json);
  expect_lock_report_keys(j);
  EXPECT_EQ(j["mode"], "guest");
  EXPECT_EQ(j["host"]["kvm"].get<std::string>().empty(), false);
  EXPECT_TRUE(j["pv_kicks_match_vmm"].get<bool>());
  EXPECT_FALSE(j["host_preemptions"].is_null());
  EXPECT_FALSE(j["steal_ns"].is_null());
}

TEST(CliKvm, WatchdogStopsTheGuestWithExitCode4) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = lockvisor("run --workload pingpong --vcpus 2 --rounds 1000000000 --timeout 1");
  EXPECT_EQ(o.exit_code, 4) << o.output;
  EXPECT_NE(o.output.find("watchdog"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("vCPU 1: "), std::string::npos) << "per-vCPU state missing:\n" << o.output;
}

TEST(CliKvm, SigintStopsCleanlyAndStillReports) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = interrupt_after("run --workload pingpong --vcpus 2 --rounds 1000000000", std::chrono::milliseconds(500));
  EXPECT_EQ(o.exit_code, 130) << o.output;
  EXPECT_NE(o.output.find("stopped by SIGINT"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("vCPU    state"), std::string::npos) << "no statistics table:\n" << o.output;
}

TEST(CliKvm, LossyPingpongLostWakeupIsReported) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = lockvisor("run --workload pingpong --vcpus 2 --rounds 1000000 --kick lossy --timeout 120");
  EXPECT_EQ(o.exit_code, 5) << o.output;
  EXPECT_NE(o.output.find("deadlock"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("kick not pending"), std::string::npos) << o.output;
}

TEST(CliKvm, OvercommittedPingpongPrintsStatistics) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = lockvisor("run --workload pingpong --vcpus 8 --pcpus 0 --rounds 2000");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("outcome: completed"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("16000 hand-offs"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("   7     done      0"), std::string::npos) << o.output;
}

}  // namespace
