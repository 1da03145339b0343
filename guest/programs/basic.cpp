// Smallest programs: `empty` (boot and finish: startup-cost benchmark) and
// `hello` (serial and report channel smoke test).
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/doorbell.h"
#include "runtime/pv.h"
#include "runtime/ucall_report.h"

namespace guest {

void program_empty() {}

void program_hello() {
  if (this_cpu() == 0) {
    for (const char* s = "hello from lockvisor guest\n"; *s; ++s) serial_byte(*s);
    print(Text().str("vCPUs: ").u(nr_cpus()).str(", TSC kHz: ").u(tsc_khz()).c_str());
    report_result("pv_unhalt", pv_unhalt_advertised() ? 1 : 0);
  }
}

}  // namespace guest
