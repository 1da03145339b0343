#include "runtime/riscv64/wake.h"

#include "runtime/format.h"
#include "runtime/riscv64/hart.h"
#include "runtime/riscv64/sbi.h"

namespace guest::riscv {

void wake_kick(unsigned hart) {
  const SbiRet r = send_ipi(hart);
  if (r.error != kSbiSuccess) fail(Text().str("SBI IPI to hart ").u(hart).str(" failed: error ").i(r.error).c_str());
}

}  // namespace guest::riscv
