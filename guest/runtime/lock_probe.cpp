#include "runtime/lock_probe.h"

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/lock_probe.h"
#include "lockvisor/abi/ucall.h"
#include "runtime/boot.h"
#include "runtime/cpu.h"
#include "runtime/doorbell.h"
#include "runtime/ucall_report.h"
#include "workloads/lock_probe_rules.h"

namespace guest {

bool g_lock_probe_on;

namespace {

namespace probe = lockvisor::workloads::probe;
using lockvisor::abi::LockProbeArea;
using lockvisor::abi::LockProbeConfig;
using lockvisor::abi::LockProbeCpu;

LockProbeConfig g_config;
LockProbeArea* const g_area = reinterpret_cast<LockProbeArea*>(lockvisor::abi::kLockProbeAddr);
Ucall g_points[kMaxVcpus];  // each vCPU's preemption-point message

// A chosen event: stop here for the VMM to park us (the record is complete:
// the VMM checks it).
void stop_at(const probe::Point& point) {
  if (!point.chosen) return;
  Ucall& u = g_points[this_cpu()];
  u.magic = kUcallMagic;
  u.type = UcallType::kPreemptPoint;
  u.args[0] = static_cast<u32>(point.kind);
  u.args[1] = point.lock;
  u.args[2] = point.index;
  ucall_doorbell(&u);
}

}  // namespace

void lock_probe_init() {
  const BootInfo& info = boot();
  const bool armed = info.version >= 4 && (info.flags & kBootFlagLockProbe) != 0 &&
                     info.lock_probe_gpa == lockvisor::abi::kLockProbeAddr;
  // Every vCPU writes the same values; the workload's start barrier orders
  // them before any hook runs.
  if (armed) g_config = info.lock_probe;
  g_lock_probe_on = armed;
  if (armed) g_area->cpus[this_cpu()] = LockProbeCpu{};
}

void lock_probe_arrive(unsigned lock) { probe::arrive(g_config, *g_area, this_cpu(), lock); }
void lock_probe_spin() { stop_at(probe::spin(g_config, *g_area, this_cpu())); }
void lock_probe_acquired(unsigned lock) { stop_at(probe::acquired(g_config, *g_area, this_cpu(), lock)); }
void lock_probe_release(unsigned lock) { probe::release(g_config, *g_area, this_cpu(), lock); }

void lock_probe_report() {
  const LockProbeCpu& rec = g_area->cpus[this_cpu()];
  for (u32 k = 0; k < lockvisor::abi::kPreemptKinds; ++k) {
    if (!lockvisor::abi::target_armed(g_config.targets[k])) continue;
    report_result(lockvisor::abi::kProbeEventsKeys[k], rec.events[k]);
    report_result(lockvisor::abi::kProbePointsKeys[k], rec.points[k]);
  }
}

}  // namespace guest
