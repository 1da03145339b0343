// `runstate`: reads the vCPU run-state page (runtime/runstate.h) from CPL3
// while every vCPU spins, for tests/runstate's machine test.
//
// Parameters: ms=N (spin time, default 500), mode=observe|write|parkwatch,
// parks=N (parkwatch, default 4),
// until_live=1 (observe: after the ms, go on until the own record has read
// "running", for at most 30 s more: a page the host publishes late is still
// seen, however late).
//   observe  every vCPU meets the others at a barrier, then for `ms` spins
//            reading its own record and its peers' records (plain loads, no
//            exit). Results per vCPU:
//              live            BootInfo says the host publishes the page
//              samples         loop iterations
//              self_running    own record read "running" (it is running)
//              self_unknown    own record read "unknown" (no switch seen yet)
//              self_other      own record read "preempted"/"sleeping": a
//                              switch-in the host never showed the program
//              peer_preempted  distinct preemptions of peers seen (a peer's
//                              record read "preempted" with a seq not seen before)
//              peer_running    the same for "running"
//              own_preemptions own record's preemption count at the end
//              nonzero_words   non-zero 64-bit words in the whole page
//                              (vCPU 0 only; 0 when the page is off)
//              foreign_reads   reads, every 256th sample, of a record past
//                              the last vCPU that were not all zeros: the
//                              host writes none of them in this run, so any
//                              is a stale or misplaced page (vCPU 0 only)
//   write    vCPU 0 makes its own PTE for the page writable (CPL3 can write
//            the page tables, so a hostile guest can too) and writes the
//            page: the read-only memslot drops it and the VMM ends the run
//            as a guest fault naming the page. Other vCPUs just finish.
//   parkwatch  vCPU 0 has the VMM pause vCPU 1 `parks` times and checks
//            vCPU 1's steal-time `preempted` flag around each pause. It asks
//            with a preemption-point ucall whose meaning is the test's own
//            (a run without a handler for it ends as a guest error): args[0]
//            = 1 pauses vCPU 1 and returns once vCPU 1 is parked, 0 resumes
//            it. Each step waits for the one before it, so nothing depends on
//            when the host schedules either thread. vCPU 1 spins until vCPU 0
//            is done. Results (vCPU 0):
//              up_while_parked    pauses after which the flag read up (the
//                                 VMM raises it before the park begins)
//              down_after_resume  resumes after which the flag came down
//                                 (it waits up to 30 s for vCPU 1 to run)
#include "lockvisor/abi/guest_layout.h"
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/doorbell.h"
#include "runtime/ucall_report.h"
#include "runtime/runstate.h"
#include "runtime/shared.h"
#include "runtime/steal_time.h"
#include "runtime/string.h"

