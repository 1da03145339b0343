// pingpong: the vCPUs pass a turn around a ring. A vCPU whose turn it is not
// halts (after an optional spin of `spin` pauses); the one handing over the
// turn sets it, then kicks the next vCPU. Correct only with sticky kicks:
// the kick can land between the waiter's check and its halt.
//   rounds=N  each vCPU takes its turn N times
//   spin=N    pause iterations before halting (0: halt at once)
#include "programs/halt_kind.h"
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/shared.h"

namespace guest {
namespace {
Shared<u32> g_turn;
Shared<u64> g_handoffs;
}  // namespace

void program_pingpong() {
  const bool kernel = use_kernel_halt();
  const u64 rounds = arg_u64("rounds", 1000);
  const u64 spin = arg_u64("spin", 0);
  const u32 me = this_cpu();
  const u32 n = nr_cpus();
  LV_CHECK_GE(n, 2u);
  const u32 next = (me + 1) % n;
  const u64 start = rdtsc();
  for (u64 r = 0; r < rounds; ++r) {
    for (u64 s = 0; s < spin && g_turn.load() != me; ++s) cpu_relax();
    while (g_turn.load() != me) halt_as_configured(kernel);
    g_handoffs.add(1);
    g_turn.store(next);
    LV_CHECK_EQ(kick_cpu(apic_id_of(next)), kKvmSuccess);
  }
  report_result("elapsed_ns", tsc_to_ns(rdtsc() - start), ResultKind::kNanoseconds);
  if (me == 0) {
    // vCPU 0 finished its last hand-off; the others finish theirs after it.
    report_result("rounds", rounds);
  }
}

}  // namespace guest
