#include "vmm/control/machine_control_target.h"

#include <fmt/format.h>

#include "vmm/util/guest_text.h"
#include "vmm/machine/vcpu_runner.h"

namespace lockvisor::control {
namespace {

using nlohmann::json;

// What a vCPU is doing now, in the words of the protocol: running, halted,
// paused, or how it left its loop (done, faulted, stopped).
const char* live_state(const machine::VcpuRunner& v, const pvlock::PvBackend& backend) {
  const machine::VcpuState state = v.state();
  if (v.finished()) return machine::vcpu_state_name(state);
  if (v.paused()) return "paused";
  if (state == machine::VcpuState::kHalted || backend.is_halted(v.index())) return "halted";
  return machine::vcpu_state_name(state);  // starting or running
}

json vcpu_stats(const machine::VcpuRunner& v, const pvlock::PvBackend& backend) {
  json exits = json::object();
  const auto counts = v.exit_counts();
  for (std::size_t k = 0; k < counts.size(); ++k) exits[machine::kExitKindNames[k]] = counts[k];
  json pv = json::object();
  const auto values = backend.counters(v.index()).snapshot().values();
  for (std::size_t i = 0; i < values.size(); ++i) pv[pvlock::kPvCounterNames[i]] = values[i];
  const machine::ParkCounts park = v.park_counts();
  const auto cpu = v.cpu_seconds_now();
  return {{"vcpu", v.index()},
          {"state", live_state(v, backend)},
          {"parked", v.parked()},
          {"cpu_s", cpu ? json(*cpu) : json(nullptr)},
          {"exits_total", machine::exit_total(counts)},
          {"exits", exits},
          {"pv", pv},
          {"injected_preemptions",
           {{"requested", park.requested},
            {"count", park.parks},
            {"ns", park.parked_ns},
            {"pauses", park.pauses},
            {"paused_ns", park.paused_ns}}}};
}

}  // namespace

double MachineControlTarget::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - run_.origin).count();
}

json MachineControlTarget::stats() const {
  json vcpus = json::array();
  for (const auto& v : run_.vcpus) vcpus.push_back(vcpu_stats(*v, run_.backend));
  json out = {{"elapsed_s", elapsed_seconds()},
              {"outcome", run_.control.decided() ? machine::outcome_name(run_.control.outcome()) : "running"},
              {"backend", std::string(run_.backend.name())},
              {"kick_mode", pvlock::kick_mode_name(run_.backend.kick_mode())},
              {"vcpus", std::move(vcpus)}};
  if (run_.control.decided()) out["reason"] = lockvisor::valid_utf8(run_.control.reason(), nullptr);
  return out;
}

void MachineControlTarget::refuse_park(unsigned vcpu, const char* what) const {
  const auto& v = *run_.vcpus[vcpu];
  if (v.finished())
    throw RequestError(fmt::format("cannot {} vCPU {}: it has left its loop ({})", what, vcpu,
                                   machine::vcpu_state_name(v.state())));
  throw RequestError(fmt::format("cannot {} vCPU {}: the run is ending", what, vcpu));
}

json MachineControlTarget::pause(unsigned vcpu) {
  auto& v = *run_.vcpus[vcpu];
  const bool was_paused = v.paused();
  if (!v.pause()) refuse_park(vcpu, "pause");
  return {{"vcpu", vcpu}, {"state", "paused"}, {"was_paused", was_paused}};
}

json MachineControlTarget::resume(unsigned vcpu) {
  auto& v = *run_.vcpus[vcpu];
  const bool was_paused = v.paused();
  v.resume();
  return {{"vcpu", vcpu}, {"was_paused", was_paused}};
}

json MachineControlTarget::inject(unsigned vcpu, std::chrono::microseconds length) {
  if (!run_.vcpus[vcpu]->inject_preemption(length)) refuse_park(vcpu, "inject a preemption into");
  return {{"vcpu", vcpu}, {"us", static_cast<std::uint64_t>(length.count())}};
}

json MachineControlTarget::set_kick_mode(pvlock::KickMode mode) {
  const pvlock::KickMode from = run_.backend.kick_mode();
  if (auto why = run_.backend.set_kick_mode(mode)) throw RequestError(*why);
  const double at = elapsed_seconds();
  const bool changed = from != mode;
  if (changed) changes_.push_back({at, pvlock::kick_mode_name(from), pvlock::kick_mode_name(mode)});
  return {{"from", pvlock::kick_mode_name(from)}, {"to", pvlock::kick_mode_name(mode)}, {"changed", changed}, {"at_s", at}};
}

}  // namespace lockvisor::control
