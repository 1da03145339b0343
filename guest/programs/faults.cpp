// fault: makes this guest take an exception on vCPU 0, so that tests can see
// the VMM report it (vector, error code, RIP) and end the run.
//   kind=gp  `hlt` at CPL3           -> #GP(0)
//   kind=pf  read 3 GiB (unmapped)   -> #PF
//   kind=ud  ud2                     -> #UD
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/pv.h"
#include "runtime/string.h"

namespace guest {

void program_fault() {
  if (this_cpu() != 0) {
    for (;;) halt();  // wait; the run ends with vCPU 0's fault
  }
  char kind[8] = "gp";
  arg_str("kind", kind, sizeof kind);
  if (str_equal(kind, "gp")) {
    asm volatile("hlt");
  } else if (str_equal(kind, "pf")) {
    LV_CHECK_LE(boot().memory_bytes, 3ull << 30);
    volatile u64* unmapped = reinterpret_cast<volatile u64*>(3ull << 30);
    (void)*unmapped;
  } else if (str_equal(kind, "ud")) {
    asm volatile("ud2");
  }
  assert_fail(__FILE__, __LINE__, "the fault did not happen");
}

}  // namespace guest
