// --inject on real runs: the timed schedules deliver what they promise, the
// targeted ones hit holders and first waiters, the guest's and the VMM's
// counts agree, a seed repeats the same preemption points, and a guest cannot
// park itself without a schedule. Beneath every park is the vCPU interrupt;
// one with no request behind it costs one exit and never stalls the guest.
#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "tests/support/kvm_required.h"
#include "tests/support/run_failure.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/inject/injector.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/run_service.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/report/run_report.h"

namespace lockvisor::inject {
namespace {

using machine::MachineConfig;
using machine::Outcome;
using machine::RunResult;

MachineConfig lockbench(unsigned vcpus, const std::string& lock, std::uint64_t iterations, double duration_s = 0.3) {
  experiment::WorkloadSettings w;
  w.lock = lock;
  w.workload = "lockbench";
  w.iterations = iterations;
  w.duration_s = duration_s;
  MachineConfig config;
  config.vcpus = vcpus;
  config.program = "lockbench";
  config.workload = experiment::workload_params(w, config.seed, vcpus);
  config.echo_guest_prints = false;
  config.capture_serial = true;
  config.timeout_s = 120;
  return config;
}

RunResult run(const kvm::KvmSystem& kvm, MachineConfig config, const std::string& inject, bool with_injector = true) {
  auto specs = parse_inject_specs(inject);
  validate_inject_specs(specs, config.vcpus);
  config.lock_probe = lock_probe_config(specs, config.seed);
  for (const auto& s : specs) config.inject.push_back(format_inject_spec(s));
  machine::Machine vm(kvm, config, embedded_guest_image());
  if (with_injector) vm.add_service(std::make_unique<Injector>(std::move(specs), config.seed, config.vcpus));
  return vm.run();
}

// The targeted kind's counts agree on both sides, and the VMM requested one
// park for each point (nothing else was injected).
void expect_counts_agree(const RunResult& r, const char* kind) {
  for (const auto& v : r.vcpus) {
    SCOPED_TRACE(fmt::format("vCPU {} {}", v.index, kind));
    const auto& c = v.injected.at(kind);
    ASSERT_TRUE(c.guest_count.has_value());
    EXPECT_EQ(c.count, *c.guest_count);
    EXPECT_EQ(c.event_indices.size(), std::min<std::size_t>(c.count, Injector::kMaxRecordedEvents));
    EXPECT_EQ(v.park.requested, c.count);
    EXPECT_LE(v.park.parks, c.count);  // one the host delayed past its end is not slept
  }
}

TEST(InjectMachine, PeriodicDeliversItsCountAndLength) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = lockbench(2, "ticket", 0, 0.4);
  // The first one 50 ms in: after the vCPU threads have entered the guest
  // (a request before that would merge with the next into one park).
  const RunResult r = run(*kvm, config, "periodic:vcpu=0,every=20ms,for=2ms,phase=50ms,count=6");
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  const auto& v0 = r.vcpus[0];
  const auto& c = v0.injected.at("periodic");
  EXPECT_EQ(c.count, 6u);
  EXPECT_EQ(c.ns, 6u * 2'000'000);
  EXPECT_EQ(v0.park.requested, 6u);
  // What the vCPU thread actually slept depends on the host: a park ends at
  // request + D (VcpuPark; its unit tests check that deadline), so a thread
  // the host kept off its CPU for longer than D skips it, two requests can
  // share one park, and a thread the host wakes late oversleeps by as long as
  // the host likes. Only the count has a bound that holds on every host.
  EXPECT_LE(v0.park.parks, c.count);
  EXPECT_EQ(r.vcpus[1].injected.at("periodic").count, 0u);
  EXPECT_EQ(r.vcpus[1].park.parks, 0u);
  const auto json = report::run_to_json(r, config);
  EXPECT_EQ(json["vcpus"][0]["injected_preemptions"]["by_kind"]["periodic"]["count"], 6u);
}

TEST(InjectMachine, HolderPointsHitEveryNthAcquisitionAndCountsAgree) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const RunResult r = run(*kvm, lockbench(2, "pvqspinlock", 2000), "holder:lock=any,every=100,for=100us");
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  expect_counts_agree(r, "holder");
  for (const auto& v : r.vcpus) {
    // Every acquisition is a holder event: exactly 1 in 100 of 2000 is chosen.
    EXPECT_EQ(v.injected.at("holder").guest_events, 2000u);
    EXPECT_EQ(v.injected.at("holder").count, 20u);
    EXPECT_GE(v.park.parked_ns, 20u * 100'000);
  }
}

// First waiters need an overlap: one vCPU arriving while the other holds the
// lock. Left to the host, that overlap may not come at all (one vCPU can run
// its whole window while the other waits for a CPU). So the test makes it:
// a holder schedule parks every holder for 1 ms with the lock held (every
// one: a vCPU slowed by the points and a loaded host may acquire the lock
// only a few hundred times, and an every-Nth rule may choose none), and
// whichever vCPU runs meanwhile arrives at a held lock nobody waits for.
// Every such first waiter is a point (every=1).
TEST(InjectMachine, WaiterPointsHitFirstWaitersAndCountsAgree) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto config = lockbench(2, "ticket", 0, 0.4);
  const RunResult r = run(*kvm, config, "holder:lock=0,every=1,for=1ms;waiter:lock=0,every=1,for=50us");
  ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
  std::uint64_t points = 0, events = 0, holder_points = 0;
  for (const auto& v : r.vcpus) {
    SCOPED_TRACE(fmt::format("vCPU {}", v.index));
    const auto& waiter = v.injected.at("waiter");
    const auto& holder = v.injected.at("holder");
    ASSERT_TRUE(waiter.guest_count.has_value());
    ASSERT_TRUE(holder.guest_count.has_value());
    EXPECT_EQ(waiter.count, *waiter.guest_count);
    EXPECT_EQ(holder.count, *holder.guest_count);
    EXPECT_EQ(waiter.count, waiter.guest_events.value_or(0)) << "every first waiter is a point (every=1)";
    // The VMM requested one park per point of either kind, nothing else.
    EXPECT_EQ(v.park.requested, waiter.count + holder.count);
    EXPECT_LE(v.park.parks, v.park.requested);
    points += waiter.count;
    events += waiter.guest_events.value_or(0);
    holder_points += holder.count;
  }
  EXPECT_GT(holder_points, 0u) << "no holder was parked with the lock held";
  EXPECT_GT(points, 0u) << "two vCPUs on one lock, " << holder_points << " holders parked for 1 ms with it held: "
                        << events << " first-waiter events";
}

