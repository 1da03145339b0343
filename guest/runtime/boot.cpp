#include "runtime/boot.h"

#include "runtime/cpu.h"

namespace guest {
namespace {
const BootInfo* g_boot = nullptr;
u64 g_boot_memory_bytes = 0;
}  // namespace

void set_boot(const BootInfo* info) {
  g_boot = info;
  g_boot_memory_bytes = info->memory_bytes;
}

const BootInfo& boot() { return *g_boot; }

u32 this_cpu() {
  u64 rsp;
  asm("mov %%rsp, %0" : "=r"(rsp));
  return static_cast<u32>((g_boot_memory_bytes - rsp) >> kVcpuStackBlockShift);
}

u32 apic_id_of(u32 cpu) { return g_boot->vcpus[cpu].apic_id; }

u64 tsc_khz() { return g_boot->tsc_khz; }

u64 tsc_to_ns(u64 cycles) {
  // cycles * 1e6 / khz without overflowing for runs shorter than ~days.
  const u64 khz = g_boot->tsc_khz;
  return cycles / khz * 1000000 + (cycles % khz) * 1000000 / khz;
}

u64 ns_to_tsc(u64 ns) { return ns * g_boot->tsc_khz / 1000000; }

void spin_ns(u64 ns) {
  const u64 end = rdtsc() + ns_to_tsc(ns);
  while (rdtsc() < end) cpu_relax();
}

}  // namespace guest
