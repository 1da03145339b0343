// Proof that the PV path of the PV locks ran, not just that nothing broke:
//   * every PV lock of the registry at 4:1 and 8:1 (vCPUs on one host CPU, where
//     lock holders and queue heads are preempted every time slice, and the
//     VMM holds one holder out of the guest until a waiter has halted) halt
//     and kick: both counts are > 0, and the guest's own counts (pv_kick lock
//     events; halts its Env executed) equal the VMM's, so the halts and kicks
//     the VMM served are exactly the ones the locks made;
//   * under --kick lossy pvqspinlock and pvticket lose a wake-up and the deadlock
//     detector ends the run (exit code 5), while sticky kicks with the same
//     settings complete: sticky kicks close the window, demonstrated.
//
// The lost-wake-up window (between pv_wait's re-check of the lock word and
// the halt) is a few instructions wide; measured here, pvticket at 4:1 hit
// it within seconds but pvqspinlock ran 30 s without. The negative control
// therefore widens it deterministically: WorkloadParams::wait_halt_delay_ns
// (`run --wait-halt-delay-ns`) busy-waits 2 ms inside the window, and 2
// vCPUs per host CPU on both host CPUs (when there are two) let the unlocker
// run during it. Measured on this PVM host with these settings: pvticket
// deadlocks within ~0.5 s (everyone queues behind the lost ticket);
// pvqspinlock lost a wake-up in 4 of 4 runs (with a 200 us delay, 2 of 3
// runs of 5 s), and since its trylock lets the others steal past the halted
// waiter, the detector fires once they have finished (~3.3 s). The
// positive control uses exactly the same settings with sticky kicks; there
// some halts return at once (the kick that landed in the window, latched).
//
// Whether a kick lands in the window at all is a race: a waiter reaches it
// only after kSpinThreshold spins, and on a starved host (the nested machine
// beside a CPU hog: every `pause` there can hand the emulating thread to
// another vCPU) a 3 s run sometimes has no halt at all. So each control
// repeats its run until the window was hit, up to kWindowAttempts times, and
// every attempt must satisfy what holds whether it was hit or not: a run
// without a dropped kick completes (the detector never fires without a lost
// wake-up), and a sticky run always completes without a violation.
#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "locks/lock_events.h"
#include "locks/registry.h"
#include "tests/guest_locks/workload_config.h"
#include "tests/support/kvm_required.h"
#include "tests/support/run_failure.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/run_service.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/pvlock/pv_backend.h"

namespace lockvisor {
namespace {

using machine::Outcome;

machine::RunResult boot(const kvm::KvmSystem& kvm, machine::MachineConfig config,
                        std::unique_ptr<machine::RunService> service = nullptr) {
  config.echo_guest_prints = false;
  config.timeout_s = 60;
  machine::Machine vm(kvm, config, embedded_guest_image());
  if (service) vm.add_service(std::move(service));
  return vm.run();
}

// Parks one lock holder until a waiter has halted. The guest's lock probe
// stops each vCPU, with the lock held, at every 10th acquisition (a holder
// preemption point: --inject holder:...). The first stop pauses that vCPU,
// and the monitor thread resumes it once the backend has served a halt (or
// after 30 s); later stops return at once. The waiters on the same host CPU
// run meanwhile, spin out their threshold and halt, and the release kicks
// them: the PV path runs however the host schedules the threads.
class ParkHolderUntilAHalt : public machine::RunService {
 public:
  void before_boot(machine::BootContext& boot) override {
    for (const auto& v : boot.vcpus) {
      machine::VcpuRunner* self = v.get();
      v->on_preempt_point = [this, self](unsigned, std::span<const std::byte>, const std::uint64_t (&)[3]) {
        // Paused before it is published: the monitor never resumes a
        // pause that has not begun.
        if (armed_.exchange(false) && self->pause()) paused_.store(self);
        return machine::VcpuRunner::PreemptVerdict{};
      };
    }
  }
  void start(machine::RunContext& context) override {
    timer_.emplace(context.io);
    backend_ = &context.backend;
    vcpus_ = context.vcpus.size();
    poll();
  }
  void stop() override {
    if (timer_) timer_->cancel();
    timer_.reset();
  }

