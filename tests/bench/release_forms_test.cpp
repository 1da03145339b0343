// bench's release forms (vmm/bench/release_forms.h): what is measured is
// every pair, on the CPU asked for, and bad arguments are refused. What the
// forms cost is the CPU's business and is not asserted here.
#include <gtest/gtest.h>

#include <sched.h>

#include <cmath>

#include "vmm/bench/release_forms.h"
#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"

namespace lockvisor::bench {
namespace {

TEST(ReleaseForms, EveryFormIsTimedOverEveryRound) {
  const int cpu = host::allowed_cpus().back();
  const ReleaseFormCosts c = measure_release_forms(cpu, 3, 1000);
  EXPECT_EQ(c.rounds, 3u);
  EXPECT_EQ(c.pairs, 1000u);
  // A pair is at least one instruction: a zero would be a loop the compiler
  // removed or a clock that did not move.
  for (double ns : {c.byte_store_ns, c.locked_and_ns, c.word_store_ns}) {
    EXPECT_TRUE(std::isfinite(ns));
    EXPECT_GT(ns, 0.0);
  }
}

TEST(ReleaseForms, TheCallersAffinityIsLeftAsItWas) {
  const auto before = host::thread_affinity(pthread_self());
  measure_release_forms(host::allowed_cpus().front(), 1, 100);
  EXPECT_EQ(host::thread_affinity(pthread_self()), before);
}

TEST(ReleaseForms, ZeroRoundsOrPairsAreRefused) {
  EXPECT_THROW(measure_release_forms(host::allowed_cpus().front(), 0, 100), Error);
  EXPECT_THROW(measure_release_forms(host::allowed_cpus().front(), 1, 0), Error);
}

TEST(ReleaseForms, ACpuThisProcessMayNotUseIsAnError) {
  EXPECT_THROW(measure_release_forms(CPU_SETSIZE - 1, 1, 100), Error);
}

}  // namespace
}  // namespace lockvisor::bench
