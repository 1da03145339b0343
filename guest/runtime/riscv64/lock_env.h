// The lock runtime's Env on the RV64 guest (locks/lock_env.h): a hart is a
// CPU, wait/kick are WFI and the SBI IPI (firmware) or SBI PVLOCK KICK_CPU
// (lockvisor) with an interrupt-pending latch (wake.h). Counters per hart; a
// broken lock invariant fails the run.
#pragma once
#include "locks/lock_env.h"
#include "locks/lock_events.h"
#include "runtime/riscv64/hart.h"
#include "runtime/riscv64/wake.h"

namespace guest::riscv {

static_assert(kRiscvMaxHarts <= lockvisor::locks::kMaxCpus, "every hart must be a CPU of the lock runtime");

extern lockvisor::locks::LockEvents g_lock_events[kRiscvMaxHarts];
extern u64 g_halts[kRiscvMaxHarts];  // WFIs executed by wait()
extern bool g_pv_available;          // the kick is served (set_lock_env_features)
extern bool g_dedicated;             // BootInfo's kBootFlagDedicated (false under firmware)

struct RiscvLockEnv {
  static unsigned cpu() { return this_hart(); }
  static unsigned nr_cpus() { return hart_count(); }
  static void wait(volatile u8* ptr, u8 val) {
    if (wake_wait(ptr, val)) g_halts[this_hart()]++;
  }
  static void kick(unsigned cpu) { wake_kick(cpu); }
  // PV wait/kick needs the kick: SBI IPI, or SBI PVLOCK switched on.
  static bool pv_available() { return g_pv_available; }
  static bool virtualized() { return true; }
  static bool dedicated() { return g_dedicated; }
  static lockvisor::locks::LockEvents& events() { return g_lock_events[this_hart()]; }
  [[noreturn]] static void bug(const char* what) { fail(what); }
};
static_assert(lockvisor::locks::LockEnv<RiscvLockEnv>);

// Finds out whether the kick is served (under firmware: SBI IPI probed;
// under lockvisor: BootInfo's kBootFlagSbiPvlock) and sets the locks' time
// bounds for the lock clock's rate, once, on the boot hart before any lock
// is used.
void set_lock_env_features();

}  // namespace guest::riscv
