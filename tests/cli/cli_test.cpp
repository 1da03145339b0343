// Bad input to the lockvisor command: a clear one-line error and the
// documented non-zero exit code, never a crash or a hang. One file (over 500
// lines): every case runs the same binary through the same spawn helpers.
#include <elf.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/ucall.h"
#include "lockvisor/abi/workload.h"
#include "tests/support/command_output.h"
#include "tests/support/elf_header.h"
#include "tests/support/kvm_required.h"
#include "vmm/report/pingpong_rate.h"


namespace {

using Outcome = lockvisor::test::CommandOutput;

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lockvisor-cli-test-" + name)).string();
}

Outcome lockvisor(const std::string& args) {
  return lockvisor::test::run_command(std::string(LOCKVISOR_BINARY) + " " + args);
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
// One past lockvisor's most vCPUs, as an argument.
const std::string kTooManyVcpus = std::to_string(lockvisor::abi::kMaxVcpus + 1);

TEST(CliBadInput, UsageErrors) {
  expect_one_line_error(lockvisor("run --vcpus 0"), 2, "--vcpus 0");
  expect_one_line_error(lockvisor("run --vcpus 100000"), 2, "--vcpus 100000");
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
  expect_one_line_error(lockvisor("run --vcpus " + kTooManyVcpus), 2, "--vcpus " + kTooManyVcpus);
  // The most vCPUs need more than the default --memory for their stacks
  // (128 KiB each): without --memory the run takes what they need, an
  // explicit --memory below it is refused naming the size, before anything runs.
  expect_one_line_error(lockvisor("run --memory 64 --vcpus " + std::to_string(lockvisor::abi::kMaxVcpus)), 2,
                        "--memory 64 MiB is too small for this image and " + std::to_string(lockvisor::abi::kMaxVcpus) +
                            " vCPUs (need at least 144 MiB)");
  expect_one_line_error(lockvisor("run --workload lockbench --cs-lines 17"), 2, "--cs-lines");
  expect_one_line_error(lockvisor("run --workload lockbench --duration 0"), 2, "--duration");
  expect_one_line_error(lockvisor("run --backend kvm --kick lossy"), 2, "sticky");
  expect_one_line_error(lockvisor("run --backend kvm --kick-delay-us 5"), 2, "--kick-delay-us");
  expect_one_line_error(lockvisor("run --guest-ring 1"), 2, "--guest-ring");
  expect_one_line_error(lockvisor("run --backend nope"), 2, "nope");
  // --pv-wake: an IPI or NMI needs KVM's LAPIC and CPL0, refused before anything runs.
  expect_one_line_error(lockvisor("run --pv-wake smoke-signal"), 2, "smoke-signal");
  expect_one_line_error(lockvisor("run --workload lockbench --lock pvticket --pv-wake ipi"), 2,
                        "--pv-wake ipi: needs --backend kvm --guest-ring 0");
  expect_one_line_error(lockvisor("run --workload lockbench --lock pvticket --backend kvm --pv-wake nmi"), 2,
                        "--pv-wake nmi: needs --backend kvm --guest-ring 0");
  expect_one_line_error(lockvisor("run --workload lockbench --lock pvticket --guest-ring 0 --pv-wake nmi"), 2,
                        "--pv-wake nmi: needs --backend kvm --guest-ring 0");
}

// Linux-guest options: checked before anything is read or booted. On PVM
// the kernel is refused as such (PVM runs no ordinary kernel), anywhere else
// a kernel that is not a file, or not a kernel, is bad input.
TEST(CliBadInput, LinuxGuestOptions) {
  expect_one_line_error(lockvisor("run --initrd /tmp/x"), 2, "--initrd: needs --kernel FILE");
  expect_one_line_error(lockvisor("run --guest-lock tas"), 2, "--guest-lock: needs --kernel FILE");
  // The MADT and MP table name 8-bit xAPIC ids: refused before the PVM check
  // and before the kernel is opened (it does not exist).
  expect_one_line_error(lockvisor("run --kernel /nonexistent/vmlinuz --vcpus 255"), 2,
                        "--vcpus 255: a Linux guest has at most 254");
  expect_one_line_error(lockvisor("run --workload futex-hash"), 2, "needs --kernel FILE");
  expect_one_line_error(lockvisor("run --kernel /tmp/x --guest-lock maybe"), 2, "maybe");
  const std::string not_a_kernel = scratch("not-a-kernel");
  write_file(not_a_kernel, std::string(8192, 'x'));
  const auto bad = lockvisor("run --kernel " + not_a_kernel + " --vcpus 2");
  if (lockvisor::kvm::detect_backend() == lockvisor::kvm::Backend::kPvm) {
    expect_one_line_error(bad, 2, "Linux guests cannot run on this PVM host");
    // Refused before the file is even opened: a missing one says the same.
    expect_one_line_error(lockvisor("run --kernel /nonexistent/vmlinuz"), 2, "PVM host");
    return;
  }
  expect_one_line_error(bad, 2, "not a Linux bzImage");
  expect_one_line_error(lockvisor("run --kernel /nonexistent/vmlinuz"), 2, "No such file");
  expect_one_line_error(lockvisor("run --kernel /dev/null"), 2, "not a regular file");
  expect_one_line_error(lockvisor("run --kernel " + not_a_kernel + " --native"), 2, "--native");
  // A one-CPU kernel keeps its native lock: asking it for pv or tas is refused
  // before the kernel is read; native with one vCPU is what it will get.
  for (const char* lock : {"pv", "tas"})
    expect_one_line_error(lockvisor("run --kernel /nonexistent/vmlinuz --vcpus 1 --guest-lock " + std::string(lock)),
                          2, "needs --vcpus 2 or more");
  expect_one_line_error(lockvisor("run --kernel /nonexistent/vmlinuz --vcpus 1 --guest-lock native"), 2,
                        "No such file");
  expect_one_line_error(lockvisor("run --vm label=a,guest-lock=tas --vm label=b --kernel /nonexistent/vmlinuz --vcpus 1"),
                        2, "needs --vcpus 2 or more");
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

// An empty value ("$OUT" with OUT unset) is refused for every option and
// positional of every command, before anything runs: exit 2, one line
// naming it. A native run would otherwise write no JSON and exit 0.
TEST(CliBadInput, EmptyValuesAreRefusedForEveryCommand) {
  const std::pair<std::string, std::string> cases[] = {
      {"run --json ''", "--json"},
      {"run --native --workload lockbench --duration 0.01 --json ''", "--json"},
      {"run --trace ''", "--trace"},
      {"run --serial ''", "--serial"},
      {"run --api ''", "--api"},
      {"run --image ''", "--image"},
      {"run --kernel ''", "--kernel"},
      {"run --vm ''", "--vm"},
      {"conformance --json ''", "--json"},
      {"conformance --linux ''", "--linux"},
      {"bench --json ''", "--json"},
      {"bench --image ''", "--image"},
      {"lab --preset quick --out ''", "--out"},
      {"lab --scenario '' --dry-run", "--scenario"},
      {"lab --preset linux-policies --kernel '' --dry-run", "--kernel"},
      {"lab merge '' a b", "out"},
      {"lab report ''", "dir"},
      {"trace-check ''", "FILE"},
      {"ctl '' stats", "socket"},
      {"linux initramfs --out ''", "--out"},
      {"linux report ''", "log"},
      {"linux report /dev/null --json ''", "--json"},
  };
  for (const auto& [args, name] : cases) {
    SCOPED_TRACE(args);
    expect_one_line_error(lockvisor(args), 2, name + ": the value is empty");
  }
  // A lab point's value, checked as the point's run command line.
  expect_one_line_error(lockvisor("lab --preset quick --set kernel= --dry-run"), 2, "--kernel: the value is empty");
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
  // No device, no KVM kind: not the kernel's flavour (PVM on a host that is itself a PVM guest).
  EXPECT_NE(o.out.find("KVM kind       : none (no usable KVM device"), std::string::npos) << o.out;
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
      {"run --vcpus " + kTooManyVcpus, "--vcpus " + kTooManyVcpus},
      {"run --vcpus 0", "--vcpus 0"},
      {"frobnicate", "unknown command 'frobnicate'"},
      {"conformance --no-such-option", "no-such-option"},
      {"conformance --filter no-such-case", "matches no case"},
      {"bench --repeat many", "many"},
      {"bench --startup --startup-vcpus 0", "--startup-vcpus: 0 is out of range 1.." + std::to_string(lockvisor::abi::kMaxVcpus)},
      {"bench --startup --startup-vcpus 1," + kTooManyVcpus,
       "--startup-vcpus: " + kTooManyVcpus + " is out of range 1.." + std::to_string(lockvisor::abi::kMaxVcpus)},
      {"bench --startup --startup-vcpus 99999999999", "out of range"},
      {"bench --startup --startup-vcpus 1,,8", "an empty item"},
      {"bench --startup --startup-vcpus 8,", "an empty item"},
      {"bench --startup --startup-vcpus -1", "'-1' is neither a vCPU count nor 'limit'"},
      {"bench --startup --startup-vcpus 0x10", "'0x10'"},
      {"bench --startup --startup-vcpus 1,max", "'max'"},
      {"bench --startup --startup-vcpus ''", "--startup-vcpus: the value is empty"},
      {"bench --startup-vcpus 1,8", "--startup-vcpus requires --startup"},
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

// An --image that is an ELF file but no guest (a host program) is refused
// before anything runs by every command that boots one, not failed case by
// case (conformance) or after opening KVM.
TEST(CliNoKvm, AnImageThatIsNoGuestIsBadInputExit2) {
  for (const std::string command : {"run", "conformance", "bench"}) {
    const auto o = lockvisor_env(kNoDevice, command + " --image /bin/ls");
    expect_stderr_line(o, 2, {"guest image", "not an executable"}, command);
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
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0 || pid <= 0) {
    ADD_FAILURE() << "posix_spawn /bin/sh failed";
    return {};  // never kill(pid <= 0): that signals a whole process group, or everything
  }
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

// The keys every lock-run report carries (lock runtime, metrics).
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

// --version and every run report name the commit the binary was built from
// (written at build time, not when the build was configured): a commit of
// this source tree, the same text in both places.
TEST(CliVersion, NamesACommitOfThisTree) {
  const Outcome v = lockvisor("--version");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  const std::string text = v.output.substr(0, v.output.find('\n'));
  if (!std::filesystem::exists(std::filesystem::path(LOCKVISOR_SOURCE_DIR) / ".git")) {
    EXPECT_TRUE(text.ends_with(" (not a git checkout)")) << text;
    return;
  }
  const std::string prefix = " (git ";
  const auto at = text.find(prefix);
  ASSERT_NE(at, std::string::npos) << text;
  ASSERT_EQ(text.back(), ')') << text;
  std::string commit = text.substr(at + prefix.size(), text.size() - 1 - at - prefix.size());
  if (commit.ends_with("-dirty")) commit.resize(commit.size() - 6);
  ASSERT_GE(commit.size(), 7u) << text;
  ASSERT_EQ(commit.find_first_not_of("0123456789abcdef"), std::string::npos) << text;
  const auto git = lockvisor::test::run_command("git -C " + std::string(LOCKVISOR_SOURCE_DIR) + " cat-file -e " +
                                                commit + "^{commit}");
  EXPECT_EQ(git.exit_code, 0) << commit << " is not a commit of " << LOCKVISOR_SOURCE_DIR << ": " << git.output;

  const std::string json = scratch("version.json");
  const Outcome run = lockvisor("run --native --workload lockbench --lock tas --vcpus 1 --duration 0.05 --json " + json);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(read_json(json)["host"]["lockvisor_version"].get<std::string>(), text);
  std::filesystem::remove(json);
}

// A pingpong guest's elapsed_ns is untrusted: missing, empty, multi-valued
// or zero, there is no hand-off rate, and the run is a guest fault (exit 3,
// "unusable results"), not a completed run with exit 0.
TEST(CliPingpongRate, UnusableElapsedReportIsAGuestFaultExit3) {
  namespace m = lockvisor::machine;
  const auto run_with = [](std::optional<std::vector<std::uint64_t>> elapsed) {
    m::RunResult r;
    r.vcpus.resize(2);
    if (elapsed) r.vcpus[0].results.push_back({"elapsed_ns", *elapsed, 0});
    return r;
  };
  const struct {
    std::optional<std::vector<std::uint64_t>> elapsed;
    const char* reason;
  } cases[] = {
      {std::vector<std::uint64_t>{}, "pingpong: the guest's elapsed_ns report has 0 values, not 1: no hand-off rate"},
      {std::vector<std::uint64_t>{5, 6}, "pingpong: the guest's elapsed_ns report has 2 values, not 1: no hand-off rate"},
      {std::vector<std::uint64_t>{0}, "pingpong: the guest's elapsed_ns is 0: no hand-off rate"},
      {std::nullopt, "pingpong: the guest reported no elapsed_ns: no hand-off rate"},
  };
  for (const auto& c : cases) {
    auto r = run_with(c.elapsed);
    EXPECT_FALSE(lockvisor::report::pingpong_rate(r, 10).has_value()) << c.reason;
    EXPECT_EQ(m::exit_code(r.outcome), 3) << c.reason;
    EXPECT_EQ(r.reason, c.reason);
    EXPECT_EQ(r.reason.find('\n'), std::string::npos);
  }
  // A usable report: 2 vCPUs x 10 rounds in 2 ms, the run stays completed.
  auto ok = run_with(std::vector<std::uint64_t>{2000000});
  const auto rate = lockvisor::report::pingpong_rate(ok, 10);
  ASSERT_TRUE(rate.has_value());
  EXPECT_EQ(rate->handoffs, 20u);
  EXPECT_DOUBLE_EQ(rate->us_per_handoff, 100.0);
  EXPECT_EQ(m::exit_code(ok.outcome), 0);
  // A run that did not complete keeps its own outcome.
  auto timed_out = run_with(std::vector<std::uint64_t>{});
  timed_out.outcome = m::Outcome::kTimeout;
  EXPECT_FALSE(lockvisor::report::pingpong_rate(timed_out, 10).has_value());
  EXPECT_EQ(timed_out.outcome, m::Outcome::kTimeout);
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

// --native --inject: the threads are parked (periodic, random, holder) and
// the report counts it per thread, in the text and in the JSON.
TEST(CliNative, InjectedPreemptionsAreCountedPerThread) {
  const std::string json = scratch("native-inject.json");
  std::filesystem::remove(json);
  const auto o = lockvisor(
      "run --native --workload lockbench --lock tas --vcpus 2 --iterations 4000 --seed 3 "
      "--inject holder:lock=0,every=100,for=10us --inject periodic:vcpu=1,every=1s,for=10us,count=1 --json " + json);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("injected preemptions (--inject), per thread and kind:"), std::string::npos) << o.output;
  const auto j = read_json(json);
  const auto& injected = j["injected_preemptions"];
  ASSERT_TRUE(injected["threads"].is_array()) << j.dump();
  ASSERT_EQ(injected["threads"].size(), 2u);
  EXPECT_TRUE(injected["injector_behind_ns"].is_number_unsigned()) << injected.dump();
  for (const auto& t : injected["threads"]) {
    const auto& holder = t["by_kind"]["holder"];
    EXPECT_GT(holder["events"].get<std::uint64_t>(), 0u) << t.dump();
    // One holder park in a hundred acquisitions (at a seeded phase).
    EXPECT_LE(holder["count"].get<std::uint64_t>(), holder["events"].get<std::uint64_t>() / 100 + 1) << t.dump();
    EXPECT_EQ(holder["ns"].get<std::uint64_t>(), holder["count"].get<std::uint64_t>() * 10000) << t.dump();
    EXPECT_TRUE(t["by_kind"].contains("periodic")) << t.dump();
    EXPECT_GE(t["requested"].get<std::uint64_t>(), holder["count"].get<std::uint64_t>()) << t.dump();
  }
}

// The outer-host marker tools/nested-kvm/run.sh sets (vmm/host/emulation.h):
// believed only on QEMU's CPU, where the JSON and the text say the run was
// emulated and name the outer host; elsewhere recorded as ignored, with why.
bool inside_qemu() {
  std::ifstream cpuinfo("/proc/cpuinfo"), dmi("/sys/class/dmi/id/sys_vendor");
  bool hypervisor = false;
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0) {
      hypervisor = (line + ' ').find(" hypervisor ") != std::string::npos;
      break;
    }
  std::string vendor;
  std::getline(dmi, vendor);
  return hypervisor && vendor == "QEMU";
}

const std::string kOuterHostMarker =
    "LOCKVISOR_OUTER_HOST='vendor=GenuineIntel;family=6;model=207;stepping=2;kernel=6.18.44;cpus=16;kvm=PVM'";

// A report's host section and its command's stdout, made with kOuterHostMarker.
void expect_marked_host(const nlohmann::json& host, const std::string& out) {
  if (inside_qemu()) {
    EXPECT_EQ(host.at("emulated"), true) << host;
    EXPECT_EQ(host.at("outer").at("cpu_model"), "207") << host;
    EXPECT_EQ(host.at("outer").at("kvm"), "PVM") << host;
    EXPECT_NE(out.find("EMULATED (nested): "), std::string::npos) << out;
    EXPECT_NE(out.find("outer host GenuineIntel family 6 model 207 stepping 2, Linux 6.18.44, 16 CPUs, KVM PVM"),
              std::string::npos)
        << out;
  } else {
    EXPECT_EQ(host.at("emulated"), false) << host;
    EXPECT_TRUE(host.at("outer").is_null()) << host;
    EXPECT_NE(host.value("outer_ignored", "").find("LOCKVISOR_OUTER_HOST is set, but"), std::string::npos) << host;
    EXPECT_EQ(out.find("EMULATED"), std::string::npos) << out;
  }
}

// The same without the marker: a real host, nothing ignored.
void expect_unmarked_host(const nlohmann::json& host, const std::string& out) {
  EXPECT_EQ(host.at("emulated"), false) << host;
  EXPECT_FALSE(host.contains("outer_ignored")) << host;
  EXPECT_EQ(out.find("EMULATED"), std::string::npos) << out;
}

TEST(CliNative, TheOuterHostMarkerMarksTheRunEmulatedOnlyInsideQemu) {
  const std::string json = scratch("emulated.json");
  const std::string run = "run --native --workload lockbench --lock ticket --vcpus 1 --duration 0.05 --json " + json;
  std::filesystem::remove(json);
  const auto marked = lockvisor_env(kOuterHostMarker, run);
  ASSERT_EQ(marked.exit_code, 0) << marked.err << marked.out;
  expect_marked_host(read_json(json)["host"], marked.out);
  std::filesystem::remove(json);
  const auto unmarked = lockvisor_env("-u LOCKVISOR_OUTER_HOST", run);
  ASSERT_EQ(unmarked.exit_code, 0) << unmarked.err << unmarked.out;
  expect_unmarked_host(read_json(json)["host"], unmarked.out);
}

// The multi-VM summary has a run's host section and line. Its JSON is
// written even when no VM could start (here: no KVM device, exit 6), so
// this runs on every host.
TEST(CliNoKvm, TheOuterHostMarkerMarksTheMultiVmSummaryAsARun) {
  const std::string json = scratch("emulated-vms.json");
  const std::string run = "run --vm label=a --vm label=b --json " + json;
  std::filesystem::remove(json);
  const auto marked = lockvisor_env(kNoDevice + " " + kOuterHostMarker, run);
  EXPECT_EQ(marked.exit_code, 6) << marked.err << marked.out;
  const auto j = read_json(json);
  EXPECT_EQ(j.at("vms").size(), 2u) << j;
  EXPECT_EQ(j.at("host").at("kvm"), "none") << j;
  expect_marked_host(j.at("host"), marked.out);
  std::filesystem::remove(json);
  const auto unmarked = lockvisor_env("-u LOCKVISOR_OUTER_HOST " + kNoDevice, run);
  EXPECT_EQ(unmarked.exit_code, 6) << unmarked.err << unmarked.out;
  expect_unmarked_host(read_json(json).at("host"), unmarked.out);
}

// `linux report` names how a console log ended as `run --kernel` names its
// run's end, with the run's classifier of the kernel's lines: a panic and
// init killed are exit code 3 with the panic line (the init's figures still
// shown), a clean log is the init's own outcome; a log with neither a line
// of lockvisor's init nor a panic is refused.
TEST(CliLinuxReport, AConsoleLogEndsAsARunWouldEnd) {
  std::ifstream in(LOCKVISOR_LINUX_TEST_DATA "/qemu-tcg-debian-6.1-lockref.console", std::ios::binary);
  const std::string clean((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto init_at = clean.find("lockvisor-init: "), exit_at = clean.find("lockvisor-init: exit ");
  ASSERT_NE(init_at, std::string::npos);
  ASSERT_NE(exit_at, std::string::npos);
  const std::string boot = clean.substr(0, init_at);
  const std::string vfs = "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)";
  const std::string killed = "Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b";
  struct Case {
    std::string name, log, outcome;
    int code;
    nlohmann::json kernel_end;
  };
  const Case cases[] = {
      {"clean", clean, "completed", 0, nullptr},
      {"panic", boot + "[    1.3] " + vfs + "\r\n[    1.4] Kernel Offset: disabled\r\n", "kernel-panic", 3,
       {{"kind", "kernel-panic"}, {"line", vfs}}},
      {"init-killed", clean.substr(0, exit_at) + "[    7.9] " + killed + "\r\n", "init-killed", 3,
       {{"kind", "init-killed"}, {"line", killed}}},
  };
  const std::string log = scratch("console.log"), json = scratch("console.json");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write_file(log, c.log);
    std::filesystem::remove(json);
    const auto o = lockvisor("linux report " + log + " --json " + json);
    EXPECT_EQ(o.exit_code, c.code) << o.output;
    const std::string outcome_line = "outcome: " + c.outcome + " (exit code " + std::to_string(c.code) + "): ";
    EXPECT_NE(o.output.find(outcome_line + (c.kernel_end.is_null() ? "" : c.kernel_end["line"].get<std::string>())),
              std::string::npos)
        << o.output;
    const auto j = read_json(json);
    EXPECT_EQ(j.at("outcome"), c.outcome) << j;
    EXPECT_EQ(j.at("linux").at("kernel_end"), c.kernel_end) << j;
    if (c.name != "panic") {
      EXPECT_NE(o.output.find("linux: 2 CPUs online (0-1)"), std::string::npos) << o.output;
    }
  }
  write_file(log, boot);
  expect_one_line_error(lockvisor("linux report " + log), 2, "no line of lockvisor's init and no kernel panic");
}

// --native --vnuma: each host thread is pinned to its node's CPUs (here the
// nodes share CPU 0, which every host has) and the locks read its node: cna
// with interleaved nodes moves waiters of the other node aside, which it
// can only do if the two nodes differ (numa_flush counts their return).
TEST(CliNative, VnumaGivesTheThreadsTheirNodes) {
  const std::string json = scratch("native-vnuma.json");
  std::filesystem::remove(json);
  const auto o = lockvisor(
      "run --native --workload lockbench --lock cna --vcpus 4 --vnuma 0+2@0,1+3@0 --duration 0.3 --json " + json);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("virtual NUMA: 2 nodes, 0+2@0,1+3@0"), std::string::npos) << o.output;
  const auto j = read_json(json);
  EXPECT_EQ(j["vcpu_node"], nlohmann::json::array({0, 1, 0, 1}));
  EXPECT_EQ(j["per_node_ops_per_sec"].size(), 2u);
  EXPECT_GT(j["pv"].value("numa_flush", 0), 0) << j["pv"].dump();
}

// Host threads run lock workloads only, so `run --native` without
// --workload runs the lock benchmark (a VM's default, pingpong, is not one).
TEST(CliNative, WithoutAWorkloadRunsTheLockBenchmark) {
  const std::string json = scratch("native-default.json");
  std::filesystem::remove(json);
  const auto o = lockvisor("run --native --vnuma 0@0,1@0 --lock cna --vcpus 2 --duration 0.05 --json " + json);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("cna lockbench on 2 threads"), std::string::npos) << o.output;
  EXPECT_EQ(read_json(json)["workload"], "lockbench");
  // Asked for by name, a workload that is not a lock workload is still refused.
  expect_one_line_error(lockvisor("run --native --workload pingpong"), 2, "--native runs lock workloads only");
}

// --vcpus takes a ratio of the host CPUs as the lab's words do: of --pcpus
// when given, else of the CPUs this process may use.
TEST(CliOptions, VcpusTakeARatioOfTheHostCpus) {
  const std::string json = scratch("native-ratio.json");
  const auto vcpus_of = [&](const std::string& args) {
    std::filesystem::remove(json);
    const auto o = lockvisor("run --native --lock tas --duration 0.02 --json " + json + " " + args);
    EXPECT_EQ(o.exit_code, 0) << args << ": " << o.output;
    return o.exit_code == 0 ? read_json(json)["vcpus"].get<unsigned>() : 0u;
  };
  EXPECT_EQ(vcpus_of("--vcpus 3x --pcpus 0"), 3u);
  EXPECT_EQ(vcpus_of("--vcpus 2x --pcpus 1cpu"), 2u);
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const auto usable = static_cast<unsigned>(CPU_COUNT(&mask));
  if (usable <= 256) {
    EXPECT_EQ(vcpus_of("--vcpus 2x"), 2 * usable);
  }
  expect_one_line_error(lockvisor("run --vcpus 3y"), 2, "--vcpus: '3y' is neither a count nor a ratio");
  expect_one_line_error(lockvisor("run --vcpus 0x"), 2, "--vcpus: vCPUs '0x'");
  expect_one_line_error(lockvisor("run --vcpus 1025x --pcpus 0"), 2, "--vcpus: vCPUs '1025x'");
  expect_one_line_error(lockvisor("run --vcpus 1024x --pcpus 0-1"), 2,
                        "--vcpus 1024x: 2048 vCPUs on 2 host CPUs, must be between 1 and 1024");
}

// doctor says how many vCPUs one VM may have here (the lower of the KVM's
// limit and lockvisor's own), and run refuses one more with one line.
TEST(CliKvm, DoctorNamesTheVcpuLimitThatRunKeeps) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = lockvisor("doctor");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const std::string key = "vCPUs per VM   : up to ";
  const auto at = o.output.find(key);
  ASSERT_NE(at, std::string::npos) << o.output;
  const unsigned limit = static_cast<unsigned>(std::stoul(o.output.substr(at + key.size())));
  EXPECT_GE(limit, 1u);
  EXPECT_LE(limit, lockvisor::abi::kMaxVcpus);
  const std::string over = std::to_string(limit + 1);
  expect_one_line_error(lockvisor("run --vcpus " + over), 2, "--vcpus " + over + ":");
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

// The conformance JSON has a run's host section, and its text the line.
TEST(CliKvm, TheOuterHostMarkerMarksTheConformanceResultsAsARun) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const std::string json = scratch("emulated-conformance.json");
  std::filesystem::remove(json);
  const auto o = lockvisor_env(kOuterHostMarker, "conformance --filter kick-targets --json " + json);
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  const auto j = read_json(json);
  EXPECT_EQ(j.at("passed"), 1) << j;
  EXPECT_FALSE(j.at("host").at("kvm").get<std::string>().empty()) << j;
  expect_marked_host(j.at("host"), o.out);
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

// --backend kvm and --guest-ring 0: refused on PVM with one line and exit 2;
// elsewhere (hardware KVM, the nested machine) they run, and the kvm backend
// reports KVM's own statistics and the settings.
TEST(CliKvm, KvmBackendAndGuestRing0RunOrAreRefusedOnPvm) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const std::string json = scratch("kvm-backend.json");
  std::filesystem::remove(json);
  const auto pingpong = lockvisor("run --backend kvm --workload pingpong --vcpus 8 --pcpus 0 --rounds 100 --json " + json);
  const auto ring0 = lockvisor("run --guest-ring 0 --backend kvm --workload lockbench --lock pvqspinlock --vcpus 4 "
                               "--pcpus 0 --duration 0.3");
  if (lockvisor::kvm::detect_backend() == lockvisor::kvm::Backend::kPvm) {
    expect_one_line_error(pingpong, 2, "--backend kvm");
    expect_one_line_error(lockvisor("run --guest-ring 0 --workload pingpong"), 2, "--guest-ring 0");
    expect_one_line_error(lockvisor("conformance --backend kvm"), 2, "--backend kvm");
    return;
  }
  ASSERT_EQ(pingpong.exit_code, 0) << pingpong.output;
  const auto j = read_json(json);
  EXPECT_EQ(j["settings"]["backend"], "kvm");
  EXPECT_EQ(j["settings"]["guest_ring"], 3);
  std::uint64_t hypercalls = 0;
  for (const auto& v : j["vcpus"]) {
    hypercalls += v["kvm_stats"]["hypercalls"].get<std::uint64_t>();
    EXPECT_EQ(v["exits"].value("hlt", 0), 0) << "a halt reached the VMM";
  }
  EXPECT_EQ(hypercalls, 800u);  // every hand-off is one KICK_CPU that KVM handled
  EXPECT_EQ(ring0.exit_code, 0) << ring0.output;
}

// Past 255 vCPUs a kick needs a 32-bit APIC id (the kvm backend switches
// KVM's LAPIC to x2APIC; the userspace backend maps ids itself), and the
// vCPUs' stacks need more than the default 64 MiB. A ping-pong ring of 400
// vCPUs kicks every one of them in turn: a kick that went to the wrong vCPU
// would stop the ring (a deadlock, exit 5), so a completed run with every
// vCPU's two kicks is the check. --memory is not given: the run takes what
// 400 vCPUs need.
TEST(CliKvm, KicksReachEveryVcpuPastTheXapicIdsWithMemoryForTheirStacks) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  constexpr unsigned kVcpus = 400;
  std::vector<std::string> backends = {"userspace"};
  if (lockvisor::kvm::detect_backend() != lockvisor::kvm::Backend::kPvm) backends.emplace_back("kvm");
  for (const auto& backend : backends) {
    SCOPED_TRACE(backend);
    const std::string json = scratch("many-vcpus-" + backend + ".json");
    std::filesystem::remove(json);
    const auto o = lockvisor("run --backend " + backend + " --workload pingpong --vcpus " + std::to_string(kVcpus) +
                             " --pcpus 0 --rounds 2 --timeout 300 --json " + json);
    ASSERT_EQ(o.exit_code, 0) << o.output;
    const auto j = read_json(json);
    EXPECT_GT(j["config"]["memory_mib"].get<std::uint64_t>(), 64u) << "the default would not hold the stacks";
    ASSERT_EQ(j["vcpus"].size(), kVcpus);
    std::uint64_t kicks = 0;
    for (const auto& v : j["vcpus"]) {
      const auto index = v["index"].get<unsigned>();
      EXPECT_EQ(v["apic_id"].get<unsigned>(), index);
      // Each vCPU kicked its successor once per round: KVM handled the
      // hypercall (kvm), or the VMM did (userspace).
      const auto sent = backend == "kvm" ? v["kvm_stats"]["hypercalls"].get<std::uint64_t>()
                                         : v["pv"]["kicks_sent"].get<std::uint64_t>();
      EXPECT_EQ(sent, 2u) << "vCPU " << index;
      kicks += sent;
    }
    EXPECT_EQ(kicks, 2u * kVcpus);
    std::filesystem::remove(json);
  }
}

