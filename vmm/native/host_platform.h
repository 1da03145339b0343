// host_platform.h: the workload Platform (guest/workloads/platform.h) for
// native runs on Linux host threads.
#pragma once

#include <sched.h>

#include <cstdint>

#include "locks/atomic.h"
#include "vmm/native/native_env.h"
#include "workloads/platform.h"

namespace lockvisor::native {

// The host's lock-clock rate in kHz (locks/arch/primitives.h: the TSC on
// x86-64, the `time` CSR on RISC-V), measured once per process against
// CLOCK_MONOTONIC_RAW over ~20 ms (thread-safe; later calls are free).
std::uint64_t host_lock_clock_khz();

// now() and tsc_khz() are the lock clock and its rate: the workloads time
// with the clock the locks bound their waits with.
struct HostPlatform {
  static std::uint64_t now() { return locks::read_lock_clock(); }
  static std::uint64_t tsc_khz() { return host_lock_clock_khz(); }
  static std::uint64_t ns_to_cycles(std::uint64_t ns) { return workloads::ns_to_cycles(ns, tsc_khz()); }
  // The thread's node: the runner's lock Env's map (--vnuma, native_runner.h),
  // so that the workload's handoff counts see the nodes the locks see.
  static std::uint32_t numa_node(unsigned cpu) { return BenchEnv::numa_node(cpu); }
  // Barrier waits (outside the measured window) give the core away now and
  // then: with more threads than cores, a thread spinning at the end barrier
  // would otherwise steal time slices from threads still finishing.
  static void barrier_relax() {
    locks::cpu_relax();
    static thread_local unsigned spins = 0;
    if (++spins % 64 == 0) sched_yield();
  }
};
static_assert(workloads::Platform<HostPlatform>);

// For negative controls under TSan only (see workloads/platform.h).
struct HostPlatformAtomicData : HostPlatform {
  static constexpr bool kAtomicCsData = true;
};

}  // namespace lockvisor::native
