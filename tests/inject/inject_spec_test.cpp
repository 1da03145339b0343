// --inject syntax, the seeded choice of preemption points and the periodic
// schedule's arithmetic.
#include <gtest/gtest.h>

#include <set>

#include "lockvisor/abi/guest_layout.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/inject/schedule_math.h"
#include "vmm/util/error.h"

namespace lockvisor::inject {
namespace {

using namespace std::chrono_literals;

TEST(InjectSpec, ParsesEveryKind) {
  const auto p = parse_inject_spec("periodic:vcpu=1,every=10ms,for=500us,phase=2ms,count=5");
  EXPECT_EQ(p.kind, InjectKind::kPeriodic);
  EXPECT_EQ(p.vcpu, 1u);
  EXPECT_EQ(p.interval, 10ms);
  EXPECT_EQ(p.duration, 500us);
  EXPECT_EQ(p.phase, 2ms);
  EXPECT_EQ(p.count, 5u);

  const auto r = parse_inject_spec("random:vcpu=all,rate=250.5,for=100us,seed=9");
  EXPECT_EQ(r.kind, InjectKind::kRandom);
  EXPECT_FALSE(r.vcpu.has_value());
  EXPECT_DOUBLE_EQ(r.rate_hz, 250.5);
  EXPECT_EQ(r.seed, 9u);

  const auto h = parse_inject_spec("holder:lock=any,every=4,for=1ms");
  EXPECT_EQ(h.kind, InjectKind::kHolder);
  EXPECT_FALSE(h.lock.has_value());
  EXPECT_EQ(h.every_events, 4u);

  const auto w = parse_inject_spec("waiter:lock=3,p=0.25,for=20ms");
  EXPECT_EQ(w.kind, InjectKind::kWaiter);
  EXPECT_EQ(w.lock, 3u);
  EXPECT_DOUBLE_EQ(w.probability, 0.25);
  EXPECT_EQ(w.duration, 20ms);
}

TEST(InjectSpec, FormatParsesBackToTheSameText) {
  for (const char* text : {"periodic:vcpu=all,every=10ms,for=500us", "periodic:vcpu=0,every=1s,for=1ms,phase=3us,count=2",
                           "random:vcpu=2,rate=100,for=50us,seed=4", "holder:lock=0,every=10,for=1ms",
                           "waiter:lock=any,p=0.5,for=100us,seed=1"}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(format_inject_spec(parse_inject_spec(text)), text);
  }
}

TEST(InjectSpec, SeveralSpecsInOneValue) {
  const auto specs = parse_inject_specs("holder:lock=0,every=2,for=1ms;periodic:vcpu=0,every=5ms,for=1ms");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1].kind, InjectKind::kPeriodic);
}

