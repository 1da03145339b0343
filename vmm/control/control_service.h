// `lockvisor run --api SOCK`: the control socket as a RunService
// (machine/run_service.h). The socket is created, 0600, when the service is
// built, before the VM boots (so a bad path fails like any bad option,
// exit 2, and a client may connect as soon as run prints its first line);
// requests are served on the monitor loop from the service's start() until
// its stop(), which closes every connection and removes the socket file. The
// kick-mode switches made meanwhile go into the report's settings.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "vmm/control/control_server.h"
#include "vmm/control/control_socket.h"
#include "vmm/control/machine_control_target.h"
#include "vmm/machine/run_service.h"

namespace lockvisor::control {

class ControlService final : public machine::RunService {
 public:
  explicit ControlService(std::string path) : socket_(std::move(path)) {}

  void start(machine::RunContext& context) override;
  void stop() override;
  void report(machine::RunResult& result) override;

 private:
  ControlSocket socket_;
  std::optional<MachineControlTarget> target_;
  std::optional<ControlDispatcher> dispatcher_;
  std::optional<ControlServer> server_;
};

}  // namespace lockvisor::control