// Serves the `runstate` program's parkwatch requests (its preemption-point
// ucalls on vCPU 0): 1 pauses vCPU 1 and returns once vCPU 1 is parked, 0
// resumes it and returns once the park has ended (so the next pause is a park
// of its own, not the same one continued). The waits run on vCPU 0's thread,
// which is what keeps the guest's check in step with the park: vCPU 0 reads
// the flag only after the park has begun, and waits in the guest for it to
// come down.
class PeerPauser : public machine::RunService {
 public:
  void before_boot(machine::BootContext& boot) override {
    machine::VcpuRunner* peer = boot.vcpus[1].get();
    boot.vcpus[0]->on_preempt_point = [peer](unsigned, std::span<const std::byte>,
                                             const std::uint64_t (&args)[3]) -> machine::VcpuRunner::PreemptVerdict {
      const bool pause = args[0] != 0;
      if (!pause)
        peer->resume();
      else if (!peer->pause())
        return {{}, "vCPU 1 could not be paused"};
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (peer->parked() != pause) {
        if (std::chrono::steady_clock::now() > deadline)
          return {{}, pause ? "vCPU 1 was not parked within 30 s" : "vCPU 1 stayed parked for 30 s"};
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      return {};
    };
  }
  void start(machine::RunContext&) override {}
  void stop() override {}
};

// While a park lasts, the parked vCPU's steal-time `preempted` flag is up,
// as hardware KVM shows a descheduled vCPU, and it is down again once the
// vCPU runs. A pause and an injected preemption are the same park to the
// vCPU thread (VcpuRunner::serve_park); the pause is used here because its
// end waits for the guest's check, so the test holds however the host
// schedules the two vCPU threads. --no-steal-time: the guest enables no
// record and the flag never rises.
TEST(InjectMachine, AParkRaisesTheVcpusPreemptedFlagUntilItRunsAgain) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  constexpr std::uint64_t kParks = 5;
  for (const bool steal_time : {true, false}) {
    SCOPED_TRACE(steal_time ? "steal time advertised" : "--no-steal-time");
    MachineConfig config;
    config.vcpus = 2;
    config.program = "runstate";
    config.args = fmt::format("mode=parkwatch parks={}", kParks);
    config.steal_time = steal_time;
    config.echo_guest_prints = false;
    config.capture_serial = true;
    config.timeout_s = 120;
    machine::Machine vm(*kvm, config, embedded_guest_image());
    vm.add_service(std::make_unique<PeerPauser>());
    const RunResult r = vm.run();
    ASSERT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
    EXPECT_EQ(r.vcpus[1].park.pauses, kParks);
    const machine::ResultValue* up = r.result(0, "up_while_parked");
    const machine::ResultValue* down = r.result(0, "down_after_resume");
    ASSERT_TRUE(up != nullptr && down != nullptr) << "vCPU 0 reported no parkwatch results";
    EXPECT_EQ(up->values.at(0), steal_time ? kParks : 0u);
    EXPECT_EQ(down->values.at(0), kParks);
  }
}

