// The run of a built Machine: its vCPU threads, and the event loop on the
// calling thread that watches them (the --timeout watchdog, the deadlock
// detector, SIGINT/SIGTERM/SIGHUP as StopSignals hands them over) until the
// run ends, then the report. machine.cpp builds what this runs.
#include "vmm/machine/machine.h"

#include "vmm/machine/machine_state.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "vmm/host/cpu_set.h"
#include "vmm/machine/steal_time.h"
#include "vmm/machine/vnuma.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace {

// While it lives, this thread's signal mask is the one vCPU threads must
// inherit (they take it when they start): SIGINT/SIGTERM/SIGHUP blocked
// (they belong to StopSignals, already blocked process-wide when main()
// installed it) and SIGUSR1 taken, or KVM_RUN would not return EINTR. The
// thread's own mask comes back when it ends.
class VcpuThreadMask {
 public:
  VcpuThreadMask() {
    const sigset_t stop_set = stop_signal_set();
    sigset_t kick_set;
    sigemptyset(&kick_set);
    sigaddset(&kick_set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &stop_set, &previous_);
    pthread_sigmask(SIG_UNBLOCK, &kick_set, nullptr);
  }
  ~VcpuThreadMask() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  VcpuThreadMask(const VcpuThreadMask&) = delete;
  VcpuThreadMask& operator=(const VcpuThreadMask&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace

std::vector<std::string> Machine::State::vcpu_state_lines() const {
  std::vector<std::string> lines;
  for (const auto& v : vcpus) lines.push_back(v->state_line());
  return lines;
}

// Every vCPU still in the game is halted with no kick pending, and nothing
// changed while we looked (the backend's epoch): no one is left to kick. A
// state the backend cannot see (VcpuPvState::known false) is never a deadlock,
// nor a halt that ends by itself (HALT_FOR).
bool Machine::State::deadlocked() const {
  const std::uint64_t before = backend->epoch();
  bool any_halted = false;
  for (const auto& v : vcpus) {
    if (v->finished()) continue;
    const pvlock::VcpuPvState pv = backend->vcpu_state(v->index());
    if (!pv.known || !pv.halted || pv.kick_pending || pv.timed) return false;
    any_halted = true;
  }
  return any_halted && backend->epoch() == before;
}

// One call of run(): the event loop on the calling thread, what it watches,
// and run()'s steps, in the order run() takes them. The timers are declared
// after the loop, so they are destroyed before it.
class Machine::Run {
 public:
  explicit Run(State& s) : s_(s) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // From here on, the end of the run (RunControl::end) reaches every vCPU
  // wherever it waits: the backend's halts and delays, parks, KVM_RUN.
  void route_stops_to_vcpus();
  // While the returned scope lives, SIGINT/SIGTERM/SIGHUP end the run
  // through the event loop, like the watchdog (StopSignals takes them on its
  // own thread and calls us).
  [[nodiscard]] StopScope take_stop_signals();
  // A signal that came while the VM was being built ends the run at once:
  // the guest never runs, the report still comes.
  void end_if_signalled_while_building();
  // Every service has started before the first vCPU thread (run_service.h).
  void start_services();
  // One thread per vCPU, each on its CPUs, each reporting its end to the
  // loop; the run's wall clock starts here.
  void start_vcpus();
  // The run-state page's memslot and load, once the vCPU threads start.
  void start_runstate();
  // --timeout: the run ends when the watchdog fires.
  void arm_watchdog();
  // A deadlock ends the run; once it has ended, the vCPUs are interrupted
  // again and again until every thread has left.
  void arm_deadlock_ticker();
  // Returns once every vCPU thread has reported its end.
  void until_every_vcpu_ends() { io_.run(); }
  // The threads are joined, the services stopped, the guest's output is
  // written out; an output that could not be written ends the run.
  void join_and_flush();
  // What the run did, read once nothing runs any more.
  RunResult result();

 private:
  void stop_by(int signal);
  void tick(const boost::system::error_code& ec);
  std::vector<int> affinity_of(std::size_t vcpu) const;

  State& s_;
  boost::asio::io_context io_;
  boost::asio::steady_timer watchdog_{io_};
  boost::asio::steady_timer ticker_{io_};
  // What the services were started with. They keep the reference until
  // stop() (the control socket reads the vCPUs through it for the whole
  // run), so it lives as long as the run, not as long as start_services().
  std::optional<RunContext> context_;
  std::size_t finished_ = 0;  // vCPU threads that have ended (counted on the loop's thread)
  std::chrono::steady_clock::time_point start_;
  bool deadlock_seen_ = false;      // at the last tick
  std::uint64_t deadlock_epoch_ = 0;  // the backend's epoch at the last tick
};

void Machine::Run::route_stops_to_vcpus() {
  s_.control.set_stop_hook([&s = s_] {
    s.backend->stop();
    for (auto& v : s.vcpus) {
      v->stop_parking();
      v->interrupt();
    }
  });
}

StopScope Machine::Run::take_stop_signals() {
  return StopScope([this](int signal) { boost::asio::post(io_, [this, signal] { stop_by(signal); }); });
}

void Machine::Run::end_if_signalled_while_building() {
  if (const int signal = stop_signal()) stop_by(signal);
}

void Machine::Run::stop_by(int signal) {
  s_.control.end(Outcome::kInterrupted, fmt::format("stopped by {}", signal_name(signal)), s_.vcpu_state_lines());
}

void Machine::Run::start_services() {
  context_.emplace(RunContext{io_, s_.control, *s_.backend, s_.vcpus, s_.origin});
  for (auto& service : s_.services) service->start(*context_);
}

// --vnuma: the vCPU's node's CPUs (or one of them with --pin spread);
// --pcpus: all of them, or with --pin spread one each in turn; else any.
std::vector<int> Machine::Run::affinity_of(std::size_t vcpu) const {
  const MachineConfig& config = s_.config;
  if (config.vnuma) return vnuma_affinity(*config.vnuma, static_cast<unsigned>(vcpu), config.pin == PinPolicy::kSpread);
  return host::thread_cpus(config.pcpus, vcpu, config.pin == PinPolicy::kSpread);
}

void Machine::Run::start_vcpus() {
  const VcpuThreadMask mask;
  start_ = std::chrono::steady_clock::now();
  s_.startup.run = s_.since_origin();
  for (std::size_t i = 0; i < s_.vcpus.size(); ++i) {
    auto& v = *s_.vcpus[i];
    v.on_finished = [this] {
      boost::asio::post(io_, [this] {
        if (++finished_ == s_.vcpus.size()) io_.stop();
      });
    };
    v.start(affinity_of(i));
  }
}

// Now that nothing more is on the way to the first guest instruction, the
// slot and the load overlap the vCPU threads' start instead of the build
// (runstate_loader.h, map_runstate_slot()). The load is already running when
// a service or --runstate on needed the page.
void Machine::Run::start_runstate() {
  try {
    s_.map_runstate_slot();
  } catch (const Error& e) {
    s_.control.end(Outcome::kHostError, e.what());  // the vCPU threads run: they must be stopped, not left
  }
  if (s_.runstate && !s_.control.decided()) s_.runstate->start();
}

void Machine::Run::arm_watchdog() {
  if (s_.config.timeout_s <= 0) return;
  watchdog_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s_.config.timeout_s)));
  watchdog_.async_wait([&s = s_](const boost::system::error_code& ec) {
    if (!ec)
      s.control.end(Outcome::kTimeout, fmt::format("watchdog: the guest did not finish within {} s", s.config.timeout_s),
                    s.vcpu_state_lines());
  });
}

