// freestanding_check.cpp: proves the workload headers compile as guest code.
//
// Compiled (never linked) with the guest's flags as part of the
// lockvisor_locks_freestanding_check OBJECT target (tests/native/CMakeLists.txt):
// -ffreestanding -fno-exceptions -fno-rtti -nostdlib -mno-red-zone -O2 -Wall
// -Wextra -Werror.  Instantiates run_workload for two locks (and busted,
// with the atomic-data platform) with a dummy Env and Platform.
#include "locks/busted.h"
#include "locks/qspinlock.h"
#include "locks/registry.h"
#include "locks/ticket.h"
#include "workloads/platform.h"
#include "workloads/random.h"
#include "workloads/shared_state.h"
#include "workloads/workloads.h"

#if __STDC_HOSTED__
#error "freestanding_check.cpp must be compiled with -ffreestanding"
#endif

namespace {

using namespace lockvisor;
using lockvisor::abi::u64;
using lockvisor::abi::u8;

locks::LockEvents g_wl_events[locks::kMaxCpus];
volatile unsigned g_wl_cpu;

struct WlEnv {
  static unsigned cpu() { return g_wl_cpu; }
  static unsigned nr_cpus() { return 4; }
  static void wait(volatile u8* ptr, u8 val) {
    if (*ptr == val) __asm__ volatile("hlt" ::: "memory");
  }
  static void kick(unsigned cpu) { __asm__ volatile("" ::"r"(cpu) : "memory"); }
  static bool pv_available() { return true; }
  static bool virtualized() { return true; }
  static bool dedicated() { return false; }
  static locks::LockEvents& events() { return g_wl_events[g_wl_cpu]; }
};

struct WlPlatform {
  static u64 now() { return __builtin_ia32_rdtsc(); }
  static u64 tsc_khz() { return 2000000; }
  static u64 ns_to_cycles(u64 ns) { return workloads::ns_to_cycles(ns, tsc_khz()); }
};

struct WlAtomicPlatform : WlPlatform {
  static constexpr bool kAtomicCsData = true;
  static void barrier_relax() { locks::cpu_relax(); }
};

static_assert(workloads::Platform<WlPlatform>);

template <class L>
workloads::WorkloadShared<L> g_shared;  // .bss, like the guest's
abi::WorkloadStats g_stats[4];

template <class L, class P = WlPlatform>
void instantiate(const abi::WorkloadParams& p) {
  workloads::run_workload<WlEnv, L, P>(p, g_shared<L>, g_wl_cpu, g_stats[g_wl_cpu]);
}

}  // namespace

extern "C" unsigned lockvisor_workloads_freestanding_check(const abi::WorkloadParams* p) {
  if (workloads::check_params(*p) != nullptr) return 0;
  instantiate<locks::TicketLock<WlEnv>>(*p);
  instantiate<locks::QSpinLock<WlEnv>>(*p);
  instantiate<locks::BustedLock<WlEnv>, WlAtomicPlatform>(*p);
  workloads::Rng rng(p->seed, 0);
  return static_cast<unsigned>(rng.next() + g_stats[0].ops);
}
