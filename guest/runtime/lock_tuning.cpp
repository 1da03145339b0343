// lock_tuning.cpp: `pvb_*=N` arguments -> locks::pvb::g_tuning.
#include "runtime/lock_tuning.h"

#include "locks/pvbounded_tuning.h"
#include "runtime/boot.h"
#include "runtime/format.h"
#include "runtime/report.h"

namespace guest {

void apply_lock_tuning(bool report) {
  using lockvisor::locks::pvb::g_tuning;
  for (const auto& k : lockvisor::locks::pvb::kTuningKeys) {
    // bound_us is always (re)set: it converts T with this guest's TSC rate.
    const u64 value = arg_u64(k.key, g_tuning.*k.field);
    if (!lockvisor::locks::pvb::set_tuning(k, value, tsc_khz()))
      assert_fail(__FILE__, __LINE__,
                  Text().str(k.key).str("=").u(value).str(" is out of range ").u(k.min).str("..").u(k.max).c_str());
    if (report) report_result(k.key, value);
  }
}

}  // namespace guest