void Machine::Run::arm_deadlock_ticker() {
  ticker_.expires_after(std::chrono::milliseconds(s_.config.deadlock_check_ms));
  ticker_.async_wait([this](const boost::system::error_code& ec) { tick(ec); });
}

// A deadlock must be seen on two ticks in a row with no halt, wake or kick
// in between (the epoch): a backend whose state is read from KVM (the kvm
// backend's `blocking` statistic) may catch a woken vCPU an instant before
// it leaves its halt, never for a whole tick.
void Machine::Run::tick(const boost::system::error_code& ec) {
  if (ec) return;
  const std::uint64_t epoch_at_tick = s_.backend->epoch();
  if (s_.control.decided()) {
    for (auto& v : s_.vcpus) v->interrupt();
  } else if (s_.linux_guest) {
    // A Linux guest whose every vCPU is halted is idle, not stuck: its
    // timers wake it. Only --timeout ends such a run.
  } else if (const bool now = s_.deadlocked(); std::exchange(deadlock_seen_, now) && now &&
                                               s_.backend->epoch() == deadlock_epoch_) {
    auto lines = s_.vcpu_state_lines();
    s_.control.end(Outcome::kDeadlock,
                   "deadlock: every vCPU is halted with no kick pending, so none can ever be woken (a lost wakeup?)",
                   std::move(lines));
  }
  deadlock_epoch_ = epoch_at_tick;
  arm_deadlock_ticker();
}

