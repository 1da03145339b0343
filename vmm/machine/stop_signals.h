// SIGINT, SIGTERM and SIGHUP for the whole process: exit code 130 with a
// report (README.md, "Exit codes"). Machine::run() takes them through a
// StopScope; commands meet them between VMs through throw_if_stop_signalled().
#pragma once
#include <signal.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

#include "vmm/util/unique_fd.h"

namespace lockvisor::machine {

// ---- SIGINT, SIGTERM, SIGHUP: exit code 130 (README.md, "Exit codes") ----
//
// main() creates one StopSignals as its first statement, before any thread
// exists. It blocks the three signals in the calling thread, so every thread
// created later (vCPUs, native runner threads) inherits the block, while
// SIGUSR1, the vCPU kick-out, stays unblocked; a watcher thread takes them
// with signalfd. SIGHUP is treated as SIGTERM. The first one is recorded
// (stop_signal()) and handed to the current StopScope, if any: a running
// Machine ends its run as "interrupted" and the report is printed. With no
// scope (between VMs, before the first), the command meets the signal at its
// next check: Machine's constructor throws Interrupted, and main() turns a
// signal that arrived after the last check into exit code 130 too.
//
// Backstops, so that no wait anywhere can outlast a signal: a second signal,
// a signal while a native run's host threads are running (they cannot be
// stopped mid-workload), or the process still alive kStopGrace after the
// first signal end the process at once: one line on stderr, exit code 130.
//
// A process whose stop waits for lockvisor children (the multi-VM parent,
// the lab's points) must outlive theirs: each child ends itself, with or
// without its report, kStopGrace after the SIGTERM it is passed; the parent
// kills what is left at kChildStopGrace (time for an exit that is slow, as
// under a sanitizer in an emulated machine, where ending a run with its
// report takes one to two seconds), and its own backstop moves to
// kParentStopGrace once it calls wait_for_children_on_stop().
class StopSignals {
 public:
  static constexpr std::chrono::seconds kStopGrace{3};
  static constexpr std::chrono::seconds kChildStopGrace{kStopGrace + std::chrono::seconds(2)};
  static constexpr std::chrono::seconds kParentStopGrace{kChildStopGrace + std::chrono::seconds(2)};
  // `unstoppable`, when given, tells whether work that no signal can cut
  // short is in progress (a native run's host threads): then a signal ends
  // the process at once. It is called on the watcher thread.
  explicit StopSignals(std::function<bool()> unstoppable = {});
  ~StopSignals();  // stops the watcher; the signals stay blocked
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void watch();
  UniqueFd signals_;
  UniqueFd quit_;
  std::function<bool()> unstoppable_;
  std::thread watcher_;
};

// {SIGINT, SIGTERM, SIGHUP}: what StopSignals blocks and takes.
sigset_t stop_signal_set();

// The first SIGINT/SIGTERM/SIGHUP taken by StopSignals, or 0.
int stop_signal();
// From now on the backstop is StopSignals::kParentStopGrace: this process
// waits, when stopped, up to kChildStopGrace for children that stop
// themselves. Called before the first child starts; never undone.
void wait_for_children_on_stop();
// "SIGINT", "SIGTERM", "SIGHUP" (or "signal N").
std::string signal_name(int signal);

// Thrown where a stop signal is met outside a run (Machine's constructor).
// Deliberately not a lockvisor::Error: nothing on the way may turn it into a
// failed case or another exit code; main() prints one line and exits 130.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const noexcept { return signal_; }

 private:
  int signal_;
};
// Throws Interrupted if a stop signal has arrived.
void throw_if_stop_signalled();

// While a StopScope lives, StopSignals calls `on_stop(signal)` for the first
// stop signal, on the watcher thread, under a lock that the destructor also
// takes: once the destructor has returned, on_stop is never called again.
// If the signal came before the scope, on_stop is called by the constructor.
// One scope at a time: a new one replaces the current one until it ends
// (scopes nest, last in first out).
// on_stop must be short and must not throw (post to an event loop, set a flag).
class StopScope {
 public:
  explicit StopScope(std::function<void(int)> on_stop);
  ~StopScope();
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;

 private:
  std::function<void(int)> on_stop_;
  const std::function<void(int)>* previous_ = nullptr;
};

}  // namespace lockvisor::machine
