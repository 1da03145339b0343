// lockvisor ctl SOCK COMMAND [ARGS] [--json]: drive a VM started with
// `lockvisor run --api SOCK` (vmm/control/, docs/control-socket.md).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "vmm/cli/commands.h"
#include "vmm/cli/option_checks.h"
#include "vmm/control/control_client.h"
#include "vmm/control/control_protocol.h"

namespace lockvisor::cli {
namespace {

struct CtlOptions {
  std::string socket;
  std::string command;
  std::vector<std::string> args;
  bool json = false;
  double timeout_s = 5;
};

int ctl(const CtlOptions& o) {
  using control::CtlError;
  using control::CtlExit;
  try {
    const std::string request = control::build_request(o.command, o.args);
    const auto timeout = std::chrono::milliseconds(std::llround(o.timeout_s * 1000));
    const std::string line = control::round_trip(o.socket, request, timeout);
    const auto reply = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok"))
      throw CtlError(CtlExit::kNoReply, fmt::format("{}: the reply is not a JSON object with \"ok\"", o.socket));
    const bool ok = reply.value("ok", false);
    if (o.json || o.command == "raw") {
      fmt::print("{}\n", line);
    } else if (ok) {
      fmt::print("{}", control::format_reply(o.command, reply));
    }
    if (!ok) {
      if (!o.json && o.command != "raw")
        fmt::print(stderr, "lockvisor ctl: error: {}\n", reply.value("error", std::string("(no error text)")));
      return static_cast<int>(CtlExit::kErrorReply);
    }
    return 0;
  } catch (const CtlError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "lockvisor ctl: {}{}\n", e.code() == CtlExit::kUsage ? "usage error: " : "", e.what());
    return static_cast<int>(e.code());
  }
}

}  // namespace

Action add_ctl_command(CLI::App& app) {
  auto options = std::make_shared<CtlOptions>();
  auto* command = app.add_subcommand(
      "ctl",
      "Drive a VM started with 'run --api SOCK': stats, pause VCPU, resume VCPU, inject VCPU LENGTH, "
      "kick-mode sticky|lossy, help, raw JSON (exit codes: 0 ok, 2 usage, 3 cannot connect, 4 error reply, "
      "5 no reply)");
  command->add_option("socket", options->socket, "The control socket (run --api SOCK)")->required();
  command->add_option("command", options->command, "stats, pause, resume, inject, kick-mode, help or raw")->required();
  command->add_option("args", options->args, "The command's arguments (a vCPU index, a length such as 20ms, a mode)");
  command->add_flag("--json", options->json, "Print the reply as one JSON line instead of text");
  command->add_option("--timeout", options->timeout_s, "Seconds to wait for the connection and for the reply (0.01..600)")
      ->check(seconds_in(0.01, 600))
      ->default_str("5");
  return [options] { return ctl(*options); };
}

}  // namespace lockvisor::cli
