// What one "host time slice" is on this machine, so that waits can be stated
// in slices (a descheduled waiter cannot be served faster than the
// host gives its vCPU back the CPU).
//
// DEFINITION: the mean time a CPU-bound thread runs before the host scheduler
// switches to another CPU-bound thread sharing its CPU.  Measured directly:
// two spinning threads pinned to one allowed CPU for kMeasureMs, each reading
// its own /proc/thread-self/schedstat (run time, times switched in) before and
// after.  This is the time a vCPU that was just preempted by another vCPU
// waits per competitor, whatever produces it (EEVDF's slice request,
// enforced at the tick without HRTICK; CONFIG_HZ; load).
//
// Also recorded, as cross-checks and fallbacks: EEVDF's slice request of this
// thread (`se.slice` in /proc/thread-self/sched), and base_slice_ns from
// /sys/kernel/debug/sched/ when debugfs is mounted and readable.  If the
// measurement fails, `ns` falls back to se.slice (a lower bound: the slice
// is only enforced at a tick) and says so; if that is missing too, `ns` is
// null and the lab reports waits in slices as n/a.
#pragma once
#include <nlohmann/json.hpp>

namespace lockvisor::lab {

inline constexpr int kHostSliceMeasureMs = 400;

// {"ns": number|null, "definition": text, "source": text, "measured_run_ns",
//  "measured_switches", "cpu", "eevdf_slice_ns", "base_slice_ns"} (the last
// ones null when unknown).  Takes kHostSliceMeasureMs of one CPU.
nlohmann::json host_slice_description();

}  // namespace lockvisor::lab
