// A Linux guest: the boot plan's memory writes and entry state, KVM's
// in-kernel irqchip and PIT, the 16550A console and the ACPI power ports,
// and the CPUID that selects the kernel's spinlock (linux_guest.h).
#include <cstring>

#include <spdlog/spdlog.h>

#include "vmm/devices/power_ports.h"
#include "vmm/devices/uart_8250.h"
#include "vmm/linuxboot/kvm_entry.h"
#include "vmm/machine/linux_cpuid.h"
#include "vmm/machine/machine_state.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {

void Machine::build_linux(const kvm::KvmSystem& kvm, LinuxGuest guest) {
  State& s = *state_;
  const MachineConfig& cfg = s.config;
  s.vm.create_pit();
  auto& memory = s.vm.memory();
  const auto ram = memory.all();
  for (const auto& write : guest.plan.writes) {
    const auto bytes = write.bytes();
    // The plan keeps every write inside RAM; checked again where it lands.
    if (write.gpa > ram.size() || bytes.size() > ram.size() - write.gpa)
      fail("Linux boot: {} at {:#x}+{:#x} lies outside the {} MiB of guest memory", write.what, write.gpa,
           bytes.size(), cfg.memory_mib);
    std::memcpy(ram.data() + write.gpa, bytes.data(), bytes.size());
  }
  s.startup.image = s.since_origin();

  s.control.set_shutdown_is_reset(true);
  // The console: a 16550A on COM1 whose THR-empty interrupt is IRQ 4.
  s.serial.use_one_stream();
  s.linux_console = std::make_unique<LinuxConsole>(s.control, std::move(guest.on_console_line));
  const kvm::Vm& vm = s.vm;
  auto& uart = s.add_device<devices::Uart8250>(
      devices::Uart8250::kCom1Base,
      [console = s.linux_console.get()](devices::VcpuContext& vcpu, std::uint8_t byte) { return console->put(vcpu, byte); },
      [&vm](bool level) { vm.set_irq_line(devices::Uart8250::kCom1Irq, level); });
  s.bus.add_ports(devices::Uart8250::kCom1Base, devices::Uart8250::kPorts, uart, ExitKind::kSerial);
  // Power-off and reset: the plan's ACPI ports, and the 8042's reset command.
  auto& power = s.add_device<devices::PowerPorts>(guest.plan.power);
  for (const auto& range : devices::PowerPorts::claimed_ports(guest.plan.power))
    s.bus.add_ports(range.first, range.count, power, ExitKind::kDevice);

  const auto supported = kvm.supported_cpuid();
  s.hypervisor_bit = true;
  for (unsigned i = 0; i < cfg.vcpus; ++i) {
    const unsigned apic_id = i;  // as the MADT and the MP table say
    kvm::Vcpu vcpu = s.vm.create_vcpu(i, apic_id);
    vcpu.set_cpuid(linux_guest_cpuid(supported, apic_id, cfg.vcpus, guest.cpuid));
    // Only the BSP starts at the kernel's entry; with the in-kernel irqchip
    // the APs wait, UNINITIALIZED, for the kernel's INIT/SIPI.
    if (i == 0) {
      vcpu.set_sregs(linuxboot::entry_sregs(guest.plan.bsp, vcpu.sregs()));
      vcpu.set_regs(linuxboot::entry_regs(guest.plan.bsp));
      s.tsc_khz = tsc_khz_of(vcpu);
    }
    s.backend->attach_vcpu(i, vcpu.stats_fd());
    s.control.map_apic(apic_id, i);
    s.vcpus.push_back(std::make_unique<VcpuRunner>(std::move(vcpu), apic_id, s.bus, s.control));
  }
  spdlog::debug("Linux VM ready: {} vCPUs, {} MiB, kernel at {:#x}, initrd {:#x}+{:#x}, TSC {} kHz", cfg.vcpus,
                cfg.memory_mib, guest.plan.kernel_placement.addr, guest.plan.initrd_addr, guest.plan.initrd_size,
                s.tsc_khz);
}

void refuse_linux_on_pvm(const char* option) {
  if (kvm::detect_backend() == kvm::Backend::kPvm)
    fail("{}: Linux guests cannot run on this PVM host (PVM runs only kernels built as PVM guests, which no "
         "distribution ships); use hardware KVM or tools/nested-kvm",
         option);
}

void validate_linux_host(const kvm::KvmSystem& kvm) {
  refuse_linux_on_pvm();
  kvm.require_extension(KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP");
  kvm.require_extension(KVM_CAP_PIT2, "KVM_CAP_PIT2");
}



}  // namespace lockvisor::machine
