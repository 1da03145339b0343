// The I/O bus, the exit decoder and the devices a Linux guest uses, driven
// without /dev/kvm: a kvm_run page in ordinary memory and a fake vCPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "vmm/devices/io_bus.h"
#include "vmm/devices/power_ports.h"
#include "vmm/devices/uart_8250.h"
#include "vmm/linuxboot/acpi_tables.h"
#include "vmm/linuxboot/linux_layout.h"
#include "vmm/kvm/vcpu_exit.h"
#include "vmm/util/error.h"

namespace lockvisor::devices {
namespace {

class FakeVcpu final : public VcpuContext {
 public:
  unsigned index() const override { return 1; }
  kvm_regs& regs() override { return regs_; }
  void commit_regs() override { ++commits; }
  bool guest_error(std::string what) override {
    errors.push_back("guest: " + what);
    return false;
  }
  bool host_error(std::string what) override {
    errors.push_back("host: " + what);
    return false;
  }
  bool halt(std::uint64_t, bool*) override { return true; }
  bool end_run(std::uint64_t status, std::string why) override {
    ended.push_back(std::to_string(status) + " " + why);
    return false;
  }
  kvm_regs regs_{};
  int commits = 0;
  std::vector<std::string> errors, ended;
};

// A kvm_run page followed by the data page KVM uses for port I/O.
struct RunPage {
  alignas(4096) std::uint8_t bytes[3 * 4096] = {};
  kvm_run& run() { return *reinterpret_cast<kvm_run*>(bytes); }
  kvm::VcpuExit io(std::uint16_t port, std::uint8_t size, std::uint32_t count, bool out) {
    run().exit_reason = KVM_EXIT_IO;
    run().io.port = port;
    run().io.size = size;
    run().io.count = count;
    run().io.direction = out ? KVM_EXIT_IO_OUT : KVM_EXIT_IO_IN;
    run().io.data_offset = 4096;
    return kvm::decode_exit(run(), sizeof bytes);
  }
};

TEST(VcpuExit, PortIoDataLiesInsideTheRunPage) {
  RunPage page;
  const auto exit = page.io(0x3F8, 1, 3, true);
  ASSERT_EQ(exit.kind, kvm::VcpuExit::Kind::kPortIo);
  EXPECT_EQ(exit.io.port, 0x3F8);
  EXPECT_TRUE(exit.io.write);
  EXPECT_EQ(exit.io.data.data(), page.bytes + 4096);
  EXPECT_EQ(exit.io.data.size(), 3u);
}

TEST(VcpuExit, MalformedPortIoIsRefusedNotFollowed) {
  RunPage page;
  page.run().exit_reason = KVM_EXIT_IO;
  page.run().io.port = 0xE6;
  page.run().io.size = 4;
  page.run().io.count = 4096;  // 16 KiB from offset 4096: past the 12 KiB page
  page.run().io.data_offset = 4096;
  auto exit = kvm::decode_exit(page.run(), sizeof page.bytes);
  EXPECT_EQ(exit.kind, kvm::VcpuExit::Kind::kMalformed);
  EXPECT_NE(exit.what.find("malformed port I/O exit (port 0xe6, size 4, count 4096)"), std::string::npos);
  page.run().io.size = 3;  // no such access width
  page.run().io.count = 1;
  EXPECT_EQ(kvm::decode_exit(page.run(), sizeof page.bytes).kind, kvm::VcpuExit::Kind::kMalformed);
}

TEST(VcpuExit, MmioLongerThanItsBufferIsMalformed) {
  RunPage page;
  page.run().exit_reason = KVM_EXIT_MMIO;
  page.run().mmio.phys_addr = 0xFEE00000;
  page.run().mmio.len = 4;
  page.run().mmio.is_write = 1;
  auto ok = kvm::decode_exit(page.run(), sizeof page.bytes);
  ASSERT_EQ(ok.kind, kvm::VcpuExit::Kind::kMmio);
  EXPECT_EQ(ok.mmio.gpa, 0xFEE00000u);
  EXPECT_EQ(ok.mmio.data.size(), 4u);
  page.run().mmio.len = 9;
  EXPECT_EQ(kvm::decode_exit(page.run(), sizeof page.bytes).kind, kvm::VcpuExit::Kind::kMalformed);
}

TEST(VcpuExit, EveryOtherKindIsNamed) {
  RunPage page;
  page.run().exit_reason = KVM_EXIT_SYSTEM_EVENT;
  page.run().system_event.type = KVM_SYSTEM_EVENT_RESET;
  auto exit = kvm::decode_exit(page.run(), sizeof page.bytes);
  EXPECT_EQ(exit.kind, kvm::VcpuExit::Kind::kSystemEvent);
  EXPECT_EQ(exit.system_event, KVM_SYSTEM_EVENT_RESET);
  page.run().exit_reason = KVM_EXIT_HLT;
  EXPECT_EQ(kvm::decode_exit(page.run(), sizeof page.bytes).kind, kvm::VcpuExit::Kind::kHalt);
  page.run().exit_reason = 9999;
  exit = kvm::decode_exit(page.run(), sizeof page.bytes);
  EXPECT_EQ(exit.kind, kvm::VcpuExit::Kind::kUnknown);
  EXPECT_EQ(exit.reason, 9999u);
}

struct CountingPort final : PortDevice {
  bool on_io(VcpuContext&, const kvm::VcpuExit::PortIo& io) override {
    last_port = io.port;
    ++calls;
    return true;
  }
  int calls = 0;
  std::uint16_t last_port = 0;
};

TEST(IoBus, RangesAreClaimedOnceAndLookedUpByPort) {
  IoBus bus;
  CountingPort a, b;
  bus.add_ports(0x3F8, 8, a, ExitKind::kSerial);
  bus.add_ports(0x64, 1, b, ExitKind::kDevice);
  EXPECT_EQ(bus.port(0x3F8).device, &a);
  EXPECT_EQ(bus.port(0x3FF).device, &a);
  EXPECT_EQ(bus.port(0x3FF).kind, ExitKind::kSerial);
  EXPECT_EQ(bus.port(0x400).device, nullptr);
  EXPECT_EQ(bus.port(0x400).kind, ExitKind::kOtherIo);
  EXPECT_EQ(bus.port(0x64).device, &b);
  EXPECT_THROW(bus.add_ports(0x3FC, 2, b, ExitKind::kDevice), Error);
  EXPECT_THROW(bus.add_ports(0xFFFF, 2, b, ExitKind::kDevice), Error);
}

TEST(IoBus, ExitKindNamesFollowTheEnum) {
  EXPECT_STREQ(kExitKindNames[static_cast<std::size_t>(ExitKind::kSignal)], "signal");
  EXPECT_STREQ(kExitKindNames[static_cast<std::size_t>(ExitKind::kFault)], "fault");
  EXPECT_STREQ(kExitKindNames[static_cast<std::size_t>(ExitKind::kSystemEvent)], "system_event");
}

// A UART with its sink and IRQ line recorded.
struct UartBench {
  std::string out;
  std::vector<bool> irq;
  Uart8250 uart{Uart8250::kCom1Base,
                [this](VcpuContext&, std::uint8_t c) {
                  out.push_back(static_cast<char>(c));
                  return true;
                },
                [this](bool level) { irq.push_back(level); }};
  FakeVcpu vcpu;
};

TEST(Uart8250, ProbeRegistersReadBackAndFifoMakesIt16550A) {
  UartBench t;
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x00));
  EXPECT_EQ(t.uart.read(1) & 0x0F, 0x00);
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x0F));
  EXPECT_EQ(t.uart.read(1) & 0x0F, 0x0F);
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x00));
  ASSERT_TRUE(t.uart.write(t.vcpu, 7, 0xA5));
  EXPECT_EQ(t.uart.read(7), 0xA5);
  EXPECT_EQ(t.uart.read(2) >> 6, 0);  // no FIFO yet
  ASSERT_TRUE(t.uart.write(t.vcpu, 2, 0x01));
  EXPECT_EQ(t.uart.read(2) >> 6, 3);  // FIFO enabled: a 16550A
  EXPECT_EQ(t.uart.read(5) & 0x60, 0x60);  // THRE | TEMT
  EXPECT_NE(t.uart.read(5), 0xFF);          // the driver's "is anything there" check
}