 private:
  std::uint64_t halts() const {
    std::uint64_t n = 0;
    for (unsigned i = 0; i < vcpus_; ++i) n += backend_->counters(i).halts.load(std::memory_order_relaxed);
    return n;
  }
  void poll() {
    timer_->expires_after(std::chrono::milliseconds(1));
    timer_->async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      machine::VcpuRunner* holder = paused_.load();
      if (holder == nullptr || (halts() == 0 && ++waited_ms_ < 30'000)) return poll();
      holder->resume();  // and polling ends: there is one pause per run
    });
  }
  std::atomic<bool> armed_{true};
  std::atomic<machine::VcpuRunner*> paused_{nullptr};
  std::optional<boost::asio::steady_timer> timer_;
  pvlock::PvBackend* backend_ = nullptr;
  std::size_t vcpus_ = 0;
  unsigned waited_ms_ = 0;
};

std::uint64_t lock_event(const std::vector<abi::WorkloadStats>& stats, locks::LockEvent e) {
  std::uint64_t n = 0;
  for (const auto& s : stats) n += s.lock_events[static_cast<unsigned>(e)];
  return n;
}

struct PvCase {
  const char* lock;
  unsigned vcpus;  // on one host CPU
};

class PvPath : public ::testing::TestWithParam<PvCase> {};

TEST_P(PvPath, HaltsAndKicksAndGuestAgreesWithVmm) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const PvCase c = GetParam();
  machine::MachineConfig config;
  config.vcpus = c.vcpus;
  config.pcpus = {host::allowed_cpus().at(0)};
  config.program = "lockbench";
  auto& p = test::set_workload(config, abi::WorkloadKind::kLockbench, c.lock);
  p.duration_ns = 1'000'000'000;
  p.cs_ns = 1000;  // long enough that a preempted holder leaves waiters spinning out
  // Whether the host scheduler preempts a holder for longer than a waiter's
  // spin threshold is its own doing: in the nested machine beside a busy
  // loop, whole runs passed without one. So the VMM also holds one holder
  // out of the guest until a waiter has halted (ParkHolderUntilAHalt).
  // The schedule only arms the guest's holder points (its duration is
  // unused: the service decides how long the one park lasts).
  config.lock_probe =
      inject::lock_probe_config(inject::parse_inject_specs("holder:lock=any,every=10,for=1us"), config.seed);
  const machine::RunResult run = boot(*kvm, config, std::make_unique<ParkHolderUntilAHalt>());
  ASSERT_EQ(run.outcome, Outcome::kCompleted) << test::run_failure(run);
  const auto stats = lockstat::workload_stats_from(run);
  const auto vmm = lockstat::vmm_counters(run);
  std::uint64_t violations = 0, guest_halts = 0, ops = 0;
  for (const auto& s : stats) {
    violations += s.violations;
    guest_halts += s.pv_halts;
    ops += s.ops;
  }
  EXPECT_EQ(violations, 0u);
  EXPECT_GT(ops, 0u);
  std::uint64_t pauses = 0, paused_ns = 0;
  for (const auto& v : run.vcpus) {
    pauses += v.park.pauses;
    paused_ns += v.park.paused_ns;
  }
  EXPECT_GT(vmm.halts, 0u) << "a PV lock at " << c.vcpus << ":1 never halted (" << ops << " acquisitions, "
                           << pauses << " holder paused for " << paused_ns / 1000000 << " ms)";
  EXPECT_GT(vmm.kicks, 0u) << "a PV lock at " << c.vcpus << ":1 never kicked";
  EXPECT_EQ(lock_event(stats, locks::LockEvent::pv_kick), vmm.kicks) << "guest pv_kick events vs VMM KICK_CPUs";
  EXPECT_EQ(guest_halts, vmm.halts) << "halts the guest's Env executed vs halts the VMM served";
  EXPECT_GE(lock_event(stats, locks::LockEvent::pv_wait), guest_halts) << "pv_wait counts calls, halting or not";
  EXPECT_EQ(vmm.kicks_dropped, 0u) << "sticky kicks are never dropped";
}

// Every lock the registry marks as needing PV wait/kick, at 4:1 and 8:1: a
// new PV lock runs here without being named.
std::vector<PvCase> pv_cases() {
  std::vector<PvCase> cases;
  for (const locks::LockInfo& l : locks::kLocks)
    if (l.needs_pv)
      for (const unsigned vcpus : {4u, 8u}) cases.push_back({l.name, vcpus});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(PvLocks, PvPath, ::testing::ValuesIn(pv_cases()),
                         [](const auto& info) { return std::string(info.param.lock) + "_" + std::to_string(info.param.vcpus) + "to1"; });

// pvconfer at 4:1 on one host CPU: lock holders are preempted every host
// slice, so waiters find a preempted recorded holder and confer (pv_confer,
// one YIELD_TO each, which the VMM counts as yield_to_calls); every waiter
// that conferred halts and is kicked, so the halt/kick agreement above holds
// for it too (PvPath.*pvconfer_4to1).
TEST(PvConfer, ConfersAtFourToOne) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  machine::MachineConfig config;
  config.vcpus = 4;
  config.pcpus = {host::allowed_cpus().at(0)};
  config.program = "lockbench";
  auto& p = test::set_workload(config, abi::WorkloadKind::kLockbench, "pvconfer");
  p.duration_ns = 1'000'000'000;
  p.cs_ns = 1000;
  // Whether a waiter finds its holder preempted within one run is the host
  // scheduler's doing (as for PvPath's halts): up to three runs, until one
  // has conferred; each run's own counts must hold.
  std::uint64_t confers = 0;
  for (int attempt = 0; attempt < 3 && confers == 0; ++attempt) {
    SCOPED_TRACE(fmt::format("run {}", attempt + 1));
    const auto run = boot(*kvm, config);
    ASSERT_EQ(run.outcome, Outcome::kCompleted) << test::run_failure(run);
    const auto stats = lockstat::workload_stats_from(run);
    std::uint64_t violations = 0;
    for (const auto& s : stats) violations += s.violations;
    EXPECT_EQ(violations, 0u);
    confers = lock_event(stats, locks::LockEvent::pv_confer);
    std::uint64_t yields = 0;
    for (const auto& v : run.vcpus) yields += v.pv.yield_to_calls;
    EXPECT_EQ(confers, yields) << "guest confers vs the VMM's YIELD_TO calls";
  }
  EXPECT_GT(confers, 0u) << "no waiter ever saw its holder preempted at 4:1, in three runs";
}

// The negative control and its positive twin (see the file comment).
machine::MachineConfig lost_wakeup_config(const char* lock, pvlock::KickMode mode) {
  machine::MachineConfig config;
  const auto allowed = host::allowed_cpus();
  config.pcpus.assign(allowed.begin(), allowed.begin() + std::min<std::size_t>(2, allowed.size()));
  config.vcpus = 2 * static_cast<unsigned>(config.pcpus.size());
  config.program = "lockbench";
  config.backend.mode = mode;
  auto& p = test::set_workload(config, abi::WorkloadKind::kLockbench, lock);
  p.duration_ns = 3'000'000'000;
  p.cs_ns = 1000;
  p.wait_halt_delay_ns = 2'000'000;
  return config;
}

class LostWakeup : public ::testing::TestWithParam<const char*> {};

constexpr unsigned kWindowAttempts = 6;

TEST_P(LostWakeup, LossyKicksDeadlockAndTheDetectorEndsTheRun) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  unsigned attempts = 0;
  bool deadlocked = false;
  while (!deadlocked && attempts < kWindowAttempts) {
    ++attempts;
    const auto run = boot(*kvm, lost_wakeup_config(GetParam(), pvlock::KickMode::kLossy));
    if (lockstat::vmm_counters(run).kicks_dropped == 0) {
      ASSERT_EQ(run.outcome, Outcome::kCompleted) << "no kick was dropped, so nobody can be stranded: "
                                                  << test::run_failure(run);
      continue;
    }
    // A dropped kick need not strand its waiter (a later kick for the same
    // slot can wake it), so only a deadlock ends the attempts.
    if (run.outcome == Outcome::kCompleted) continue;
    ASSERT_EQ(run.outcome, Outcome::kDeadlock) << test::run_failure(run);
    EXPECT_EQ(machine::exit_code(run.outcome), 5);
    deadlocked = true;
  }
  std::printf("[ measured ] %s, lossy kicks: %s after %u run(s) of 3 s\n", GetParam(),
              deadlocked ? "a lost wake-up, the detector ended the run" : "no lost wake-up", attempts);
  EXPECT_TRUE(deadlocked) << "no kick landed in the widened window in " << attempts << " runs";
}