TEST(InjectSpec, BadSpecsAreOneLineUsageErrors) {
  const std::string above_max = "periodic:vcpu=" + std::to_string(lockvisor::abi::kMaxVcpus) + ",every=1ms,for=1us";
  const std::string bad[] = {
      "",                                         // no kind
      "sometimes:vcpu=0,every=1ms,for=1us",       // unknown kind
      "periodic:vcpu=0,every=1ms",                // no for=
      "periodic:vcpu=0,every=1ms,for=1ms",        // for not shorter than every
      "periodic:vcpu=0,every=10,for=1us",         // no unit
      "periodic:vcpu=0,every=1ms,for=5",          // no unit
      "periodic:vcpu=0,every=1xs,for=1us",        // bad unit
      "periodic:vcpu=-1,every=1ms,for=1us",       // negative
      above_max,                                  // vCPU indexes end below kMaxVcpus
      "periodic:vcpu=0,every=1ms,for=100ns",      // below 1 us
      "periodic:vcpu=0,every=99s,for=1ms",        // above 10 s
      "periodic:vcpu=0,every=1ms,for=1us,for=2us",  // twice
      "periodic:vcpu=0,every=1ms,for=1us,bogus=1",  // unknown key
      "periodic:vcpu=0,every=1ms,for=1us,count=0",  // count >= 1
      "random:vcpu=0,rate=0,for=1us",             // rate > 0
      "random:vcpu=0,rate=nan,for=1us",           // not finite
      "random:vcpu=0,rate=1e9,for=1us",           // too fast
      "holder:lock=0,for=1ms",                    // neither every nor p
      "holder:lock=0,every=2,p=0.5,for=1ms",      // both
      "holder:lock=16,every=2,for=1ms",           // no such slot
      "waiter:lock=0,p=1.5,for=1ms",              // p > 1
      "waiter:lock=0,p=0,for=1ms",                // p = 0
      "waiter:vcpu=0,lock=0,p=0.5,for=1ms",       // vcpu is not a targeted key
      "holder:lock=0,every=2,for=1ms,count=3",    // count is not a targeted key
      "holder:lock=0,every=2,for=1ms,",           // empty item
      "holder:lock=0,,every=2,for=1ms",           // empty item
      "periodic:vcpu=0,every=1ms,for=2s",         // above 1 s
  };
  for (const std::string& text : bad) {
    SCOPED_TRACE(text);
    try {
      parse_inject_specs(text);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--inject", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// A duration out of range is said in the duration's own units and range,
// also when its count does not fit 64 bits.
TEST(InjectSpec, ADurationOutOfRangeIsSaidInItsUnits) {
  for (const auto& [text, words] :
       {std::pair{"periodic:vcpu=0,every=18446744073709551616ms,for=1ms", "every=18446744073709551616ms is out of range 10us..10s"},
        std::pair{"periodic:vcpu=0,every=20000ms,for=1ms", "every=20000ms is out of range 10us..10s"}}) {
    try {
      parse_inject_specs(text);
      ADD_FAILURE() << text << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
}

TEST(InjectSpec, ValidationAgainstTheVm) {
  EXPECT_THROW(validate_inject_specs(parse_inject_specs("periodic:vcpu=3,every=1ms,for=1us"), 3), Error);
  EXPECT_NO_THROW(validate_inject_specs(parse_inject_specs("periodic:vcpu=2,every=1ms,for=1us"), 3));
  EXPECT_THROW(validate_inject_specs(parse_inject_specs("holder:lock=0,every=2,for=1ms;holder:lock=1,every=2,for=1ms"), 2),
               Error);
  EXPECT_NO_THROW(
      validate_inject_specs(parse_inject_specs("holder:lock=0,every=2,for=1ms;waiter:lock=0,every=2,for=1ms"), 2));
}

TEST(InjectSpec, LockProbeConfigCarriesTheTargets) {
  EXPECT_FALSE(lock_probe_config(parse_inject_specs("periodic:vcpu=0,every=1ms,for=1us"), 1).has_value());
  const auto c = lock_probe_config(parse_inject_specs("holder:lock=2,every=8,for=1ms;waiter:lock=any,p=0.5,for=3us"), 42);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->seed, 42u);
  const auto& h = c->targets[static_cast<unsigned>(abi::PreemptKind::kHolder)];
  const auto& w = c->targets[static_cast<unsigned>(abi::PreemptKind::kWaiter)];
  EXPECT_EQ(h.every, 8u);
  EXPECT_EQ(h.lock, 2u);
  EXPECT_EQ(h.duration_ns, 1000000u);
  EXPECT_EQ(w.lock, abi::kProbeAnyLock);
  EXPECT_EQ(w.chance_q32, std::uint64_t{1} << 31);
  EXPECT_EQ(w.duration_ns, 3000u);
  EXPECT_EQ(lock_probe_config(parse_inject_specs("holder:lock=2,every=8,for=1ms,seed=5"), 42)->seed, 5u);
}

std::vector<std::uint64_t> picks(std::uint64_t seed, unsigned vcpu, const abi::PreemptTarget& t, std::uint64_t n = 4000) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t i = 0; i < n; ++i)
    if (abi::preempt_point_chosen(seed, vcpu, abi::PreemptKind::kWaiter, i, t)) out.push_back(i);
  return out;
}

TEST(SeededChoice, SameSeedSamePicksOtherSeedOtherPicks) {
  const abi::PreemptTarget every{7, abi::kProbeAnyLock, 0, 0};
  const abi::PreemptTarget chance{0, abi::kProbeAnyLock, std::uint64_t{1} << 30, 0};  // p = 1/4
  // every=7 has only 7 phases to pick from: 8 seeds share some (about 5
  // distinct on average); a probability gives each seed its own picks.
  for (const auto& [t, min_distinct] : {std::pair{every, 3u}, std::pair{chance, 8u}}) {
    EXPECT_EQ(picks(1, 0, t), picks(1, 0, t));
    std::set<std::vector<std::uint64_t>> distinct;
    for (std::uint64_t seed = 1; seed <= 8; ++seed) distinct.insert(picks(seed, 0, t));
    EXPECT_GE(distinct.size(), min_distinct) << "seeds barely change the picks";
  }
  EXPECT_NE(picks(1, 0, chance), picks(1, 1, chance)) << "every vCPU has its own stream";
}

TEST(SeededChoice, EveryNthPicksExactlyOneInN) {
  const abi::PreemptTarget t{7, 0, 0, 0};
  for (std::uint64_t seed : {1u, 2u, 99u}) {
    const auto p = picks(seed, 3, t, 700);
    ASSERT_EQ(p.size(), 100u);
    for (std::size_t i = 1; i < p.size(); ++i) EXPECT_EQ(p[i] - p[i - 1], 7u);
  }
}

TEST(SeededChoice, ProbabilityIsRoughlyP) {
  const abi::PreemptTarget t{0, 0, std::uint64_t{1} << 30, 0};
  const auto p = picks(5, 0, t, 40000);
  EXPECT_GT(p.size(), 9000u);
  EXPECT_LT(p.size(), 11000u);
  const abi::PreemptTarget always{0, 0, std::uint64_t{1} << 32, 0};
  EXPECT_EQ(picks(5, 0, always, 100).size(), 100u);
}

TEST(PeriodicSchedule, DueTimesAndCounts) {
  EXPECT_EQ(periodic_due(2ms, 10ms, 0), 2ms);
  EXPECT_EQ(periodic_due(2ms, 10ms, 3), 32ms);
  EXPECT_EQ(periodic_due_within(2ms, 10ms, 1ms), 0u);
  EXPECT_EQ(periodic_due_within(2ms, 10ms, 2ms), 1u);
  EXPECT_EQ(periodic_due_within(2ms, 10ms, 31ms), 3u);
  EXPECT_EQ(periodic_due_within(2ms, 10ms, 32ms), 4u);
  EXPECT_EQ(periodic_due_within(0ms, 10ms, 1s), 101u);
}

TEST(RandomSchedule, SeededStreamAndPoissonGaps) {
  SeededStream a(7, 0), b(7, 0), c(8, 0), d(7, 1);
  bool differs_seed = false, differs_vcpu = false;
  for (int i = 0; i < 16; ++i) {
    const auto x = a.next();
    EXPECT_EQ(x, b.next());
    differs_seed |= x != c.next();
    differs_vcpu |= x != d.next();
  }
  EXPECT_TRUE(differs_seed);
  EXPECT_TRUE(differs_vcpu);
  // Mean gap of 1/rate.
  SeededStream s(3, 0);
  double total = 0;
  for (int i = 0; i < 20000; ++i) total += static_cast<double>(poisson_gap(s.uniform(), 1000).count());
  EXPECT_NEAR(total / 20000, 1e6, 5e4);
  EXPECT_EQ(poisson_gap(0.0, 1000).count(), 0);
}

}  // namespace
}  // namespace lockvisor::inject
