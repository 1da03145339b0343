// What the Machine needs to boot an unmodified Linux kernel instead of the
// freestanding guest: the validated boot plan (vmm/linuxboot/linux_boot_plan.h,
// whose kernel and initrd bytes the caller keeps alive until the Machine is
// destroyed), the CPUID policy that selects the kernel's spinlock, and who
// reads the console lines.
//
// A Linux guest gets KVM's in-kernel irqchip and PIT, a 16550A on COM1
// (IRQ 4) as its console, the ACPI power-off and reset ports of the plan,
// and KVM's in-kernel PV lock hypercalls (the kvm backend): its halts and
// kicks never leave the kernel, KVM's statistics count them. None of the
// freestanding guest's ports exist for it.
#pragma once
#include "vmm/linuxboot/linux_boot_plan.h"
#include "vmm/machine/linux_console.h"
#include "vmm/machine/linux_cpuid.h"

namespace lockvisor::machine {

struct LinuxGuest {
  linuxboot::LinuxBootPlan plan;
  LinuxCpuidOptions cpuid;
  LinuxConsole::LineObserver on_console_line;  // on a vCPU thread, one call at a time
};

}  // namespace lockvisor::machine
