#include "vmm/machine/stop_signals.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "vmm/machine/run_result.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {

// ---------------------------------------------------------------- stop signals

namespace {

struct StopRegistry {
  std::mutex mutex;
  std::atomic<int> signal{0};
  std::atomic<bool> has_children{false};  // the backstop is kParentStopGrace
  const std::function<void(int)>* on_stop = nullptr;  // the innermost StopScope's
};

StopRegistry& stop_registry() {
  static StopRegistry registry;
  return registry;
}


// Ends the process now, from the watcher thread: whatever the other threads
// are doing (a native workload, a wait that did not end). Flushes stdout only
// if no other thread holds it and it can take a buffer's worth at once (a
// pipe nobody reads must not block this either).
[[noreturn]] void hard_stop(int signal, const char* why) {
  if (::ftrylockfile(stdout) == 0) {
    pollfd out{STDOUT_FILENO, POLLOUT, 0};
    if (::poll(&out, 1, 0) == 1 && (out.revents & POLLOUT) != 0) std::fflush(stdout);
    ::funlockfile(stdout);
  }
  const std::string line = fmt::format("lockvisor: stopped by {}: {}\n", signal_name(signal), why);
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line.data(), line.size());
  std::_Exit(exit_code(Outcome::kInterrupted));
}

}  // namespace

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return fmt::format("signal {}", signal);
  }
}

int stop_signal() { return stop_registry().signal.load(); }

void wait_for_children_on_stop() { stop_registry().has_children.store(true); }

Interrupted::Interrupted(int signal)
    : std::runtime_error(fmt::format("stopped by {} (no VM was running)", signal_name(signal))), signal_(signal) {}

void throw_if_stop_signalled() {
  if (const int signal = stop_signal()) throw Interrupted(signal);
}

StopScope::StopScope(std::function<void(int)> on_stop) : on_stop_(std::move(on_stop)) {
  auto& registry = stop_registry();
  std::lock_guard lock(registry.mutex);
  previous_ = std::exchange(registry.on_stop, &on_stop_);
  if (const int signal = registry.signal.load()) on_stop_(signal);
}

StopScope::~StopScope() {
  auto& registry = stop_registry();
  std::lock_guard lock(registry.mutex);
  registry.on_stop = previous_;
}

StopSignals::StopSignals(std::function<bool()> unstoppable) : unstoppable_(std::move(unstoppable)) {
  // Before anything else: no thread exists yet, so every later thread inherits
  // the block; SIGUSR1 (the vCPU kick-out) is never blocked, and gets its
  // no-op handler now so that a stray one cannot kill the process either.
  install_vcpu_interrupt_signal();
  const sigset_t set = stop_signal_set();
  if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0)
    fail_host("blocking SIGINT/SIGTERM/SIGHUP: {}", std::strerror(rc));
  signals_.reset(::signalfd(-1, &set, SFD_CLOEXEC));
  if (!signals_.valid()) fail_host("signalfd: {}", std::strerror(errno));
  quit_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!quit_.valid()) fail_host("eventfd: {}", std::strerror(errno));
  watcher_ = std::thread([this] { watch(); });
}

StopSignals::~StopSignals() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(quit_.get(), &one, sizeof one);
  if (watcher_.joinable()) watcher_.join();
}

void StopSignals::watch() {
  auto& registry = stop_registry();
  std::optional<std::chrono::steady_clock::time_point> grace_end;  // set by the first signal
  std::chrono::seconds grace = kStopGrace;
  for (;;) {
    pollfd fds[2] = {{signals_.get(), POLLIN, 0}, {quit_.get(), POLLIN, 0}};
    // After the first signal, look every 20 ms for a reason to stop harder.
    if (::poll(fds, 2, grace_end ? 20 : -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    signalfd_siginfo info{};
    if ((fds[0].revents & POLLIN) != 0 && ::read(signals_.get(), &info, sizeof info) == sizeof info) {
      const int signal = static_cast<int>(info.ssi_signo);
      if (grace_end) hard_stop(signal, "second signal; no report");
      grace = registry.has_children.load() ? kParentStopGrace : kStopGrace;
      grace_end = std::chrono::steady_clock::now() + grace;
      std::lock_guard lock(registry.mutex);
      registry.signal.store(signal);
      if (registry.on_stop != nullptr) (*registry.on_stop)(signal);
    }
    if (grace_end) {
      if (unstoppable_ && unstoppable_())
        hard_stop(stop_signal(), "a native run's host threads cannot be stopped mid-workload; no report");
      if (std::chrono::steady_clock::now() >= *grace_end)
        hard_stop(stop_signal(), fmt::format("still running {} s later; no report", grace.count()).c_str());
    }
  }
}

}  // namespace lockvisor::machine
