// The control socket's view of a running Machine (control_target.h): reads
// live counters (VcpuRunner::exit_counts, the backend's relaxed-atomic PV
// counters, VcpuPark counts) and forwards pause/resume/inject to the
// VcpuRunners and kick-mode to the PV backend. Records every --kick switch
// for the report's settings.
#pragma once
#include <vector>

#include "vmm/control/control_target.h"
#include "vmm/machine/run_result.h"
#include "vmm/machine/run_service.h"

namespace lockvisor::control {

class MachineControlTarget final : public ControlTarget {
 public:
  explicit MachineControlTarget(machine::RunContext& run) : run_(run) {}

  unsigned vcpu_count() const override { return static_cast<unsigned>(run_.vcpus.size()); }
  nlohmann::json stats() const override;
  nlohmann::json pause(unsigned vcpu) override;
  nlohmann::json resume(unsigned vcpu) override;
  nlohmann::json inject(unsigned vcpu, std::chrono::microseconds length) override;
  nlohmann::json set_kick_mode(pvlock::KickMode mode) override;

  const std::vector<machine::KickModeChange>& kick_mode_changes() const { return changes_; }

 private:
  double elapsed_seconds() const;
  // Throws RequestError when vCPU `vcpu` can no longer be parked.
  [[noreturn]] void refuse_park(unsigned vcpu, const char* what) const;

  machine::RunContext& run_;
  std::vector<machine::KickModeChange> changes_;
};

}  // namespace lockvisor::control