TEST(Uart8250, ThreInterruptReassertsWhenEnabledAndIsClearedByIir) {
  UartBench t;
  // The driver's start-up test: enable THRI, read IIR, disable, enable
  // again, read IIR: a real 16550 reports THR empty both times.
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x02));
  EXPECT_EQ(t.irq, std::vector<bool>{true});
  EXPECT_EQ(t.uart.read(2) & 0x0F, 0x02);
  EXPECT_EQ(t.irq, (std::vector<bool>{true, false}));
  EXPECT_EQ(t.uart.read(2) & 0x0F, 0x01);  // acknowledged: nothing pending
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x00));
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x02));
  EXPECT_EQ(t.uart.read(2) & 0x0F, 0x02);
  // A byte written with THRI enabled: sent, and THR empty again raises the line.
  ASSERT_TRUE(t.uart.write(t.vcpu, 0, 'x'));
  EXPECT_EQ(t.out, "x");
  EXPECT_TRUE(t.irq.back());
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x00));  // disabling drops the line
  EXPECT_FALSE(t.irq.back());
}

TEST(Uart8250, DivisorLatchAndLoopbackDoNotTransmit) {
  UartBench t;
  ASSERT_TRUE(t.uart.write(t.vcpu, 3, 0x80));  // DLAB
  ASSERT_TRUE(t.uart.write(t.vcpu, 0, 0x01));
  ASSERT_TRUE(t.uart.write(t.vcpu, 1, 0x00));
  EXPECT_EQ(t.uart.read(0), 0x01);
  ASSERT_TRUE(t.uart.write(t.vcpu, 3, 0x03));
  EXPECT_EQ(t.out, "");
  ASSERT_TRUE(t.uart.write(t.vcpu, 4, 0x10 | 0x02));  // loopback, RTS
  EXPECT_EQ(t.uart.read(6) & 0xF0, 0x10);            // CTS follows RTS
  ASSERT_TRUE(t.uart.write(t.vcpu, 0, 'y'));
  EXPECT_EQ(t.out, "");
}