// --pv-wake: each mechanism runs a PV lock at 4:1 with the kvm backend at
// ring 0, the JSON names it, and the guest's handler counts are KVM's
// injection counts per vCPU (wake_check.h); on PVM one line and exit 2.
// How many halts a run makes is the host scheduler's choice (none, some
// runs), so the checks are invariants: with ipi and nmi only a wake-up ends
// a halt, so every halt the guest ran is one handler entry that found it
// waiting (nmi: plus those that skipped the halt).
TEST(CliKvm, PvWakeMechanismsRunAndAgreeWithKvm) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  if (lockvisor::kvm::detect_backend() == lockvisor::kvm::Backend::kPvm) {
    expect_one_line_error(lockvisor("run --workload lockbench --lock pvticket --pv-wake ipi"), 2, "--pv-wake ipi");
    return;
  }
  for (const char* mechanism : {"hypercall", "ipi", "nmi"}) {
    SCOPED_TRACE(mechanism);
    const std::string json = scratch(std::string("pv-wake-") + mechanism + ".json");
    std::filesystem::remove(json);
    const auto o = lockvisor(std::string("run --backend kvm --guest-ring 0 --workload lockbench --lock pvticket ") +
                             "--vcpus 4 --pcpus 0 --duration 1 --pv-wake " + mechanism + " --json " + json);
    ASSERT_EQ(o.exit_code, 0) << o.output;
    EXPECT_NE(o.output.find(std::string("wake-ups (") + mechanism + ")"), std::string::npos) << o.output;
    const auto j = read_json(json);
    EXPECT_EQ(j["settings"]["pv_wake"], mechanism);
    const auto& w = j["wake"];
    EXPECT_EQ(w["mechanism"], mechanism);
    EXPECT_EQ(w["within"], true) << w.dump();  // exact agreement: wake_check.h says when it may miss
    const auto halts = j["pv_halts_guest"].get<std::uint64_t>();
    EXPECT_EQ(j["pv_halts_match_vmm"], true);
    if (std::string(mechanism) == "hypercall") {
      EXPECT_EQ(w["interrupts"], 0);
      EXPECT_GE(w["kvm"]["hypercalls"].get<std::uint64_t>(), halts > 0 ? 1u : 0u);
    } else {
      const auto woken = w["woken"].get<std::uint64_t>();
      EXPECT_EQ(woken - w["halts_skipped"].get<std::uint64_t>(), halts) << w.dump();
      EXPECT_EQ(w["interrupts"].get<std::uint64_t>(), woken + w["spurious"].get<std::uint64_t>());
      EXPECT_EQ(w["kvm"]["hypercalls"], 0) << "an IPI or NMI kick must not use KICK_CPU";
      if (woken > 0) {
        EXPECT_GT(w["handler_max_ns"].get<double>(), 0.0);
      }
    }
  }
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

