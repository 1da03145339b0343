#include "vmm/control/control_service.h"

namespace lockvisor::control {

void ControlService::start(machine::RunContext& context) {
  target_.emplace(context);
  dispatcher_.emplace(*target_);
  server_.emplace(context.io, socket_.take_listener(), *dispatcher_);
}

void ControlService::stop() {
  server_.reset();  // closes the listener and every connection: clients see EOF
  socket_.remove();
}

void ControlService::report(machine::RunResult& result) {
  if (target_) result.kick_mode_changes = target_->kick_mode_changes();
}

}  // namespace lockvisor::control
