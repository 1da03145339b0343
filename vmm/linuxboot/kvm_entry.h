// Copies a Linux boot EntryState (vmm/linuxboot/x86_entry.h) into KVM's register
// structures (struct kvm_sregs / kvm_regs, <linux/kvm.h>; the KVM API,
// Documentation/virt/kvm/api.rst, KVM_SET_SREGS / KVM_SET_REGS).
//
// The caller reads the vCPU's current kvm_sregs first (KVM_GET_SREGS) and
// passes them in: TR, LDTR, the IDT register and the APIC base stay as KVM
// reset them (the boot protocol does not care about them, and VMX needs a
// usable TR, which KVM's reset value is). Only the BSP gets this state; with
// an in-kernel irqchip the APs stay in KVM's reset state (mp_state
// UNINITIALIZED, not set RUNNABLE by the VMM) until the kernel starts them
// with INIT/SIPI through its local APIC. An AP's KVM_RUN returns EAGAIN when
// the INIT/SIPI arrives: call it again (seen on kvm_amd in the nested-KVM
// machine, Linux 6.1 guest).
#pragma once
#include <linux/kvm.h>

#include "vmm/linuxboot/x86_entry.h"

namespace lockvisor::linuxboot {

kvm_sregs entry_sregs(const EntryState& state, kvm_sregs current);
kvm_regs entry_regs(const EntryState& state);

}  // namespace lockvisor::linuxboot
