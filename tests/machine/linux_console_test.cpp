// A Linux guest's console as the VMM sees it: bytes charged and shown, lines
// assembled for the init's parser, the guest's status taken from it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "vmm/machine/linux_console.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/serial_console.h"
#include "vmm/pvlock/pv_backend.h"

namespace lockvisor::machine {
namespace {

class Vcpu final : public devices::VcpuContext {
 public:
  unsigned index() const override { return 2; }
  kvm_regs& regs() override { return regs_; }
  void commit_regs() override {}
  bool guest_error(std::string what) override {
    errors.push_back(what);
    return false;
  }
  bool host_error(std::string what) override {
    errors.push_back(what);
    return false;
  }
  bool halt(std::uint64_t, bool*) override { return true; }
  bool end_run(std::uint64_t, std::string) override { return false; }
  kvm_regs regs_{};
  std::vector<std::string> errors;
};

MachineConfig config_with(std::uint64_t serial_limit) {
  MachineConfig config;
  config.vcpus = 4;
  config.limits.serial_bytes = serial_limit;
  return config;
}

struct Bench {
  explicit Bench(std::uint64_t serial_limit = 1 << 20) : config(config_with(serial_limit)) { serial.use_one_stream(); }
  MachineConfig config;
  std::unique_ptr<pvlock::PvBackend> backend = pvlock::make_backend(pvlock::BackendKind::kUserspace, 4, config.backend);
  SerialConsole serial{SerialConsole::Capture{}, 4};
  RunControl control{config, *backend, serial, std::chrono::steady_clock::now()};
  std::vector<std::string> lines;
  LinuxConsole console{control, [this](std::string_view line) -> std::optional<std::uint64_t> {
                         lines.emplace_back(line);
                         if (line == "exit 7") return 7;
                         return std::nullopt;
                       }};
  Vcpu vcpu;
  bool type(std::string_view text) {
    for (char c : text)
      if (!console.put(vcpu, static_cast<std::uint8_t>(c))) return false;
    return true;
  }
};

TEST(LinuxConsole, LinesWithoutCarriageReturnsReachTheObserverAndTheConsole) {
  Bench t;
  ASSERT_TRUE(t.type("[    0.1] kvm-guest: PV spinlocks enabled\r\nplain line\r\npartial"));
  EXPECT_EQ(t.lines, (std::vector<std::string>{"[    0.1] kvm-guest: PV spinlocks enabled", "plain line"}));
  t.console.flush();
  EXPECT_EQ(t.lines.back(), "partial");
  // Only the lines the report needs are kept.
  EXPECT_EQ(t.console.kept_lines(), std::vector<std::string>{"[    0.1] kvm-guest: PV spinlocks enabled"});
  t.serial.flush_all();
  const auto shown = t.serial.captured();
  ASSERT_EQ(shown.size(), 3u);
  EXPECT_EQ(shown[1], "console: plain line");  // one stream, no vCPU, no CR
}

TEST(LinuxConsole, TheObserversStatusBecomesTheGuests) {
  Bench t;
  ASSERT_TRUE(t.type("exit 7\n"));
  EXPECT_EQ(t.control.guest_status(), 7u);
  ASSERT_TRUE(t.type("exit 7\n"));  // the first one stays
  EXPECT_EQ(t.control.guest_status(), 7u);
}

TEST(LinuxConsole, ALongLineIsCutAtTheBound) {
  Bench t;
  ASSERT_TRUE(t.type(std::string(LinuxConsole::kMaxLineBytes + 10, 'x') + "\n"));
  ASSERT_EQ(t.lines.size(), 2u);
  EXPECT_EQ(t.lines[0].size(), LinuxConsole::kMaxLineBytes);
  EXPECT_EQ(t.lines[1].size(), 10u);
}

TEST(LinuxConsole, TheSerialBudgetEndsAFloodingGuest) {
  Bench t(16);
  EXPECT_TRUE(t.type(std::string(16, 'y')));
  EXPECT_FALSE(t.type("z"));
  ASSERT_EQ(t.vcpu.errors.size(), 1u);
  EXPECT_NE(t.vcpu.errors[0].find("--max-serial-bytes"), std::string::npos);
}

// A console log read afterwards (`lockvisor linux report`) keeps the lines a
// live console keeps: the same splitting, cut and filter.
TEST(LinuxConsole, ALogKeepsTheLinesALiveConsoleKeeps) {
  const std::string log = "[    0.1] kvm-guest: PV spinlocks enabled\r\nplain line\r\n[    0.2] smpboot: " +
                          std::string(LinuxConsole::kMaxLineBytes, 'x') +
                          "Kernel panic - not syncing: cut\n\n[    1.3] Kernel panic - not syncing: Fatal exception";
  Bench t;
  ASSERT_TRUE(t.type(log));
  t.console.flush();
  const auto kept = kept_kernel_lines(log);
  EXPECT_EQ(kept, t.console.kept_lines());
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept[0], "[    0.1] kvm-guest: PV spinlocks enabled");
  EXPECT_EQ(kept[1].size(), LinuxConsole::kMaxLineBytes);
  EXPECT_EQ(kept[3], "[    1.3] Kernel panic - not syncing: Fatal exception");  // unterminated, still kept
}

// How a crashed kernel ended, from the console the run kept: the panic line
// names the outcome, not the reset that follows it (panic=-1).
constexpr std::string_view kPortReset = "the guest reset the machine (port 0xcf9)";

TEST(KernelEnd, APanicIsNamedByItsLineWithoutTheTimestamp) {
  Bench t;
  ASSERT_TRUE(t.type("[    0.9] Run /init as init process\r\n"
                     "[    1.2] VFS: Cannot open root device \"(null)\" or unknown-block(0,0): error -6\r\n"
                     "[    1.3] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\r\n"
                     "[    1.4] Kernel Offset: disabled\r\n"));
  const auto end = kernel_end(t.console.kept_lines(), kPortReset);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->kind, KernelEndKind::kPanic);
  EXPECT_STREQ(kernel_end_name(end->kind), "kernel-panic");
  EXPECT_EQ(end->line, "Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)");
}

