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
  bool halt() override { return true; }
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

}  // namespace
}  // namespace lockvisor::machine