// ---- Output files, option ranges, input files, exit codes -------------------
//
// Which test produces each row of README.md's exit-code table:
//   0   CliKvm.OvercommittedPingpongPrintsStatistics, CliNoKvm.NativeRunsNeedNoKvmDevice
//   1   CliKvm.GuestProgramExitingNonZeroExits1, CliKvm.MutualExclusionViolationExits1,
//       CliKvm.FailingConformanceCaseExits1, trace.cli_refusals (trace-check on a violation)
//   2   CliBadInput.*, CliOptions.*, CliOutputFiles.*
//   3   CliKvm.GuestFaultExits3, CliKvm.LockWorkloadWithoutStatisticsIsAGuestFault, CliKvm.BenchGuestFaultExits3
//   4   CliKvm.WatchdogStopsTheGuestWithExitCode4
//   5   CliKvm.LossyPingpongLostWakeupIsReported
//   6   CliNoKvm.*, CliOutputFiles.FailedJsonWriteLeavesNoTemporary
//   130 CliKvm.SigintStopsCleanlyAndStillReports

// A fresh directory, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = scratch("dir-XXXXXX");
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.insert(e.path().filename().string());
    return names;
  }

 private:
  std::filesystem::path path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `command` with /bin/sh, stdout and stderr together.
Outcome shell(const std::string& command) { return lockvisor::test::run_command(command); }

