// report.md: what a person choosing a lock strategy reads. Per claim of the
// scenario (its public source and the claim in plain words), what this run
// measured and a verdict; the scenario's goal and the locks that meet it; the
// best lock per placement; the platform's part as measured at the lab's start
// (exit costs, pause-loop exiting, halt polling); the machine (CPU vendor/family/model/stepping,
// host kernel, KVM kind), backend settings, lockvisor version and the exact
// command, so the numbers can be reproduced or discounted.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "vmm/lab/scenario.h"
#include "vmm/lab/lab_summary.h"

namespace lockvisor::lab {

// The machine, as the report shows it: vendor, family/model/stepping
// (model names are masked on these hosts), kernel, KVM kind, CPUs, and
// whether it is the emulated machine of tools/nested-kvm (host/emulation.h:
// emulated, outer).
nlohmann::json machine_description();
// `markdown` (a document under a "# title" line) with the emulation warning
// of `machine` (a manifest's) as a paragraph after its title, when the
// lab ran emulated; unchanged otherwise.
std::string with_emulation_note(std::string markdown, const nlohmann::json& machine);
// machine.host_slice.ns of a lab's manifest (host_slice.h), if known.
std::optional<double> host_slice_ns(const nlohmann::json& manifest);

// `timelines`: the timelines section (timelines.h), placed after the plots.
std::string report_markdown(const Scenario& s, const Summary& summary, const nlohmann::json& manifest,
                            const std::string& plots_note, const std::string& timelines = {});

}  // namespace lockvisor::lab
