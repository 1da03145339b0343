// A scenario's placements relative to the host (vmm/host/host_cpus.h): the
// words of pcpus, vcpus and vnuma resolved to the concrete CPU lists, counts
// and node maps a point's `lockvisor run` command line carries, and the
// contender sweeps whose values depend on how many CPUs the host has.
//
// A lab resolves them once, for the CPUs it is planned for (lab.json
// "placement": the affinity mask when it started, or `--host-cpus`), so a
// resumed, sharded or merged lab has the same points whatever machine
// continues it, and the report can name each term and what it became.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/lab/scenario.h"
#include "vmm/lab/settings.h"

namespace lockvisor::lab {

// The most vCPUs `run --vcpus` takes (its settings row), and how lab.json
// names it as the source of the VM's vCPU limit when no KVM lowered it.
unsigned own_vcpu_limit();
inline constexpr const char* kOwnVcpuLimit = "lockvisor's own limit";

// One word of a point's settings and what it resolved to: pcpus "all" -> "0-15".
struct PlacementTerm {
  std::string setting;  // pcpus, vcpus, vnuma (or vm:LABEL:pcpus ...)
  std::string word;
  std::string resolved;
  bool operator==(const PlacementTerm&) const = default;
};

// Virtual nodes in words (beside N and the explicit VCPUS@HOSTCPUS form,
// which pass unchanged):
//   shared:N  N nodes of vCPUs (split evenly, in order) that all run on the
//             point's host CPUs: a labelling of vCPUs (docs/vnuma.md)
//   host      the host's own NUMA nodes: each real node's share of the
//             point's host CPUs is a virtual node, vCPUs split in proportion
// Both become the explicit form (which names its CPUs, so pcpus is dropped).
inline constexpr const char* kVnumaWords = "N, shared:N, host or VCPUS@HOSTCPUS,...";

// Whether setting `name` (pcpus, vcpus, vnuma) takes host-relative words:
// `vcpus = "2x"` is a string where the setting's type is a count.
bool takes_placement_words(const std::string& name);

// Checks what can be checked of a placement setting's value on any host: a
// CPU list that reads backwards (pcpus = "3-1"), a word of no known form
// (vcpus = "true"). Throws a usage lockvisor::Error with one line naming the
// value and the accepted forms. Sizes that depend on the host (pcpus =
// "64cpus" on 8 CPUs) are judged when the point is resolved, a sweep's "{n}"
// when the sweep is expanded; other settings pass.
void check_placement_word(const std::string& name, const std::string& value);

// The contender counts of a sweep on `cpus` usable CPUs: the powers of two
// below `cpus` (1, 2, 4, ...). The count of all CPUs is not among them: the
// scenario names that point itself, with a label that is the same on every
// host, so that its claims can select it.
std::vector<unsigned> sweep_counts(std::size_t cpus);

// The axes as they are on s.host_cpus: every axis value with `sweep = "cpus"`
// replaced by one value per count of sweep_counts(s.host_cpus.size()), "{n}"
// in its label and settings replaced by the count (none on a 1-CPU host), and
// every value whose min_cpus exceeds the host's CPUs left out (recorded in
// s.left_out, for the report). Idempotent. Throws a usage lockvisor::Error
// when an axis is left with no value.
void expand_for_host(Scenario& s);

// Resolves the words of one point's settings (and each VM's) against
// `usable`; returns the terms that were words. Throws a usage
// lockvisor::Error with one line naming the setting.
std::vector<PlacementTerm> resolve_placement(SettingValues& settings, const std::vector<int>& usable);

// lab.json "placement": the CPUs the lab is planned for, where that set came
// from, every distinct term of its points with what it resolved to, the axis
// values left out because they need more CPUs, the points left out because
// their vCPUs are beyond a limit, and the VM's vCPU limit they were held to
// (Scenario::vcpu_limit; 0: lockvisor's own).
nlohmann::json placement_description(const std::vector<int>& host_cpus, const std::string& source,
                                     const std::vector<std::vector<PlacementTerm>>& terms,
                                     const std::vector<LeftOutValue>& left_out,
                                     const std::vector<LeftOutPoint>& left_out_points = {}, unsigned vcpu_limit = 0,
                                     const std::string& vcpu_limit_source = {});

// The VM's vCPU limit lab.json's "placement" records, and where it came from
// (a lab planned before it was recorded: lockvisor's own).
std::pair<unsigned, std::string> placement_vcpu_limit(const nlohmann::json& placement);

// What lab.json's "placement" says was left out: a sentence on the axis
// values (min_cpus), one on the points beyond a limit and one on the native
// twins only a VM runs ("vm_only", set by the lab: Scenario::vm_only), each
// "" when there are none, joined by a space.
std::string left_out_line(const nlohmann::json& placement);

// The report's section on the expansion, from lab.json's "placement".
std::string placement_markdown(const nlohmann::json& placement);

}  // namespace lockvisor::lab