// The run's "outcome: NAME (exit code N): ..." line: exactly one, naming
// `outcome` and the exit code the process really ended with.
void expect_outcome_line(const Outcome& o, const std::string& outcome) {
  std::size_t lines = 0;
  std::string line;
  for (std::size_t at = 0; at < o.output.size();) {
    const std::size_t end = std::min(o.output.find('\n', at), o.output.size());
    if (o.output.compare(at, 9, "outcome: ") == 0) {
      ++lines;
      line = o.output.substr(at, end - at);
    }
    at = end + 1;
  }
  ASSERT_EQ(lines, 1u) << o.output;
  EXPECT_EQ(line.rfind("outcome: " + outcome, 0), 0u) << line;
  EXPECT_NE(line.find("(exit code " + std::to_string(o.exit_code) + ")"), std::string::npos)
      << "the outcome line disagrees with exit code " << o.exit_code << ": " << line;
}

// --json refuses anything but a regular file, before anything runs
// (here: before the missing KVM device is even looked at), and touches nothing.
TEST(CliOutputFiles, JsonTargetThatIsNotARegularFileIsRefused) {
  ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0600), 0);
  std::filesystem::create_directory(dir / "dir.json");
  write_file(dir / "victim", "precious");
  std::filesystem::create_symlink(dir / "victim", dir / "link.json");
  std::set<std::string> entries = {"fifo.json", "dir.json", "victim", "link.json"};
  std::vector<std::pair<std::string, std::string>> targets = {
      {dir / "fifo.json", "FIFO"}, {dir / "dir.json", "directory"}, {dir / "link.json", "symbolic link"}};
  // A character device of our own (/dev/null's numbers), so that a regression
  // in the native run, which needs no KVM and would write, damages nothing
  // of the host's. Creating one needs root; the real /dev/null is tried below
  // only with commands that would stop at the missing KVM device first.
  if (::mknod((dir / "null.json").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    targets.push_back({dir / "null.json", "character device"});
    entries.insert("null.json");
  }
  for (const std::string command :
       {"run", "run --native --workload uncontended --vcpus 1 --iterations 1000", "conformance", "bench"}) {
    auto all = targets;
    if (command.find("--native") == std::string::npos) all.push_back({"/dev/null", "character device"});
    for (const auto& [target, kind] : all) {
      const auto o = lockvisor_env(kNoDevice, command + " --json " + target);
      expect_stderr_line(o, 2, {"--json " + target, kind}, command + " --json " + target);
      EXPECT_EQ(o.out, "") << command;
    }
  }
  struct stat st {};
  ASSERT_EQ(::lstat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_TRUE(std::filesystem::is_fifo(dir / "fifo.json"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.json"));
  EXPECT_EQ(read_text(dir / "victim"), "precious");
  EXPECT_EQ(dir.entries(), entries);
}

// A symlink planted where the old writer put its temporary
// (x.json.tmp) is not written through.
TEST(CliOutputFiles, PlantedTemporarySymlinkIsNotFollowed) {
  ScratchDir dir;
  write_file(dir / "victim", "precious");
  std::filesystem::create_symlink(dir / "victim", dir / "report.json.tmp");
  const auto o = lockvisor("run --native --workload uncontended --vcpus 1 --iterations 1000 --json " + (dir / "report.json"));
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(read_text(dir / "victim"), "precious");
  EXPECT_EQ(read_json(dir / "report.json")["mode"], "native");
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"victim", "report.json", "report.json.tmp"}));
}

