// "The platform's part" of a lab report: what this host's KVM costs a lock,
// measured when the lab starts rather than assumed. A short bench
// (vmm/bench/exit_costs.h: bare PIO exit, doorbell hypercall, kick->wake with
// both vCPUs on one host CPU and apart), whether the host has pause-loop
// exiting, and kvm's halt_poll_ns. Kept in lab.json (machine.platform), so a
// report rewritten later, or elsewhere, states the numbers of the machine
// that ran the points.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace lockvisor::lab {

// {"exits": {"bare_pio_exit_us": {"median", "p99"}, "doorbell_us": {...},
//            "kick_wake_same_cpu_us": {...}, "kick_wake_apart_us": {...}} or
//  {"not_measured": why}, "pause_loop_exiting": {"module", "values"},
//  "halt_poll_ns": number|null}. Boots four small guests (well under a
// second on PVM); never throws for a host without KVM: it says why not.
nlohmann::json measure_platform_part();

// The report's section body: the measured numbers in plain words.
std::string platform_part_markdown(const nlohmann::json& platform);

}  // namespace lockvisor::lab