namespace guest {
namespace {

Shared<u32> g_arrived;

void observe(u64 ms, bool until_live) {
  const u32 me = this_cpu();
  const u32 n = nr_cpus();
  g_arrived.add(1);
  g_arrived.wait_for(n);

  u64 samples = 0, self_running = 0, self_unknown = 0, self_other = 0, peer_preempted = 0, peer_running = 0;
  u64 foreign_reads = 0;
  u32 last_seq[kRunStateMaxVcpus];
  for (auto& s : last_seq) s = ~0u;
  const u64 end = rdtsc() + ns_to_tsc(ms * 1000000);
  const u64 cap = end + ns_to_tsc(30ull * 1000000000);
  for (;;) {
    const u64 now = rdtsc();
    if (now >= end && (!until_live || self_running > 0 || now >= cap)) break;
    ++samples;
    switch (vcpu_run_state(me)) {
      case RunState::kRunning: ++self_running; break;
      case RunState::kUnknown: ++self_unknown; break;
      default: ++self_other; break;
    }
    if (me == 0 && (samples & 255) == 0) {
      const auto* words = reinterpret_cast<const volatile u64*>(boot().runstate_gpa);
      for (u64 i = u64{n} * (sizeof(VcpuRunState) / 8); i < kRunStateBytes / 8; ++i) {
        if (words[i] != 0) {
          ++foreign_reads;
          break;
        }
      }
    }
    for (u32 peer = 0; peer < n && peer < kRunStateMaxVcpus; ++peer) {
      if (peer == me) continue;
      const u32 seq = __atomic_load_n(&vcpu_runstate(peer)->seq, __ATOMIC_ACQUIRE);
      if (seq == last_seq[peer] || (seq & 1) != 0) continue;
      const RunState s = vcpu_run_state(peer);
      if (s == RunState::kPreempted) ++peer_preempted;
      if (s == RunState::kRunning) ++peer_running;
      last_seq[peer] = seq;
    }
    cpu_relax();
  }
  VcpuRunState own{};
  const bool have = read_vcpu_runstate(me, own);
  report_result("live", runstate_live() ? 1 : 0);
  report_result("samples", samples);
  report_result("self_running", self_running);
  report_result("self_unknown", self_unknown);
  report_result("self_other", self_other);
  report_result("peer_preempted", peer_preempted);
  report_result("peer_running", peer_running);
  report_result("own_preemptions", have ? own.preemptions : 0);
  if (me == 0) {
    const auto* words = reinterpret_cast<const volatile u64*>(boot().runstate_gpa);
    u64 nonzero = 0;
    for (u64 i = 0; i < kRunStateBytes / 8; ++i) nonzero += words[i] != 0 ? 1 : 0;
    report_result("nonzero_words", nonzero);
    report_result("foreign_reads", foreign_reads);
  }
}

Shared<u32> g_watch_done;
lockvisor::abi::Ucall g_park_request;

// Only vCPU 0 asks, and the ucall returns only after the VMM has served it.
void request_peer_park(bool park) {
  g_park_request.magic = lockvisor::abi::kUcallMagic;
  g_park_request.type = lockvisor::abi::UcallType::kPreemptPoint;
  g_park_request.args[0] = park ? 1 : 0;
  g_park_request.args[1] = 0;
  g_park_request.args[2] = 0;
  ucall_doorbell(&g_park_request);
}

void watch_parks(u64 parks) {
  const u32 n = nr_cpus();
  LV_CHECK_MSG(n >= 2, "mode=parkwatch needs two vCPUs");
  g_arrived.add(1);
  g_arrived.wait_for(n);
  if (this_cpu() != 0) {
    g_watch_done.wait_for(1);
    return;
  }
  u64 up = 0, down = 0;
  for (u64 i = 0; i < parks; ++i) {
    request_peer_park(true);
    if (steal_time_preempted(1)) ++up;
    request_peer_park(false);
    const u64 cap = rdtsc() + ns_to_tsc(30ull * 1000000000);
    while (steal_time_preempted(1) && rdtsc() < cap) cpu_relax();
    if (!steal_time_preempted(1)) ++down;
  }
  g_watch_done.store(1);
  report_result("up_while_parked", up);
  report_result("down_after_resume", down);
}

void write_page() {
  if (this_cpu() != 0) return;
  // The page's own PTE (guest_layout.h): set R/W, then write. The page was
  // never touched on this vCPU, so no read-only translation is cached.
  auto* pte = reinterpret_cast<volatile u64*>(kRunStatePtAddr);
  *pte = *pte | 2;
  auto* state = reinterpret_cast<volatile u32*>(boot().runstate_gpa + 4);
  *state = LOCKVISOR_RUNSTATE_RUNNING;
  print("the write to the run-state page was not stopped");
}

}  // namespace

void program_runstate() {
  char mode[16] = "observe";
  arg_str("mode", mode, sizeof mode);
  if (str_equal(mode, "write")) {
    write_page();
  } else if (str_equal(mode, "parkwatch")) {
    watch_parks(arg_u64("parks", 4));
  } else {
    LV_CHECK_MSG(str_equal(mode, "observe"), "mode must be observe, write or parkwatch");
    observe(arg_u64("ms", 500), arg_u64("until_live", 0) != 0);
  }
}

}  // namespace guest