TEST(Uart8250, StringOutputThroughTheBusGoesOutInOrder) {
  UartBench t;
  RunPage page;
  auto exit = page.io(0x3F8, 1, 5, true);
  std::memcpy(exit.io.data.data(), "hello", 5);
  EXPECT_TRUE(t.uart.on_io(t.vcpu, exit.io));
  EXPECT_EQ(t.out, "hello");
}

TEST(Uart8250, ASinkThatRefusesEndsTheAccess) {
  FakeVcpu vcpu;
  Uart8250 uart(Uart8250::kCom1Base, [](VcpuContext& v, std::uint8_t) { return v.guest_error("over budget"); }, {});
  RunPage page;
  auto exit = page.io(0x3F8, 1, 2, true);
  EXPECT_FALSE(uart.on_io(vcpu, exit.io));
  EXPECT_EQ(vcpu.errors, std::vector<std::string>{"guest: over budget"});
}

TEST(PowerPorts, S5PowersOffOtherSleepStatesAreRefusedResetResets) {
  const auto tables = linuxboot::build_acpi_tables(2, linuxboot::kAcpiAddr, {});
  PowerPorts power(tables.power);
  const std::uint16_t cnt = kPm1aControlPort;
  const std::uint64_t s5 = (std::uint64_t{kS5SleepType} << 10) | (1u << 13);
  EXPECT_EQ(power.decode(cnt, s5, 2), PowerPorts::Request::kPowerOff);
  EXPECT_EQ(power.decode(cnt, s5 & ~(1u << 13), 2), PowerPorts::Request::kNone);  // SLP_TYP alone comes first
  EXPECT_EQ(power.decode(cnt, (3u << 10) | (1u << 13), 2), PowerPorts::Request::kOtherSleep);
  EXPECT_EQ(power.decode(kResetPort, kResetValue, 1), PowerPorts::Request::kReset);
  EXPECT_EQ(power.decode(PowerPorts::kI8042Command, 0xFE, 1), PowerPorts::Request::kReset);
  EXPECT_EQ(power.decode(PowerPorts::kI8042Command, 0xAD, 1), PowerPorts::Request::kNone);

  FakeVcpu vcpu;
  RunPage page;
  auto read = page.io(cnt, 2, 1, false);
  EXPECT_TRUE(power.on_io(vcpu, read.io));
  EXPECT_EQ(read.io.data[0], 1);  // SCI_EN: always in ACPI mode
  auto exit = page.io(cnt, 2, 1, true);
  std::memcpy(exit.io.data.data(), &s5, 2);
  EXPECT_FALSE(power.on_io(vcpu, exit.io));
  ASSERT_EQ(vcpu.ended.size(), 1u);
  EXPECT_NE(vcpu.ended[0].find("powered off"), std::string::npos);
}

TEST(PowerPorts, Pm1EnableReadsBackWhatWasWritten) {
  const auto tables = linuxboot::build_acpi_tables(1, linuxboot::kAcpiAddr, {});
  PowerPorts power(tables.power);
  FakeVcpu vcpu;
  RunPage page;
  const std::uint16_t enable = kPm1aEventPort + 2;
  auto write = page.io(enable, 2, 1, true);
  write.io.data[0] = 0x20;  // GBL_EN
  write.io.data[1] = 0x01;
  EXPECT_TRUE(power.on_io(vcpu, write.io));
  auto read = page.io(enable, 2, 1, false);
  EXPECT_TRUE(power.on_io(vcpu, read.io));
  EXPECT_EQ(read.io.data[0], 0x20);
  EXPECT_EQ(read.io.data[1], 0x01);
  auto status = page.io(kPm1aEventPort, 2, 1, false);
  EXPECT_TRUE(power.on_io(vcpu, status.io));
  EXPECT_EQ(status.io.data[0], 0);
}

TEST(PowerPorts, ClaimsTheRegistersOfItsPowerModel) {
  linuxboot::AcpiOptions reduced;
  reduced.power_model = AcpiPowerModel::kHardwareReduced;
  const auto tables = linuxboot::build_acpi_tables(1, linuxboot::kAcpiAddr, reduced);
  IoBus bus;
  PowerPorts power(tables.power);
  for (const auto& r : PowerPorts::claimed_ports(tables.power)) bus.add_ports(r.first, r.count, power, ExitKind::kDevice);
  EXPECT_EQ(bus.port(kSleepControlPort).device, &power);
  EXPECT_EQ(bus.port(kPm1aControlPort).device, nullptr);
  EXPECT_EQ(bus.port(PowerPorts::kI8042Command).device, &power);
  const std::uint64_t s5 = (std::uint64_t{kS5SleepType} << 2) | (1u << 5);
  EXPECT_EQ(power.decode(kSleepControlPort, s5, 1), PowerPorts::Request::kPowerOff);
}

}  // namespace
}  // namespace lockvisor::devices