TEST_P(LostWakeup, StickyKicksCompleteWithTheSameSettings) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  unsigned attempts = 0;
  std::uint64_t immediate = 0;
  while (immediate == 0 && attempts < kWindowAttempts) {
    ++attempts;
    const auto run = boot(*kvm, lost_wakeup_config(GetParam(), pvlock::KickMode::kSticky));
    ASSERT_EQ(run.outcome, Outcome::kCompleted) << test::run_failure(run);
    std::uint64_t violations = 0;
    for (const auto& s : lockstat::workload_stats_from(run)) violations += s.violations;
    EXPECT_EQ(violations, 0u);
    const auto vmm = lockstat::vmm_counters(run);
    EXPECT_EQ(vmm.kicks_dropped, 0u) << "sticky kicks are never dropped";
    immediate = vmm.halts_immediate;
  }
  std::printf("[ measured ] %s, sticky kicks: %llu halts returned at once (a latched kick) after %u run(s)\n",
              GetParam(), static_cast<unsigned long long>(immediate), attempts);
  EXPECT_GT(immediate, 0u) << "the widened window must have caught kicks that sticky mode latched (" << attempts
                           << " runs)";
}

INSTANTIATE_TEST_SUITE_P(PvLocks, LostWakeup, ::testing::Values("pvqspinlock", "pvticket"));

}  // namespace
}  // namespace lockvisor
