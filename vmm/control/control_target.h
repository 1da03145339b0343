// What the control socket drives: a running VM, seen through the few
// operations its protocol offers (docs/control-socket.md). The protocol
// dispatcher talks only to this interface, so its every error path is
// testable without KVM (tests/control/), and the Machine-backed
// implementation (machine_control_target.h) stays a thin adapter.
//
// Every call comes from the monitor thread's event loop and must not block.
#pragma once
#include <chrono>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "vmm/pvlock/pv_types.h"

namespace lockvisor::control {

// A request the VM cannot carry out (the vCPU has finished, the run is
// ending, the backend cannot switch): its message becomes the reply's
// one-line "error".
class RequestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ControlTarget {
 public:
  virtual ~ControlTarget() = default;
  virtual unsigned vcpu_count() const = 0;
  // The body of a `stats` reply (the protocol adds "ok" and "id").
  virtual nlohmann::json stats() const = 0;
  // Each returns the reply's fields beyond "ok"/"id", or throws RequestError.
  // `vcpu` is already checked against vcpu_count().
  virtual nlohmann::json pause(unsigned vcpu) = 0;
  virtual nlohmann::json resume(unsigned vcpu) = 0;
  virtual nlohmann::json inject(unsigned vcpu, std::chrono::microseconds length) = 0;
  virtual nlohmann::json set_kick_mode(pvlock::KickMode mode) = 0;
};

}  // namespace lockvisor::control