// A write that fails (file size limit: as a full disk would) is a
// host problem, keeps the old report whole and leaves no temporary.
TEST(CliOutputFiles, FailedJsonWriteLeavesNoTemporary) {
  ScratchDir dir;
  write_file(dir / "report.json", "old report");
  const auto o = shell("trap '' XFSZ; ulimit -f 1; exec " + std::string(LOCKVISOR_BINARY) +
                       " run --native --workload uncontended --vcpus 1 --iterations 1000 --json " + (dir / "report.json"));
  EXPECT_EQ(o.exit_code, 6) << o.output;
  EXPECT_NE(o.output.find("lockvisor: error: --json " + (dir / "report.json") + ": write failed"), std::string::npos)
      << o.output;
  EXPECT_EQ(read_text(dir / "report.json"), "old report");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"report.json"});
}

// Two outputs of one command, or an output and the command's input, that
// name one file (however spelt) are refused before anything runs: the later
// writer would silently replace the other's bytes. The file stays as it was.
TEST(CliOutputFiles, AnOutputOverAnotherOutputOrTheInputIsRefused) {
  ScratchDir dir;
  const std::string same = dir / "same.json";
  write_file(same, "keep me");
  const std::pair<std::string, std::string> cases[] = {
      {"run --workload lockbench --json " + same + " --trace " + same,
       "--trace " + same + ": the same file as --json " + same + "; give each its own"},
      {"run --workload hello --json " + same + " --serial " + (dir / "./same.json"),
       "--serial " + (dir / "./same.json") + ": the same file as --json " + same},
      {"run --native --workload lockbench --json " + same + " --trace " + same, "the same file as --json"},
      {"trace-check " + same + " --json " + same, "--json " + same + ": the same file as the trace " + same},
      {"linux report " + same + " --json " + same, "--json " + same + ": the same file as the console log " + same},
  };
  for (const auto& [args, mention] : cases) {
    SCOPED_TRACE(args);
    expect_one_line_error(lockvisor(args), 2, mention);
    EXPECT_EQ(read_text(same), "keep me");
  }
}

