#include "vmm/linuxboot/kvm_entry.h"

namespace lockvisor::linuxboot {
namespace {

kvm_segment to_kvm(const SegmentState& s) {
  kvm_segment k{};
  k.base = s.base;
  k.limit = s.limit;
  k.selector = s.selector;
  k.type = s.type;
  k.present = s.present;
  k.dpl = s.dpl;
  k.db = s.db;
  k.s = s.s;
  k.l = s.l;
  k.g = s.g;
  k.avl = 0;
  k.unusable = 0;
  return k;
}

}  // namespace

kvm_sregs entry_sregs(const EntryState& state, kvm_sregs current) {
  current.cs = to_kvm(state.cs);
  current.ds = current.es = current.fs = current.gs = current.ss = to_kvm(state.data);
  current.gdt.base = state.gdt_base;
  current.gdt.limit = state.gdt_limit;
  current.cr0 = state.cr0;
  current.cr3 = state.cr3;
  current.cr4 = state.cr4;
  current.efer = state.efer;
  return current;
}

kvm_regs entry_regs(const EntryState& state) {
  kvm_regs regs{};
  regs.rip = state.rip;
  regs.rsi = state.rsi;
  regs.rsp = state.rsp;
  regs.rflags = state.rflags;
  return regs;
}

}  // namespace lockvisor::linuxboot
