#include "runtime/riscv64/lock_env.h"

#include "runtime/riscv64/sbi.h"

namespace guest::riscv {

lockvisor::locks::LockEvents g_lock_events[kRiscvMaxHarts];
u64 g_halts[kRiscvMaxHarts];
bool g_ipi_available;

void set_lock_env_features() { g_ipi_available = sbi_probe(kSbiExtIpi); }

}  // namespace guest::riscv
