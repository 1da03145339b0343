// A lab scenario: settings every point shares, the axes whose product is the
// matrix, the repeat count, and the claims (from published work or this
// project's goals) that the report checks this run's numbers against. Read from TOML (docs/lab-example.toml
// is the annotated reference; the presets are the same format).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vmm/lab/settings.h"

namespace lockvisor::lab {

// One value of an axis: a label (what tables and ids show) and the settings
// it makes. A plain axis (`lock = [...]`) has one setting per value, named
// like the axis; a composite one (`placement`) sets several at once.
// A value with `sweep = "cpus"` stands for one value per contender count of
// the host (vmm/lab/placement.h, expand_for_host): "{n}" in its label and
// settings becomes the count. A value with `min_cpus = N` exists only on a
// lab planned for at least N CPUs (a setting that needs 8 host CPUs is
// left out of a 2-CPU lab, and the report says so); 0: always.
struct AxisValue {
  std::string label;
  SettingValues settings;
  std::string sweep;  // empty, or "cpus"
  unsigned min_cpus = 0;
};

// An axis value that expand_for_host left out: the lab's host has fewer
// CPUs than the value's min_cpus.
struct LeftOutValue {
  std::string axis;
  std::string label;
  unsigned min_cpus = 0;
  bool operator==(const LeftOutValue&) const = default;
};

// A point the lab cannot run where it is planned: its vCPU count, resolved
// from a host-relative word (`vcpus = "8x"` on 256 CPUs is 2048), is more than
// a VM may have (Scenario::vcpu_limit) or a Linux guest may have. Such points
// are left out and reported, as the axis values a small host has no room for
// are: a preset that grows with the host must still plan on the largest. A count the scenario spells out
// itself is not left out: `run` refuses it, and so the lab, before any run.
struct LeftOutPoint {
  std::string key;
  std::vector<std::pair<std::string, std::string>> labels;
  unsigned vcpus = 0;
  std::string why;  // "a VM has at most 1024 vCPUs"
  bool operator==(const LeftOutPoint&) const = default;
};

struct Axis {
  std::string name;
  std::vector<AxisValue> values;
};

// A claim (published work or this project's own), checked against the summary.
//   `where` names an axis and a label (or a list of labels) per entry.
//   ratio:   metric(a) / metric(b) along `axis`, at the points matching `where`;
//            expect "a>b", "a<b" or "a~b" (no difference beyond the spread),
//            against `factor` x b (default 1): factor 0.9 with "a>b" says
//            "a is at least 0.9 times b", holding where the ratio's whole
//            interval lies above 0.9.
//   outcome: the share of runs matching `where` that ended with `outcome`;
//            expect "some" (at least one) or "none".
//   level:   metric(a) along `axis` against a stated value, per point matching
//            `where`: expect "above" or "below" `value`, or "between" `low`
//            and `high`; it holds where the 95% interval of the median is
//            on that side (inside), is contradicted where it is wholly on the
//            other side (outside).
struct Claim {
  std::string source;  // who says it, where and when: author, subject, list, date
  std::string text;    // what they say
  std::string kind = "ratio";
  std::string metric = "ops_per_sec";
  std::string axis = "lock";
  std::string a, b;
  std::string outcome;
  std::map<std::string, std::vector<std::string>> where;  // axis name -> any of these labels
  std::string expect;
  double low = 0, high = 0;  // level: the bound(s); above uses low, below high
  double factor = 1;         // ratio: compare a with factor x b
};

// A VM of a multi-VM point (`lockvisor run --vm ...`): its label and its own
// settings. A scenario with [[vm]] tables runs every point as these VMs side
// by side; the summary has one row per point and VM (a "vm" column), so
// claims may compare VMs along the axis "vm".
struct VmSpec {
  std::string label;
  SettingValues settings;
};
// [timeline]: after the matrix, one extra run per matrix cell (not per
// repeat) that `where` matches, traced with `lockvisor run --trace
// --trace-window worst-wait`, so that the report shows what every vCPU did
// during that run's longest lock wait (vmm/lab/timelines.h). The traced run
// is not one of the measured runs: the trace costs a store per acquisition.
struct TimelineSpec {
  bool enabled = false;
  std::map<std::string, std::vector<std::string>> where;  // like a claim's; empty: every cell
  std::optional<double> duration_s;  // of the traced run; default the point's, at most kMaxTimelineSeconds
};
inline constexpr double kMaxTimelineSeconds = 0.5;

// [goal] (optional): what "good" means for this scenario, stated as a region
// of the trade-off picture (throughput against worst wait): a worst wait at
// most max_worst_wait_ms, and a throughput at least min_throughput_ratio
// times that of the lock `relative_to` in the same panel (or at least
// min_ops_per_sec). The plot shades it in the panels `where` selects; the
// report names the locks inside it.
struct GoalSpec {
  bool enabled = false;
  std::string text;  // the goal in words, for the picture and the report
  std::optional<double> max_worst_wait_ms;
  std::optional<double> min_throughput_ratio;
  std::string relative_to;  // a label of the lock axis; needed with min_throughput_ratio
  std::optional<double> min_ops_per_sec;
  std::map<std::string, std::vector<std::string>> where;  // like a claim's; empty: every panel
};

// Per-VM settings travel in a point's SettingValues as "vm:LABEL:NAME"
// (settings.h, kVmSettingPrefix); run_arguments turns them into --vm options.
struct Scenario {
  std::string name;
  std::string title;
  std::string description;
  std::string platform_note;  // what the platform (PVM, hardware KVM) contributes, for the report
  unsigned repeats = 5;
  bool native = false;  // native twins of every point
  SettingValues fixed;
  std::vector<Axis> axes;
  std::vector<VmSpec> vms;  // empty: one VM per point
  std::vector<Claim> claims;
  TimelineSpec timeline;
  GoalSpec goal;
  // Settings the scenario cannot give itself and the user must (`needs =
  // ["kernel"]`: a Linux kernel is a file of this machine): `lab --set
  // NAME=VALUE` (or `--kernel FILE`) supplies them.
  std::vector<std::string> needs;
  // The axis the reports and plots compare (`compare = "guest_lock"`); empty:
  // "vm" in a multi-VM scenario, else "lock" (compared_axis).
  std::string compare;
  // The CPUs the placement words resolve against (vmm/lab/placement.h): the
  // lab's lab.json "placement"; empty: host::usable_cpus().
  std::vector<int> host_cpus;
  // The axis values expand_for_host left out for host_cpus (min_cpus).
  std::vector<LeftOutValue> left_out;
  // Native twins (`--native`, add_native_twins) that only a VM can run, by
  // key, with the reason `run` gives for refusing them natively (a
  // modelled remote-node cost, several VMs): left out of the
  // matrix (matrix.h) and named in the report. lab.json "placement" keeps it
  // (vm_only), so a resumed, merged or re-reported lab has the same points.
  std::map<std::string, std::string> vm_only;
  // The most vCPUs a point's VM may have (lab.json "placement"): this host's
  // KVM limit when the lab was planned on it, else lockvisor's own
  // (own_vcpu_limit()); 0: lockvisor's own. A point whose host-relative vCPU
  // count exceeds it is left out (matrix.h).
  unsigned vcpu_limit = 0;
  std::string vcpu_limit_source;
  // What this lab changed against the scenario's own text ("duration_s=0.1,
  // 1 repeat per point"; empty: nothing): the reports print it under the
  // description, whose figures are the scenario's.
  std::string changed;
};

// The axis whose values the report ranks and the plots label, per point of
// the other axes.
std::string compared_axis(const Scenario& s);

// What a point's throughput counts, for tables and plots: "acq/s" (lock
// acquisitions of lockvisor's guest) or, for a scenario that boots Linux
// (it sets or needs `kernel`), "ops/s" (the kernel-lock workload's
// operations).
const char* throughput_unit(const Scenario& s);

// `lab --set NAME=VALUE` (and --kernel): each NAME a lab setting that no axis
// sets, given to every point (a VM's own value still wins for that VM). Then
// every setting the scenario `needs` must have a value. Throws a usage
// lockvisor::Error with one line naming the setting and how to give it.
void apply_overrides(Scenario& s, const SettingValues& overrides, const std::string& origin);

// The axis "vm" the summary adds for a multi-VM scenario (one value per VM,
// its settings), or an empty axis.
Axis vm_axis(const Scenario& s);

inline constexpr unsigned kDefaultRepeats = 5;
inline constexpr unsigned kMaxRepeats = 1000;
// The largest min_cpus an axis value may ask for, and the largest factor of
// a ratio claim: beyond any host or any sensible comparison, i.e. a typo.
inline constexpr std::int64_t kMaxMinCpus = 65536;
inline constexpr double kMaxClaimFactor = 1000;

// A scenario file's text. It must be a regular file of at most
// kMaxScenarioBytes: a device (/dev/zero), a FIFO or a huge file would make
// the lab read forever or exhaust memory before anything runs; an empty file
// is no scenario either. Throws a usage lockvisor::Error with one line otherwise.
inline constexpr std::size_t kMaxScenarioBytes = std::size_t{1} << 20;
std::string read_scenario_file(const std::string& path);

// Parses a scenario; `origin` names it in messages (a file name, "preset quick").
// Throws a usage lockvisor::Error with one line: the place and what is wrong.
Scenario parse_scenario(const std::string& text, const std::string& origin);

// Adds the "mode" axis (guest, native) that makes native twins, innermost.
void add_native_twins(Scenario& s);

// The scenario's description for the reports, followed by what this lab
// changed (Scenario::changed), so that its figures are not read as this lab's.
std::string described(const Scenario& s);

}  // namespace lockvisor::lab
