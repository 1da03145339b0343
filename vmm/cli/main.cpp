// lockvisor: a minimal KVM VMM with a paravirtual lock backend.
// Front end only: parse, pick the subcommand, turn errors into one line and
// an exit code (README.md, "Exit codes").
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <pthread.h>
#include <signal.h>

#include <map>
#include <optional>

#include "vmm/cli/commands.h"
#include "vmm/cli/option_checks.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/run_result.h"
#include "vmm/native/native_runner.h"
#include "vmm/util/build_version.h"
#include "vmm/util/error.h"

namespace {

// Whose fault an error is decides the exit code (README.md, "Exit codes").
lockvisor::machine::Outcome outcome_of(lockvisor::ErrorKind kind) {
  using lockvisor::machine::Outcome;
  switch (kind) {
    case lockvisor::ErrorKind::kUsage: return Outcome::kUsageError;
    case lockvisor::ErrorKind::kHost: return Outcome::kHostError;
    case lockvisor::ErrorKind::kGuest: return Outcome::kGuestFault;
  }
  return Outcome::kHostError;
}

int run_command_line(int argc, char** argv);

// Earlier still than main(): blocks SIGINT/SIGTERM/SIGHUP as soon as the
// dynamic loader has mapped and relocated the program, before any library's
// constructor runs, so that a signal that arrives while they run stays
// pending until StopSignals takes it. (Before this point no program can catch
// a signal; the window is the dynamic loader's, well under a millisecond.)
void block_stop_signals_early(int, char**, char**) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}
[[gnu::used, gnu::section(".preinit_array")]] void (*const block_stop_signals_early_entry)(int, char**, char**) =
    block_stop_signals_early;

}  // namespace

int main(int argc, char** argv) {
  using namespace lockvisor;
  // First, before anything slow and before any thread exists: from here on a
  // SIGINT/SIGTERM/SIGHUP can only end the process with exit code 130 and a
  // report or one line, never by the signal (vmm/machine/machine.h).
  std::optional<machine::StopSignals> stop_signals;
  try {
    stop_signals.emplace([] { return native::runs_in_progress().load() > 0; });
  } catch (const Error& e) {
    fmt::print(stderr, "lockvisor: error: {}\n", e.what());
    return machine::exit_code(machine::Outcome::kHostError);
  }
  int code = run_command_line(argc, argv);
  // A signal the command did not meet (it came after the last VM, during a
  // command that runs none, or was swallowed on the way) still decides the
  // exit code: one line says so.
  if (const int signal = machine::stop_signal();
      signal != 0 && code != machine::exit_code(machine::Outcome::kInterrupted)) {
    std::fflush(stdout);
    fmt::print(stderr, "lockvisor: stopped by {} (exit code {})\n", machine::signal_name(signal),
               machine::exit_code(machine::Outcome::kInterrupted));
    code = machine::exit_code(machine::Outcome::kInterrupted);
  }
  return code;
}

namespace {

int run_command_line(int argc, char** argv) {
  using namespace lockvisor;
  CLI::App app{"lockvisor: a minimal KVM VMM with a paravirtual lock backend", "lockvisor"};
  app.set_version_flag("--version", util::build_version());
  app.require_subcommand(1);
  bool verbose = false;
  std::string log_level = "warn";
  app.add_flag("-v,--verbose", verbose, "Log at debug level");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));

  std::map<CLI::App*, cli::Action> actions;
  auto add = [&](cli::Action (*factory)(CLI::App&)) {
    const auto before = app.get_subcommands({}).size();
    cli::Action action = factory(app);
    actions[app.get_subcommands({})[before]] = std::move(action);
  };
  add(cli::add_run_command);
  add(cli::add_conformance_command);
  add(cli::add_doctor_command);
  add(cli::add_bench_command);
  add(cli::add_locks_command);
  add(cli::add_trace_check_command);
  add(cli::add_lab_command);
  add(cli::add_ctl_command);
  add(cli::add_linux_command);

  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const auto* command : app.get_subcommands({})) {
      known = known || command->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + command->get_name();
    }
    if (!known) {
      fmt::print(stderr, "lockvisor: error: unknown command '{}' (commands: {})\n", argv[1], names);
      return machine::exit_code(machine::Outcome::kUsageError);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "lockvisor: error: {} (see lockvisor --help)\n", e.what());
    return machine::exit_code(machine::Outcome::kUsageError);
  }
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::from_str(log_level));
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");

  try {
    machine::throw_if_stop_signalled();
    cli::refuse_empty_values(app);
    for (auto& [command, action] : actions)
      if (command->parsed()) return action();
  } catch (const machine::Interrupted& e) {
    std::fflush(stdout);
    fmt::print(stderr, "lockvisor: {}\n", e.what());
    return machine::exit_code(machine::Outcome::kInterrupted);
  } catch (const Error& e) {
    fmt::print(stderr, "lockvisor: error: {}\n", e.what());
    return machine::exit_code(outcome_of(e.kind()));
  } catch (const std::exception& e) {
    fmt::print(stderr, "lockvisor: internal error: {}\n", e.what());
    return machine::exit_code(machine::Outcome::kHostError);
  }
  return machine::exit_code(machine::Outcome::kUsageError);
}

}  // namespace