TEST(KernelEnd, AnInitKilledByAnOopsIsItsOwnOutcome) {
  const std::vector<std::string> lines = {
      "[    2.0] BUG: kernel NULL pointer dereference, address: 0000000000000000",
      "[    2.0] Oops: 0002 [#1] PREEMPT SMP NOPTI",
      "[    2.1] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009",
  };
  const auto end = kernel_end(lines, kPortReset);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->kind, KernelEndKind::kInitKilled);
  EXPECT_STREQ(kernel_end_name(end->kind), "init-killed");
  EXPECT_EQ(end->line, "Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009");
}

TEST(KernelEnd, ATripleFaultWithoutAPanicNamesTheLastOops) {
  const std::string reason(RunControl::kShutdownResetReason);
  const auto bare = kernel_end({"[    0.1] smpboot: CPU0: AMD EPYC"}, reason);
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->kind, KernelEndKind::kTripleFault);
  EXPECT_STREQ(kernel_end_name(bare->kind), "triple-fault");
  EXPECT_NE(bare->line.find("KVM_EXIT_SHUTDOWN"), std::string::npos) << bare->line;
  const auto oops = kernel_end({"[    0.2] BUG: unable to handle page fault for address: ffff", "[    0.2] Oops: 0000 [#1]"},
                               reason);
  ASSERT_TRUE(oops.has_value());
  EXPECT_EQ(oops->kind, KernelEndKind::kTripleFault);
  EXPECT_EQ(oops->line, "Oops: 0000 [#1]");
  // A panic before the triple fault (a reset by reboot=t) is the panic.
  const auto panic = kernel_end({"[    3.0] Kernel panic - not syncing: Fatal exception"}, reason);
  ASSERT_TRUE(panic.has_value());
  EXPECT_EQ(panic->kind, KernelEndKind::kPanic);
}

TEST(KernelEnd, ARunWithoutACrashHasNone) {
  const std::vector<std::string> lines = {"[    0.1] kvm-guest: PV spinlocks enabled", "[    0.5] Run /init as init process"};
  EXPECT_FALSE(kernel_end(lines, "the guest powered off (ACPI S5)").has_value());
  EXPECT_FALSE(kernel_end(lines, kPortReset).has_value());
  EXPECT_FALSE(kernel_end({}, kPortReset).has_value());
}

}  // namespace
}  // namespace lockvisor::machine
