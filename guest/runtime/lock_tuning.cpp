// lock_tuning.cpp: lock parameter arguments (`pvb_*=N`, a named value such as
// pvb_handoff=running, q_pending, pvq_unfair) -> locks::pvb::g_tuning.
#include "runtime/lock_tuning.h"

#include "locks/pvbounded_tuning.h"
#include "runtime/boot.h"
#include "runtime/format.h"
#include "runtime/ucall_report.h"

namespace guest {

void apply_lock_tuning(const char* report_for) {
  using lockvisor::locks::pvb::g_tuning;
  for (const auto& k : lockvisor::locks::pvb::kTuningKeys) {
    // Every key is always (re)set: the *_us ones convert with this guest's lock-clock rate (its TSC's).
    u64 value = g_tuning.*k.field;
    char text[32];
    if (arg_str(k.key, text, sizeof text) && !lockvisor::locks::pvb::parse_tuning_value(k, text, &value)) {
      char accepted[160];
      lockvisor::locks::pvb::describe_accepted(k, accepted, sizeof accepted);
      assert_fail(__FILE__, __LINE__,
                  Text().str(k.key).str("=").str(text).str(" is not a valid value (").str(accepted).str(")").c_str());
    }
    if (!lockvisor::locks::pvb::set_tuning(k, value, tsc_khz()))
      assert_fail(__FILE__, __LINE__,
                  Text().str(k.key).str("=").u(value).str(" is out of range ").u(k.min).str("..").u(k.max).c_str());
    if (report_for != nullptr && lockvisor::locks::pvb::tuning_key_used_by(k, report_for)) report_result(k.key, value);
  }
}

}  // namespace guest
