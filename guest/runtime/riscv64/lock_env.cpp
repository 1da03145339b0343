#include "runtime/riscv64/lock_env.h"

#include "locks/pvbounded_tuning.h"
#include "runtime/riscv64/boot_info.h"
#include "runtime/riscv64/sbi.h"

namespace guest::riscv {

lockvisor::locks::LockEvents g_lock_events[kRiscvMaxHarts];
u64 g_halts[kRiscvMaxHarts];
bool g_pv_available;
bool g_dedicated;

void set_lock_env_features() {
  const BootInfo* info = boot_info();
  g_pv_available = info != nullptr ? (info->flags & kBootFlagSbiPvlock) != 0 : sbi_probe(kSbiExtIpi);
  g_dedicated = info != nullptr && (info->flags & kBootFlagDedicated) != 0;
  // The time bounds of the locks (pvbounded, cna, hq) are set in
  // microseconds and kept in lock-clock ticks: convert the defaults with this
  // machine's rate instead of the assumed one.
  namespace pvb = lockvisor::locks::pvb;
  for (const auto& k : pvb::kTuningKeys)
    if (!pvb::set_tuning(k, pvb::g_tuning.*k.field, lock_clock_khz())) fail("a lock time bound is out of range");
}

}  // namespace guest::riscv
