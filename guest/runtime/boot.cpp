#include "runtime/boot.h"

#include "runtime/cpu.h"
#include "runtime/string.h"

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

namespace {
// Finds "key=" at a word start in args; returns the value's start or nullptr.
const char* find_arg(const char* key) {
  const char* args = g_boot->args;
  const u32 key_length = str_length(key, 64);
  for (u32 i = 0; i < kProgramArgsBytes && args[i] != '\0';) {
    while (i < kProgramArgsBytes && args[i] == ' ') ++i;
    const u32 start = i;
    while (i < kProgramArgsBytes && args[i] != ' ' && args[i] != '\0') ++i;
    if (i - start > key_length && str_equal_n(args + start, key, key_length) && args[start + key_length] == '=')
      return args + start + key_length + 1;
  }
  return nullptr;
}
}  // namespace

u64 arg_u64(const char* key, u64 fallback) {
  const char* value = find_arg(key);
  if (value == nullptr) return fallback;
  u64 result = 0;
  for (; *value >= '0' && *value <= '9'; ++value) result = result * 10 + static_cast<u64>(*value - '0');
  return result;
}

bool arg_str(const char* key, char* out, u32 capacity) {
  const char* value = find_arg(key);
  if (value == nullptr || capacity == 0) return false;
  u32 n = 0;
  while (n + 1 < capacity && value[n] != ' ' && value[n] != '\0') {
    out[n] = value[n];
    ++n;
  }
  out[n] = '\0';
  return true;
}

}  // namespace guest
