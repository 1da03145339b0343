// Host CPUs and vCPU counts in words relative to the host, so that one
// scenario, preset or command line means the same ratios on 2 CPUs and on
// 256: the one parser of those words (scenario files, presets, `--pcpus` of
// every command, `lab --set`).
//
//   host CPUs:  all       every usable CPU
//               4cpus     a count: the first 4 usable CPUs (1cpu for one)
//               1/2, 50%  a fraction of the usable CPUs, rounded down, at least 1
//               max(2cpus,1/8)
//                         the larger of two such words: a share that grows
//                         with the host but never falls below a count (a
//                         preset's point that must keep its 2-CPU shape on
//                         2 CPUs and be an eighth of a big host); the count
//                         is a floor, so a smaller host gives all its CPUs
//               0-3,8     an explicit CPU list, as before
//   vCPUs:      4         a count
//               2x        a ratio of the resolved host CPUs (2x on 8 CPUs: 16)
//
// A bare number is a CPU list (`--pcpus 1` is CPU 1, as it always was), so a
// command line written before these words keeps naming the same CPUs; counts
// carry the `cpus` suffix.
//
// "Usable" is the affinity mask this process was started with (`taskset` can
// only shrink it), unless LOCKVISOR_HOST_CPUS declares another list: a plan
// for a host that is not this one (a dry-run, a test of a 16-CPU expansion on
// a 2-CPU machine). A run still refuses CPUs outside its affinity mask.
#pragma once
#include <string>
#include <vector>

namespace lockvisor::host {

inline constexpr const char* kHostCpusVariable = "LOCKVISOR_HOST_CPUS";

// The accepted forms, for messages.
inline constexpr const char* kHostCpuForms =
    "all, a count (4cpus), a fraction of the usable CPUs (1/2, 50%), the larger of two of these "
    "(max(2cpus,1/8)) or a CPU list (0-3,8)";
inline constexpr const char* kVcpuForms = "a count (4) or a ratio of the host CPUs (2x)";

// The CPUs words resolve against: LOCKVISOR_HOST_CPUS when set, else the
// affinity mask. Throws a usage lockvisor::Error for a bad variable.
std::vector<int> usable_cpus();

// True when `word` is an explicit CPU list (it names its CPUs itself).
bool is_cpu_list(const std::string& word);

// The CPUs `word` stands for on a host whose usable CPUs are `usable`
// (ascending). Throws a usage lockvisor::Error with one line naming `word`,
// what is wrong and the accepted forms.
std::vector<int> resolve_host_cpus(const std::string& word, const std::vector<int>& usable);

// `--pcpus WORD` of any command: resolve_host_cpus against usable_cpus(),
// its error prefixed with the option.
std::vector<int> resolve_pcpus_option(const std::string& word);

// True when `word` has a ratio's form (a whole number and `x`), whatever
// its number: resolve_vcpus() judges the number.
bool is_vcpu_ratio(const std::string& word);

// The vCPU count `word` stands for beside `host_cpus` resolved host CPUs.
// Throws a usage lockvisor::Error with one line.
unsigned resolve_vcpus(const std::string& word, std::size_t host_cpus);

}  // namespace lockvisor::host