// --serial /dev/stdout with stdout redirected to a file: the guest's lines
// and the report both land in it, neither written over the other (the
// file's own description is shared, not reopened at offset 0).
TEST(CliKvm, SerialToARedirectedStdoutKeepsTheReport) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  ScratchDir dir;
  const auto o = shell(std::string(LOCKVISOR_BINARY) + " run --workload hello --serial /dev/stdout > " +
                       (dir / "out.txt") + " 2>&1");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  const std::string out = read_text(dir / "out.txt");
  EXPECT_NE(out.find("lockvisor run: workload hello"), std::string::npos) << out;
  EXPECT_NE(out.find("hello from lockvisor guest"), std::string::npos) << out;
  EXPECT_NE(out.find("outcome: completed"), std::string::npos) << out;
}

// An unwritable --json is a bad command line found before the run
// (exit 2 here, not the missing KVM device's 6).
TEST(CliOutputFiles, UnwritableJsonIsFoundBeforeAnythingRuns) {
  for (const std::string command : {"run", "run --workload torture", "conformance", "bench"})
    for (const std::string target : {"/nonexistent/dir/report.json", "/proc/lockvisor-report.json"}) {
      const auto o = lockvisor_env(kNoDevice, command + " --json " + target);
      expect_stderr_line(o, 2, {"--json " + target}, command + " --json " + target);
      EXPECT_EQ(o.err.find("KVM"), std::string::npos) << o.err;
    }
}

// Numbers out of range are refused when parsing, before the
// KVM device is opened: no wrap-around, no nan, no infinite or instant timeout.
TEST(CliOptions, NumbersOutOfRangeAreRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {"run --timeout inf", "--timeout"},
      {"run --timeout nan", "--timeout"},
      {"run --timeout 1e300", "--timeout"},
      {"run --duration 0x10", "'0x10' is not a finite decimal number of seconds"},
      {"run --duration ' 0.2'", "is not a finite decimal number of seconds"},
      {"run --timeout 1e-300", "--timeout"},
      {"run --timeout -1", "--timeout"},
      {"run --memory 17592186044480", "--memory"},
      {"run --memory -2", "--memory"},
      {"run --memory 8192", "--memory"},
      {"run --seed -5", "--seed"},
      {"run --vcpus -1", "--vcpus"},
      {"run --rounds -1", "--rounds"},
      {"run --spin -1", "--spin"},
      {"run --kick-delay-us 30000000", "--kick-delay-us"},
      {"run --kick-delay-us -1", "--kick-delay-us"},
      {"run --halt-poll-us 1000001", "--halt-poll-us"},
      {"run --workload lockbench --iterations -1", "--iterations"},
      {"run --workload lockbench --cs -1", "--cs"},
      {"run --workload lockbench --delay -1", "--delay"},
      {"run --workload lockbench --duration inf", "--duration"},
      {"run --workload lockbench --duration nan", "--duration"},
      {"run --workload lockbench --duration 1e-300", "--duration"},
      {"run --workload torture --locks -1", "--locks"},
      {"run --workload torture --long-hold-ns -1", "--long-hold-ns"},
      {"run --workload torture --long-hold-every -1", "--long-hold-every"},
      {"run --workload torture --cs-lines -1", "--cs-lines"},
      {"conformance --case-timeout -5", "--case-timeout"},
      {"conformance --case-timeout nan", "--case-timeout"},
      {"conformance --pingpong-rounds -1", "--pingpong-rounds"},
      {"bench --repeat -1", "--repeat"},
      {"bench --kick-rounds -1", "--kick-rounds"},
      {"bench --lock-runs 0", "--lock-runs"},
      {"bench --lock-iterations -1", "--lock-iterations"},
      {"bench --contended-seconds inf", "--contended-seconds"},
  };
  for (const auto& [args, option] : cases) {
    const auto o = lockvisor_env(kNoDevice, args);
    expect_stderr_line(o, 2, {option}, args);
    EXPECT_EQ(o.err.find("KVM"), std::string::npos) << args << ": " << o.err;
  }
}

// bench's modes (the default, --startup, --knobs) measure different things:
// an option of one given to another would be ignored, so it is refused, one
// line, before anything runs.
TEST(CliOptions, BenchOptionsOfAnotherModeAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"bench --knobs --startup", "--startup excludes --knobs"},
      {"bench --knobs --contended", "--contended excludes --knobs"},
      {"bench --startup --contended", "--startup excludes --contended"},
      {"bench --startup --lock-runs 3", "--startup excludes --lock-runs"},
      {"bench --contended-seconds 0.1", "--contended-seconds requires --contended"},
      {"bench --knobs-seconds 0.1", "--knobs-seconds requires --knobs"},
  };
  for (const auto& [args, words] : cases) {
    const auto o = lockvisor_env(kNoDevice, args);
    expect_stderr_line(o, 2, {words}, args);
  }
}

// The edges of those ranges are accepted: parsing passes and the command gets
// as far as the (missing) KVM device.
TEST(CliOptions, NumbersAtTheEdgesOfTheirRangesAreAccepted) {
  for (const std::string& args : std::vector<std::string>{
           "run --timeout 0 --memory 4096 --seed 18446744073709551615 --kick-delay-us 1000000 --halt-poll-us 0",
           "run --timeout 1000000 --memory 64 --seed 0x10", "run --timeout 0.001",
           "run --workload torture --duration 3600 --locks 16 --cs 1000000000", "conformance --case-timeout 0.001",
           "bench --startup --startup-vcpus 1,8,limit",
           "bench --startup --startup-vcpus " + std::to_string(lockvisor::abi::kMaxVcpus) + ",1"}) {
    const auto o = lockvisor_env(kNoDevice, args);
    expect_stderr_line(o, 6, {"no usable KVM"}, args);
  }
}

// An --image that is a FIFO with no writer used to block forever;
// now it reads as empty at once. (timeout -s KILL turns a hang into 137.)
TEST(CliBadInput, ImageOnAFifoWithoutWriterDoesNotBlock) {
  ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "guest.elf").c_str(), 0600), 0);
  for (const std::string command : {"run", "conformance"}) {
    const auto o = shell("timeout -s KILL 20 " + std::string(LOCKVISOR_BINARY) + " " + command + " --image " +
                         (dir / "guest.elf"));
    EXPECT_EQ(o.exit_code, 2) << command << ": " << o.output;
    EXPECT_NE(o.output.find("is empty"), std::string::npos) << o.output;
  }
  expect_one_line_error(lockvisor("run --image /dev/zero"), 2, "not a regular file");
}

