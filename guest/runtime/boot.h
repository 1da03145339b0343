// What the VMM told this guest at boot (BootInfo), and parsed program arguments.
#pragma once
#include "lockvisor/abi/boot_info.h"

namespace guest {
using namespace lockvisor::abi;

const BootInfo& boot();
inline u32 nr_cpus() { return boot().vcpu_count; }
u32 apic_id_of(u32 cpu);
u64 tsc_khz();
u64 tsc_to_ns(u64 cycles);
u64 ns_to_tsc(u64 ns);
// Busy-wait (at CPL3, no exits) for about `ns` nanoseconds.
void spin_ns(u64 ns);

// "key=value" lookup in BootInfo::args; `fallback` when absent.
u64 arg_u64(const char* key, u64 fallback);
// Copies the value of `key` (NUL-terminated, truncated to capacity); false when absent.
bool arg_str(const char* key, char* out, u32 capacity);

// Set once by guest_main before any program runs.
void set_boot(const BootInfo* info);

}  // namespace guest