void Machine::Run::join_and_flush() {
  for (auto& v : s_.vcpus) v->join();
  for (auto& service : s_.services) service->stop();
  spdlog::debug("run ended: {}", s_.control.decided() ? s_.control.reason() : "every vCPU finished");
  if (s_.linux_console) s_.linux_console->flush();
  s_.serial.flush_all();
  if (auto error = s_.serial.write_error()) s_.control.end(Outcome::kHostError, std::move(*error));
}

RunResult Machine::Run::result() {
  State& s = s_;
  RunResult result;
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  result.seconds_to_first_entry = s.control.seconds_to_first_entry();
  result.seconds_to_first_exit = s.control.seconds_to_first_exit();
  result.backend = std::string(s.backend->name());
  result.unknown_kvm_hypercalls = s.hypercalls->unknown_calls(pvlock::Transport::kKvm);
  result.unknown_sbi_calls = s.hypercalls->unknown_calls(pvlock::Transport::kSbi);
  result.kvm_kind = s.kvm_kind;
  result.tsc_khz = s.tsc_khz;
  result.guest_usage = s.control.usage();
  // A run that ended before its load began (a signal while the VM was being
  // built) does not start one now only to wait for it.
  if (s.runstate) s.runstate->cancel("the run ended before the page's load began");
  s.settle_runstate();
  result.startup = s.startup;
  result.runstate = s.runstate_kind;
  result.runstate_detail = s.runstate_detail;
  for (const auto& v : s.vcpus) {
    result.vcpus.push_back(v->report());
    if (s.report_channel != nullptr) s.report_channel->fill(v->index(), result.vcpus.back());
  }
  read_steal_time(s.vm.memory(), result.vcpus);
  for (auto& service : s.services) service->report(result);
  result.guest_prints = s.control.prints();
  result.linux_guest = s.linux_guest;
  if (s.linux_console) result.kernel_lines = s.linux_console->kept_lines();
  result.guest_status = s.control.guest_status();
  result.serial_lines = s.serial.captured();
  if (s.control.decided()) {
    result.outcome = s.control.outcome();
    result.reason = s.control.reason();
    result.details = s.control.details();
  } else {
    result.outcome = Outcome::kCompleted;
    result.reason = "every vCPU finished its program";
  }
  return result;
}

// Every wait ends when the run stops. The run stops (RunControl::end, whose
// stop hook route_stops_to_vcpus() sets) on the first of: a guest fault or
// failure, --timeout (the watchdog timer), a deadlock, SIGINT/SIGTERM/SIGHUP
// (StopScope), or every vCPU finishing. From then on, each thread leaves
// promptly:
//   - a vCPU in KVM_RUN: immediate_exit plus SIGUSR1 (not blocked in vCPU
//     threads, no SA_RESTART: KVM_RUN returns EINTR), repeated by the
//     deadlock ticker every deadlock_check_ms until every vCPU thread has left;
//   - a vCPU halted on its kick latch (futex sleep or halt polling): the
//     backend's stop() sets kStop and wakes it; kStop is sticky, so no later
//     halt blocks either;
//   - a vCPU delaying a kick (--kick-delay-us): sleeps on the backend's
//     StopFlag, which stop() sets;
//   - this thread's event loop runs only timers and posted handlers, and
//     returns once every vCPU thread has reported its end (on_finished); the
//     joins after it therefore wait for threads that are already leaving.
// Whatever does not end this way (a host call that ignores EINTR) is ended by
// StopSignals' backstop on a signal (kStopGrace), never by waiting for it.
RunResult Machine::run() {
  Run run(*state_);
  run.route_stops_to_vcpus();
  {
    // Ends before the joins: the signal watcher never sees a joined thread.
    const StopScope on_signal = run.take_stop_signals();
    run.end_if_signalled_while_building();
    run.start_services();
    run.start_vcpus();
    run.start_runstate();
    run.arm_watchdog();
    run.arm_deadlock_ticker();
    run.until_every_vcpu_ends();
  }
  run.join_and_flush();
  return run.result();
}

}  // namespace lockvisor::machine