// ---- Hand-made guest images -------------------------------------------------
// A few instructions at the ELF entry, run at CPL0 on every vCPU before any
// guest runtime exists: enough for a guest that faults, or that reports
// exactly what a test wants through the report channel (hypercalls/README.md).

class HandMadeGuest {
 public:
  // Sends the report-channel message `u` (placed in the image) and goes on.
  HandMadeGuest& ucall(const lockvisor::abi::Ucall& u) {
    const std::uint32_t gpa = place(&u, sizeof u);
    code({0x48, 0xC7, 0xC3});  // mov rbx, imm32 (sign-extended; below 2 GiB)
    code({static_cast<std::uint8_t>(gpa), static_cast<std::uint8_t>(gpa >> 8), static_cast<std::uint8_t>(gpa >> 16),
          static_cast<std::uint8_t>(gpa >> 24)});
    return code({0xE6, static_cast<std::uint8_t>(lockvisor::abi::kPortUcall)});  // out imm8, al
  }
  HandMadeGuest& done(std::uint64_t exit_code) {
    return ucall(message(lockvisor::abi::UcallType::kDone, "", {exit_code}));
  }
  HandMadeGuest& code(std::initializer_list<std::uint8_t> bytes) {
    code_.insert(code_.end(), bytes);
    return *this;
  }
  // Copies `size` bytes into the image's data area; returns their address.
  std::uint32_t place(const void* bytes, std::size_t size) {
    data_.resize((data_.size() + 63) & ~std::size_t{63});
    const auto at = static_cast<std::uint32_t>(kData + data_.size());
    data_.insert(data_.end(), static_cast<const std::uint8_t*>(bytes), static_cast<const std::uint8_t*>(bytes) + size);
    return at;
  }
  static lockvisor::abi::Ucall message(lockvisor::abi::UcallType type, const std::string& text,
                                       std::initializer_list<std::uint64_t> args) {
    lockvisor::abi::Ucall u{};
    u.magic = lockvisor::abi::kUcallMagic;
    u.type = type;
    std::copy(args.begin(), args.end(), u.args);
    std::memcpy(u.text, text.data(), std::min<std::size_t>(text.size(), sizeof u.text - 1));
    return u;
  }
  // The ELF file: one RWX PT_LOAD at kImageBase, code (ending in `jmp .`) then data.
  std::string write(const std::string& path) const {
    std::vector<std::uint8_t> segment(code_);
    segment.insert(segment.end(), {0xEB, 0xFE});
    EXPECT_LE(segment.size(), kData - lockvisor::abi::kImageBase);
    segment.resize(kData - lockvisor::abi::kImageBase);
    segment.insert(segment.end(), data_.begin(), data_.end());
    const Elf64_Ehdr eh = lockvisor::test::executable_header(EM_X86_64, lockvisor::abi::kImageBase, 1);
    Elf64_Phdr ph{};
    ph.p_type = PT_LOAD;
    ph.p_flags = PF_R | PF_W | PF_X;
    ph.p_offset = 0x1000;
    ph.p_vaddr = ph.p_paddr = lockvisor::abi::kImageBase;
    ph.p_filesz = ph.p_memsz = segment.size();
    ph.p_align = 0x1000;
    std::string file(0x1000, '\0');
    std::memcpy(file.data(), &eh, sizeof eh);
    std::memcpy(file.data() + sizeof eh, &ph, sizeof ph);
    file.append(reinterpret_cast<const char*>(segment.data()), segment.size());
    write_file(path, file);
    return path;
  }

 private:
  static constexpr std::uint64_t kData = lockvisor::abi::kImageBase + 0x1000;
  std::vector<std::uint8_t> code_;
  std::vector<std::uint8_t> data_;
};

// Exit code 3, through `run`: ud2 at the entry, before the guest has an IDT.
TEST(CliKvm, GuestFaultExits3) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  ScratchDir dir;
  const auto image = HandMadeGuest().code({0x0F, 0x0B}).write(dir / "fault.elf");
  const auto o = lockvisor("run --workload hello --vcpus 1 --image " + image);
  EXPECT_EQ(o.exit_code, 3) << o.output;
  expect_outcome_line(o, "guest-fault");
}

// `lockvisor bench` used to end a faulting guest's run with exit code 2.
TEST(CliKvm, BenchGuestFaultExits3) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  ScratchDir dir;
  const auto image = HandMadeGuest().code({0x0F, 0x0B}).write(dir / "fault.elf");
  const auto o = lockvisor_env("", "bench --image " + image);
  expect_stderr_line(o, 3, {"benchmark run failed: guest-fault"}, "bench");
}

// bench --startup's sweep over vCPU counts: every count reported once, the
// 1-vCPU figures as before, and memory that grows with the vCPUs (each one
// adds its own thread stack, kvm_run mapping and guest stack pages, fresh in
// every run). Times are only checked to be there: the host scheduler decides
// them. 64 against 1: a peak RSS moves by 100-200 KiB from run to run (seen
// on a PVM host), more than 7 vCPUs add (44-196 KiB there), and 63 add
// 0.9-1.7 MiB.
TEST(CliKvm, BenchStartupSweepReportsEveryCountAndMemoryGrows) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  ScratchDir dir;
  const std::string json = dir / "b.json";
  const auto o = lockvisor_env("", "bench --startup --startup-vcpus 64,1 --repeat 2 --json " + json);
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  EXPECT_NE(o.out.find("start-up and memory by vCPU count"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("growth per vCPU (least squares over 2 counts)"), std::string::npos) << o.out;
  const auto j = read_json(json);
  EXPECT_EQ(j["startup_ms"]["vcpus"], 1) << j.dump();
  EXPECT_GT(j["startup_ms"]["first_entry"].get<double>(), 0.0);
  const auto& sweep = j["startup_by_vcpus"];
  EXPECT_EQ(sweep["runs"], 2);
  const auto& points = sweep["points"];
  ASSERT_EQ(points.size(), 2u) << sweep.dump();
  EXPECT_EQ(points[0]["vcpus"], 1);
  EXPECT_EQ(points[1]["vcpus"], 64);
  for (const auto& p : points) {
    EXPECT_EQ(p["limit"], false);
    for (const char* key : {"first_entry_ms", "first_exit_ms", "floor_first_entry_ms", "floor_first_exit_ms"})
      EXPECT_GT(p[key].get<double>(), 0.0) << key << " " << p.dump();
    EXPECT_TRUE(p["breakdown_ms"].contains("vcpus")) << p.dump();
    EXPECT_TRUE(p["floor_breakdown_ms"].contains("vcpus")) << p.dump();
    EXPECT_GT(p["peak_rss_growth_kib"].get<double>(), 0.0) << p.dump();
    EXPECT_GE(p["peak_rss_growth_kib"].get<double>(), p["build_rss_growth_kib"].get<double>()) << p.dump();
  }
  EXPECT_GT(points[1]["peak_rss_growth_kib"].get<double>(), points[0]["peak_rss_growth_kib"].get<double>())
      << sweep.dump();
  EXPECT_GT(sweep["growth_per_vcpu"]["peak_rss_kib"].get<double>(), 0.0) << sweep.dump();
  for (const char* key : {"first_entry_us", "floor_first_entry_us", "vcpus_step_us", "floor_vcpus_step_us",
                          "build_rss_kib", "build_pss_kib", "host_kernel_kib"})
    EXPECT_TRUE(sweep["growth_per_vcpu"][key].is_number()) << key << " " << sweep.dump();
  const auto& mapped = sweep["mapped_per_vcpu_bytes"];
  EXPECT_GE(mapped["kvm_run"].get<std::uint64_t>(), 4096u) << mapped.dump();
  EXPECT_GT(mapped["thread_stack"].get<std::uint64_t>(), 0u) << mapped.dump();
  EXPECT_EQ(mapped["guest_stacks"], lockvisor::abi::kVcpuStackBlockBytes);
  EXPECT_TRUE(sweep.contains("transparent_hugepages")) << sweep.dump();
  const auto& limit = sweep["vcpu_limit"];
  EXPECT_EQ(limit["lockvisor"], lockvisor::abi::kMaxVcpus);
  EXPECT_EQ(limit["here"].get<unsigned>(), std::min(limit["kvm"].get<unsigned>(), lockvisor::abi::kMaxVcpus));
}