TEST(InjectMachine, SameSeedSamePointsOtherSeedOtherPoints) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  auto indices = [&](std::uint64_t seed) {
    auto config = lockbench(2, "pvqspinlock", 1000);
    config.seed = seed;
    config.workload->seed = seed;
    const RunResult r = run(*kvm, config, "holder:lock=0,p=0.03,for=20us");
    EXPECT_EQ(r.outcome, Outcome::kCompleted) << test::run_failure(r);
    expect_counts_agree(r, "holder");
    std::vector<std::vector<std::uint64_t>> out;
    for (const auto& v : r.vcpus) out.push_back(v.injected.at("holder").event_indices);
    return out;
  };
  const auto a = indices(7);
  EXPECT_EQ(a, indices(7));
  EXPECT_NE(a, indices(8));
  EXPECT_FALSE(a[0].empty());
}

TEST(InjectMachine, PreemptionPointWithoutAScheduleIsAGuestError) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  // BootInfo arms the probe but no injector listens: the guest's points are
  // unsolicited, and the first one ends the run.
  const RunResult r = run(*kvm, lockbench(2, "ticket", 500), "holder:lock=any,every=1,for=10us", false);
  EXPECT_EQ(r.outcome, Outcome::kGuestFault);
  EXPECT_NE(r.reason.find("preemption point"), std::string::npos) << r.reason;
  for (const auto& v : r.vcpus) EXPECT_EQ(v.park.parks, 0u);
}

// Interrupts vCPU 0 every millisecond, `count` times, with nothing asked of
// it: the state a park or the run-state page's late join leaves when the
// vCPU thread served the request before its requester wrote immediate_exit.
// After the last one it ends the run, so every interrupt is sent however late
// the host runs the timer.
class BareInterrupts : public machine::RunService {
 public:
  static constexpr const char* kDone = "every interrupt sent";
  explicit BareInterrupts(unsigned count) : left_(count) {}
  void start(machine::RunContext& context) override {
    timer_.emplace(context.io);
    vcpu_ = context.vcpus[0].get();
    control_ = &context.control;
    arm();
  }
  // The timer goes with the run: the io_context it belongs to is destroyed
  // after the run returns, before this service.
  void stop() override {
    if (timer_) timer_->cancel();
    timer_.reset();
  }
  unsigned sent() const { return sent_; }

 private:
  void arm() {
    timer_->expires_after(std::chrono::milliseconds(1));
    timer_->async_wait([this](const boost::system::error_code& ec) {
      if (ec || left_ == 0) return;
      vcpu_->interrupt();
      ++sent_;
      if (--left_ > 0)
        arm();
      else
        control_->end(Outcome::kInterrupted, kDone);
    });
  }
  std::optional<boost::asio::steady_timer> timer_;
  machine::VcpuRunner* vcpu_ = nullptr;
  machine::RunControl* control_ = nullptr;
  unsigned left_;
  unsigned sent_ = 0;
};

TEST(InjectMachine, AnInterruptWithNothingToServeCostsOneExit) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  // One vCPU that would run for a minute without a halt, so every interrupt
  // finds it in the guest or between two exits; the service ends the run.
  auto config = lockbench(1, "ticket", 0, 60);
  config.timeout_s = 120;
  constexpr unsigned kInterrupts = 100;
  machine::Machine vm(*kvm, config, embedded_guest_image());
  auto service = std::make_unique<BareInterrupts>(kInterrupts);
  const BareInterrupts& interrupts = *service;
  vm.add_service(std::move(service));
  const RunResult r = vm.run();
  ASSERT_EQ(r.outcome, Outcome::kInterrupted) << test::run_failure(r);
  ASSERT_EQ(r.reason, BareInterrupts::kDone);
  EXPECT_EQ(interrupts.sent(), kInterrupts);
  const std::uint64_t signal_exits = r.vcpus[0].exits.count("signal") ? r.vcpus[0].exits.at("signal") : 0;
  EXPECT_GE(signal_exits, 1u);
  // Each interrupt is at most one exit (two close together may share one);
  // one more for the run-state page when it arrives after the first entry,
  // and one for the end of the run. Left set, immediate_exit would make every
  // later KVM_RUN return EINTR at once: a flood of signal exits, far above this.
  EXPECT_LE(signal_exits, kInterrupts + 2u);
}

}  // namespace
}  // namespace lockvisor::inject