// Exit code 1: a guest program that exits non-zero.
TEST(CliKvm, GuestProgramExitingNonZeroExits1) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  ScratchDir dir;
  const auto o = lockvisor("run --workload hello --vcpus 1 --image " + HandMadeGuest().done(1).write(dir / "exit1.elf"));
  EXPECT_EQ(o.exit_code, 1) << o.output;
  expect_outcome_line(o, "guest-failed");
}

// A lock workload whose guest completes without statistics printed
// "completed (exit code 0)" and then exited with another code.
TEST(CliKvm, LockWorkloadWithoutStatisticsIsAGuestFault) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  ScratchDir dir;
  const auto image = HandMadeGuest().done(0).write(dir / "silent.elf");
  const auto o = lockvisor("run --workload lockbench --vcpus 1 --image " + image + " --json " + (dir / "r.json"));
  EXPECT_EQ(o.exit_code, 3) << o.output;
  expect_outcome_line(o, "guest-fault");
  EXPECT_NE(o.output.find("no workload statistics"), std::string::npos) << o.output;
  EXPECT_EQ(read_json(dir / "r.json")["exit_code"], 3);
}

// Exit code 1 for a mutual-exclusion violation, and an outcome line that says
// so (it used to say "completed (exit code 0)"): statistics forged by hand.
TEST(CliKvm, MutualExclusionViolationExits1) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  namespace abi = lockvisor::abi;
  abi::WorkloadStats stats{};
  stats.version = abi::kWorkloadStatsVersion;
  stats.ops = stats.latency_count = 1000;
  stats.violations = 3;
  stats.tsc_khz = 1000000;
  stats.elapsed_cycles = 100000000;  // 0.1 s at 1 GHz
  stats.latency_max = 100;
  stats.latency_sum = 100 * stats.ops;
  stats.latency_buckets[abi::latency_bucket(100)] = stats.ops;
  HandMadeGuest guest;
  const std::uint32_t array = guest.place(&stats, sizeof stats);
  guest.ucall(HandMadeGuest::message(abi::UcallType::kResultArray, abi::kWorkloadStatsKey,
                                     {array, abi::kWorkloadStatsWords, 0}))
      .done(0);
  ScratchDir dir;
  const auto o = lockvisor("run --workload lockbench --vcpus 1 --image " + guest.write(dir / "violator.elf") +
                           " --json " + (dir / "r.json"));
  EXPECT_EQ(o.exit_code, 1) << o.output;
  expect_outcome_line(o, "guest-failed");
  EXPECT_NE(o.output.find("mutual exclusion violated 3 times"), std::string::npos) << o.output;
  const auto j = read_json(dir / "r.json");
  EXPECT_EQ(j["violations"], 3);
  EXPECT_EQ(j["vm"]["exit_code"], 1);
}

// A failed guest check names the repository's file ("guest/programs/
// pingpong.cpp:26"), not where the tree was built: the guest is compiled
// with -fmacro-prefix-map (guest/CMakeLists.txt). pingpong needs two vCPUs
// and checks it.
TEST(CliKvm, GuestCheckNamesTheRepositoryRelativeFile) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = lockvisor("run --workload pingpong --vcpus 1");
  EXPECT_EQ(o.exit_code, 1) << o.output;
  expect_outcome_line(o, "guest-failed");
  EXPECT_NE(o.output.find("guest check failed at guest/programs/pingpong.cpp:"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("../"), std::string::npos) << o.output;
  const auto build_dir = std::filesystem::path(LOCKVISOR_BINARY).parent_path().parent_path().string();
  EXPECT_EQ(o.output.find(build_dir), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("at /"), std::string::npos) << o.output;
}

// A pingpong guest that reports an empty elapsed_ns completes, but its
// result is unusable: exit 3 and the reason in the outcome line.
TEST(CliKvm, PingpongWithAnEmptyElapsedReportExits3) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  namespace abi = lockvisor::abi;
  HandMadeGuest guest;
  const std::uint64_t nothing = 0;
  const std::uint32_t array = guest.place(&nothing, sizeof nothing);
  guest.ucall(HandMadeGuest::message(abi::UcallType::kResultArray, "elapsed_ns", {array, 0, 0})).done(0);
  ScratchDir dir;
  const auto o = lockvisor("run --workload pingpong --vcpus 2 --image " + guest.write(dir / "empty-elapsed.elf"));
  EXPECT_EQ(o.exit_code, 3) << o.output;
  expect_outcome_line(o, "guest-fault");
  EXPECT_NE(o.output.find("pingpong: the guest's elapsed_ns report has 0 values, not 1: no hand-off rate"),
            std::string::npos)
      << o.output;
}

// Exit code 1 through conformance: a case that cannot finish in its time.
TEST(CliKvm, FailingConformanceCaseExits1) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = lockvisor("conformance --filter pingpong-2-vcpus-one-pcpu --pingpong-rounds 1000000000 --case-timeout 0.5");
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_NE(o.output.find("0 passed, 1 failed"), std::string::npos) << o.output;
}

// An unwritable --json used to be found after the run (here a
// 2-second watchdog: "outcome: timeout (exit code 4)", then exit 2).
TEST(CliKvm, UnwritableJsonFailsBeforeBooting) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = lockvisor("run --workload pingpong --rounds 1000000000 --timeout 2 --json /proc/lockvisor-report.json");
  // One line and nothing else proves that no guest ran: a booted run would
  // end in its watchdog and print its outcome line first. (Not a wall-clock
  // bound: the ASan build's start-up alone took 2 s in the nested machine.)
  expect_one_line_error(o, 2, "--json /proc/lockvisor-report.json");
}

// Deliverable 5: when the JSON cannot be written after all (file size limit),
// the outcome line carries the exit code the process ends with.
TEST(CliKvm, JsonWriteFailureAfterTheRunShowsInTheOutcomeLine) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  ScratchDir dir;
  const auto o = shell("trap '' XFSZ; ulimit -f 1; exec " + std::string(LOCKVISOR_BINARY) +
                       " run --workload hello --vcpus 1 --json " + (dir / "r.json"));
  EXPECT_EQ(o.exit_code, 6) << o.output;
  expect_outcome_line(o, "completed, --json not written");
  EXPECT_NE(o.output.find("lockvisor: error: --json " + (dir / "r.json") + ": write failed"), std::string::npos)
      << o.output;
  EXPECT_TRUE(dir.entries().empty());
}

// --inject (docs/preemption.md): a bad schedule is refused before anything boots.
TEST(CliInject, BadSchedulesAreOneLineUsageErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"run -w lockbench --inject periodic:vcpu=0,every=1ms,for=1ms", "must be shorter than every"},
      {"run -w lockbench --inject 'holder:lock=0,for=1ms'", "exactly one of every=N or p=P"},
      {"run -w lockbench --vcpus 2 --inject periodic:vcpu=2,every=1ms,for=10us", "the VM has 2 vCPUs"},
      {"run -w pingpong --inject waiter:lock=0,every=1,for=10us", "need a contended lock workload (lockbench, torture; pingpong takes no lock)"},
      {"run -w lockbench --native --vcpus 2 --inject periodic:vcpu=2,every=1ms,for=10us", "the VM has 2 vCPUs"},
      {"run -w lockbench --inject 'holder:lock=0,every=1,for=1ms;holder:lock=any,p=0.5,for=1ms'", "more than one holder"},
  };
  for (const auto& [args, mention] : cases) {
    SCOPED_TRACE(args);
    expect_one_line_error(lockvisor(args), 2, mention);
  }
}

}  // namespace
