// The lab's pieces without running anything: matrix expansion and ids,
// scenario parsing errors, bootstrap intervals on known data, the JSONL
// log's torn-line recovery, shards, metric reading.
// One file (over 500 lines): every piece works on a scenario, and the tests
// build theirs from the same TOML text through parse_scenario, so a change
// to the scenario format is checked from parsing through expansion to the
// report in one place.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include "vmm/experiment/run_settings.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/lab/bootstrap.h"
#include "vmm/lab/matrix.h"
#include "vmm/lab/metrics.h"
#include "vmm/lab/placement.h"
#include "vmm/lab/presets.h"
#include "vmm/lab/lab_report.h"
#include "vmm/lab/results_log.h"
#include "vmm/lab/scenario.h"
#include "vmm/lab/settings.h"
#include "vmm/lab/lab_summary.h"
#include "vmm/lab/timelines.h"
#include "vmm/machine/run_result.h"
#include "vmm/util/error.h"
#include "tests/lab/error_of.h"

namespace lockvisor::lab {
namespace {

constexpr const char* kTwoAxes = R"(
name = "t"
repeats = 2
[fixed]
workload = "lockbench"
duration_s = 0.05
[[axis]]
name = "placement"
values = [{ label = "1:1", vcpus = 2, pcpus = "0-1" }, { label = "4:1", vcpus = 4, pcpus = "0" }]
[[axis]]
name = "lock"
values = ["ticket", "tas", "unfair"]
)";

TEST(LabMatrix, ExpandsTheProductTimesRepeatsWithStableIds) {
  const auto s = parse_scenario(kTwoAxes, "test");
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 2u * 3u * 2u);
  // Repeats outermost, last axis fastest.
  EXPECT_EQ(points[0].id, "placement=1:1,lock=ticket#r0");
  EXPECT_EQ(points[1].id, "placement=1:1,lock=tas#r0");
  EXPECT_EQ(points[3].id, "placement=4:1,lock=ticket#r0");
  EXPECT_EQ(points[6].id, "placement=1:1,lock=ticket#r1");
  std::set<std::string> ids;
  for (std::size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i].index, i);
    ids.insert(points[i].id);
  }
  EXPECT_EQ(ids.size(), points.size());
  // The same text gives the same ids; the settings are fixed + the axis values.
  const auto again = expand(parse_scenario(kTwoAxes, "again"));
  for (std::size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].id, again[i].id);
  EXPECT_EQ(run_arguments(points[3].settings),
            (std::vector<std::string>{"--workload", "lockbench", "--lock", "ticket", "--vcpus", "4", "--pcpus", "0",
                                      "--duration", "0.05"}));
}

// The command line of the last point of a scenario with `points` points.
std::vector<std::string> last_point_arguments(const char* toml, std::size_t points) {
  const auto all = expand(parse_scenario(toml, "test"));
  EXPECT_EQ(all.size(), points);
  return all.empty() ? std::vector<std::string>{} : run_arguments(all.back().settings);
}

// The virtual NUMA topology and its modelled remote cost are lab settings
// (their rows in the run-settings table), given to every point's command line.
TEST(LabMatrix, VnumaSettingsReachThePointCommandLine) {
  EXPECT_EQ(last_point_arguments(R"(
name = "numa"
repeats = 1
[fixed]
workload = "lockbench"
vcpus = 8
vnuma = "2"
[[axis]]
name = "vnuma_remote_ns"
values = [0, 2000]
)",
                                 2),
            (std::vector<std::string>{"--workload", "lockbench", "--vcpus", "8", "--vnuma", "2", "--vnuma-remote-ns",
                                      "2000"}));
}

// A lock label may set several lock parameters: each word of `param` is a
// --param of its own; other settings keep their value whole.
TEST(LabMatrix, SeveralParamsBecomeOneParamOptionEach) {
  EXPECT_EQ(last_point_arguments(R"(
name = "params"
repeats = 1
[fixed]
workload = "lockbench"
inject = "random:vcpu=all,rate=25,for=2ms;holder:lock=0,p=0.001,for=1ms"
[[axis]]
name = "lock"
values = [{ label = "pvb", lock = "pvbounded", param = " pvb_handoff=running  pvb_boost=0 " }]
)",
                                 1),
            (std::vector<std::string>{"--workload", "lockbench", "--lock", "pvbounded", "--inject",
                                      "random:vcpu=all,rate=25,for=2ms;holder:lock=0,p=0.001,for=1ms", "--param",
                                      "pvb_handoff=running", "--param", "pvb_boost=0"}));
}

TEST(LabMatrix, ShardsPartitionThePoints) {
  const auto all = expand(parse_scenario(kTwoAxes, "test"));
  for (unsigned n : {1u, 2u, 5u, 13u}) {
    std::multiset<std::string> seen;
    for (unsigned i = 1; i <= n; ++i)
      for (const auto& p : shard_points(all, {i, n})) seen.insert(p.id);
    EXPECT_EQ(seen.size(), all.size()) << n;
    for (const auto& p : all) EXPECT_EQ(seen.count(p.id), 1u) << p.id;
  }
  EXPECT_THROW(parse_shard("0/2"), Error);
  EXPECT_THROW(parse_shard("3/2"), Error);
  EXPECT_THROW(parse_shard("1"), Error);
  EXPECT_THROW(parse_shard("a/b"), Error);
  EXPECT_EQ(parse_shard("2/4").index, 2u);
}

TEST(LabMatrix, NativeTwinsAreTheInnermostAxis) {
  auto s = parse_scenario(kTwoAxes, "test");
  add_native_twins(s);
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 24u);
  EXPECT_EQ(points[0].id, "placement=1:1,lock=ticket,mode=guest#r0");
  EXPECT_EQ(points[1].id, "placement=1:1,lock=ticket,mode=native#r0");
  EXPECT_EQ(*lookup(points[1].settings, "native"), "true");
}

std::string scenario_error(const std::string& text) {
  try {
    parse_scenario(text, "bad.toml");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    return e.what();
  }
  return "(no error)";
}

TEST(LabScenario, BadFilesAreOneLineNamingThePlace) {
  EXPECT_NE(scenario_error("name = \"x\"\n[[axis]]\nname = \"lock\"\nvalues = [\n").find("bad.toml:"), std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n").find("no [[axis]]"), std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[[axis]]\nname = \"frobs\"\nvalues = [1]\n").find("not a setting"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[fixed]\nfrob = 1\n[[axis]]\nname = \"lock\"\nvalues = [\"tas\"]\n")
                .find("unknown setting 'frob'"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\nrepeats = 0\n[[axis]]\nname = \"lock\"\nvalues = [\"tas\"]\n").find("repeats"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[[axis]]\nname = \"lock\"\nvalues = [\"tas\", \"tas\"]\n").find("twice"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\nfrob = 1\n[[axis]]\nname = \"lock\"\nvalues = [\"tas\"]\n").find("unknown key"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[[axis]]\nname = \"vcpus\"\nvalues = [-1]\n").find("negative"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[[axis]]\nname = \"lock\"\nvalues = [\"tas\"]\n[[claim]]\ntext = \"c\"\n"
                           "a = \"tas\"\nb = \"ticket\"\nexpect = \"a>b\"\n")
                .find("no value 'ticket'"),
            std::string::npos);
  for (const auto& line : {scenario_error("name = \"x\"\n")}) EXPECT_EQ(line.find('\n'), std::string::npos);
}

// A setting has one place: [fixed] and an axis that sets it in every value,
// or two axes, are refused with both places; a value of a composite axis may
// still give a [fixed] setting its own value (pvbounded-scale's longer
// parked point).
TEST(LabScenario, ASettingIsGivenInOnePlace) {
  const std::string head = "name = \"x\"\n[fixed]\nlock = \"ticket\"\nduration_s = 1.0\n";
  EXPECT_EQ(scenario_error(head + "[[axis]]\nname = \"lock\"\nvalues = [\"tas\"]\n"),
            "bad.toml:5: the setting 'lock' is given twice: by [fixed] at bad.toml:3 and by axis 'lock' at bad.toml:5; "
            "give it in one place");
  EXPECT_NE(scenario_error(head + "[[axis]]\nname = \"p\"\nvalues = [{ label = \"a\", lock = \"tas\" }]\n")
                .find("'lock' is given twice"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[[axis]]\nname = \"a\"\nvalues = [{ label = \"1\", cs_ns = 1 }]\n"
                           "[[axis]]\nname = \"b\"\nvalues = [{ label = \"2\", cs_ns = 2 }, { label = \"3\", hogs = 1 }]\n")
                .find("'cs_ns' is given twice: by axis 'a' at bad.toml:2 and by axis 'b' at bad.toml:5"),
            std::string::npos);
  const auto s = parse_scenario(head + "[[axis]]\nname = \"p\"\nvalues = [{ label = \"short\", cs_ns = 1 }, "
                                       "{ label = \"long\", cs_ns = 1, duration_s = 2.0 }]\n",
                                "ok.toml");
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 2u * kDefaultRepeats);
  EXPECT_EQ(*lookup(points[0].settings, "duration_s"), "1");
  EXPECT_EQ(*lookup(points[1].settings, "duration_s"), "2");
}

// A value of the wrong type or form, an outcome no point has and a name that
// is no name are refused where they are written.
TEST(LabScenario, ValuesAreOfTheirSettingsTypeAndNamesAreNames) {
  const std::string axis = "[[axis]]\nname = \"lock\"\nvalues = [\"tas\"]\n";
  EXPECT_EQ(scenario_error("name = \"x\"\n[fixed]\nduration_s = \"0.1\"\n" + axis),
            "bad.toml:3: duration_s = \"0.1\": expected a number, not a string");
  EXPECT_EQ(scenario_error("name = \"x\"\n[fixed]\ncs_ns = 1.5\n" + axis), "bad.toml:3: cs_ns = 1.5: expected a whole number");
  EXPECT_NE(scenario_error("name = \"x\"\n[fixed]\nvcpus = true\n" + axis).find("bad.toml:3: vcpus = true: expected a number or a word"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[fixed]\npcpus = \"3-1\"\n" + axis).find("bad.toml:3: pcpus: bad CPU list '3-1'"),
            std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[fixed]\npcpus = \"bogus\"\n" + axis).find("bad.toml:3: pcpus: host CPUs 'bogus'"),
            std::string::npos);
  // Words, counts as strings and a sweep's {n} are what they were.
  EXPECT_EQ(scenario_error("name = \"x\"\n[fixed]\nvcpus = \"2x\"\npcpus = \"all\"\n" + axis), "(no error)");
  EXPECT_EQ(scenario_error("name = \"x\"\n[fixed]\nvcpus = \"4\"\npcpus = \"64cpus\"\n" + axis), "(no error)");
  EXPECT_EQ(scenario_error("name = \"x\"\n[[axis]]\nname = \"p\"\nvalues = [{ label = \"{n}\", sweep = \"cpus\", "
                           "vcpus = \"{n}\", hogs = \"{n}\", pcpus = \"{n}cpus\" }]\n"),
            "(no error)");
  EXPECT_NE(scenario_error("name = \"x\"\n" + axis + "[[claim]]\nkind = \"outcome\"\ntext = \"c\"\noutcome = \"explode\"\nexpect = \"some\"\n")
                .find("claim outcome \"explode\": not an outcome of a point (completed,"),
            std::string::npos);
  for (const char* outcome : {"deadlock", "lab-timeout", "killed-by-signal-9", "no-report"})
    EXPECT_EQ(scenario_error("name = \"x\"\n" + axis + "[[claim]]\nkind = \"outcome\"\ntext = \"c\"\noutcome = \"" +
                             outcome + "\"\nexpect = \"some\"\n"),
              "(no error)")
        << outcome;
  for (const char* name : {"\"\"", "\"a/b\"", "\"a\\nb\""}) {
    const auto e = scenario_error(std::string("name = ") + name + "\n" + axis);
    EXPECT_NE(e.find("bad.toml:1: name "), std::string::npos) << e;
    EXPECT_NE(e.find(": 1-64 characters of A-Z a-z 0-9 _ . -"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// A matrix is sized from its axes before a point is made: one too large is
// refused at once, with its size and the cap that docs/lab.md states.
TEST(LabMatrix, AMatrixAboveTheCapIsRefusedFromItsSize) {
  std::string text = "name = \"huge\"\nrepeats = 1\n";
  for (const char* axis : {"cs_ns", "delay_ns", "seed", "hogs"}) {
    text += fmt::format("[[axis]]\nname = \"{}\"\nvalues = [", axis);
    for (int i = 0; i < 32; ++i) text += fmt::format("{}{}", i ? ", " : "", i);
    text += "]\n";
  }
  text += "[[axis]]\nname = \"lock\"\nvalues = [\"tas\", \"ticket\", \"qspinlock\", \"unfair\", \"pvticket\", "
          "\"pvqspinlock\", \"hq\", \"cna\"]\n";
  auto s = parse_scenario(text, "huge.toml");
  EXPECT_EQ(matrix_size(s), 8388608u);
  EXPECT_EQ(error_of([&] { expand(s); }),
            fmt::format("scenario 'huge': 8388608 points (32 x 32 x 32 x 32 x 8 axis values x 1 repeat): more than a "
                        "lab plans (at most {}); use fewer axis values or repeats, or several scenarios",
                        kMaxLabPoints));
  // Every preset stays far below it.
  for (const auto& p : presets()) EXPECT_LT(matrix_size(parse_scenario(p.text, p.name)) * 10, kMaxLabPoints) << p.name;
  std::ifstream docs(std::string(LOCKVISOR_SOURCE_DIR) + "/docs/lab.md");
  const std::string lab_md((std::istreambuf_iterator<char>(docs)), std::istreambuf_iterator<char>());
  EXPECT_NE(lab_md.find(fmt::format("at most {} points", kMaxLabPoints)), std::string::npos)
      << "docs/lab.md does not state the cap";
}

// Every preset of the registry, so a new one is checked without being named.
// A few run fewer repeats than the default, their points being costly (Linux
// boots; a rate x length grid; scaling's contender sweep over every lock); those are named
// here, and must exist.
TEST(LabScenario, EveryPresetParsesAndHasAtLeastFiveRepeats) {
  const std::set<std::string> fewer_repeats = {"linux-policies", "linux-two-guests", "preemption-sensitivity",
                                               "scaling"};
  for (const auto& name : fewer_repeats) EXPECT_NE(find_preset(name), nullptr) << name << " is no preset";
  ASSERT_GE(presets().size(), 5u);
  for (const auto& p : presets()) {
    EXPECT_EQ(find_preset(p.name), &p) << p.name;
    const auto s = parse_scenario(p.text, p.name);
    EXPECT_GE(s.repeats, fewer_repeats.count(p.name) ? 3u : kDefaultRepeats) << p.name;
    EXPECT_FALSE(s.claims.empty()) << p.name;
    EXPECT_FALSE(expand(s).empty()) << p.name;
  }
}

TEST(LabBootstrap, MedianAndIntervalOnKnownData) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  const std::vector<double> same(7, 5.0);
  const auto e = bootstrap_median(same, 1);
  EXPECT_DOUBLE_EQ(e.median, 5);
  EXPECT_DOUBLE_EQ(e.lo, 5);
  EXPECT_DOUBLE_EQ(e.hi, 5);
  const std::vector<double> v = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  const auto b = bootstrap_median(v, 42);
  EXPECT_DOUBLE_EQ(b.median, 15);
  EXPECT_LT(b.lo, 15);
  EXPECT_GT(b.hi, 15);
  EXPECT_GE(b.lo, 10);
  EXPECT_LE(b.hi, 20);
  // Seeded: the same interval every time; another seed may differ but stays sane.
  const auto again = bootstrap_median(v, 42);
  EXPECT_EQ(b.lo, again.lo);
  EXPECT_EQ(b.hi, again.hi);
  // A single value: no spread known.
  const std::vector<double> one = {3};
  const auto o = bootstrap_median(one, 7);
  EXPECT_EQ(o.lo, 3);
  EXPECT_EQ(o.hi, 3);
}

TEST(LabBootstrap, RatioSaysWhetherADifferenceIsBeyondTheSpread) {
  const std::vector<double> a = {100, 102, 98, 101, 99}, b = {50, 51, 49, 52, 48};
  const auto r = bootstrap_ratio(a, b, 3);
  EXPECT_DOUBLE_EQ(r.median, 2.0);
  EXPECT_GT(r.lo, 1.5);
  EXPECT_LT(r.hi, 2.5);
  EXPECT_STREQ(ratio_verdict(r), "a>b");
  EXPECT_STREQ(ratio_verdict(bootstrap_ratio(b, a, 3)), "a<b");
  const std::vector<double> c = {90, 130, 70, 110, 100}, d = {100, 80, 120, 95, 105};
  EXPECT_STREQ(ratio_verdict(bootstrap_ratio(c, d, 3)), "a~b");
}

std::string temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("lockvisor-lab-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(LabResults, TornLastLineIsDroppedAndCutBeforeAppending) {
  const auto path = temp_dir() + "/torn.jsonl";
  {
    std::ofstream out(path, std::ios::trunc);
    out << R"({"id":"a#r0","x":1})" << "\n" << R"({"id":"b#r0","x":2})" << "\n" << R"({"id":"c#r0","x")";
  }
  auto loaded = load_results(path);
  ASSERT_EQ(loaded.records.size(), 2u);
  EXPECT_TRUE(loaded.torn);
  {
    ResultsLog log(path, loaded);
    log.append({{"id", "c#r0"}, {"x", 3}});
  }
  loaded = load_results(path);
  ASSERT_EQ(loaded.records.size(), 3u);
  EXPECT_FALSE(loaded.torn);
  EXPECT_EQ(loaded.records[2]["x"], 3);
  // A complete line without its newline is torn too: its write was cut short.
  { std::ofstream(path, std::ios::app) << R"({"id":"d#r0"})"; }
  EXPECT_EQ(load_results(path).records.size(), 3u);
  // Damage anywhere else, or a point twice, is an error naming the line.
  { std::ofstream(path, std::ios::trunc) << "{\"id\":\"a\"}\nnot json\n{\"id\":\"b\"}\n"; }
  try {
    load_results(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
  { std::ofstream(path, std::ios::trunc) << "{\"id\":\"a\"}\n{\"id\":\"a\"}\n"; }
  EXPECT_THROW(load_results(path), Error);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(LabMetrics, AMissingKeyIsAnErrorNamingItNullIsNotApplicable) {
  const auto* ops = find_metric("ops_per_sec");
  const auto* halts = find_metric("halts");
  const auto* cpu = find_metric("cpu_s_per_mop");
  ASSERT_TRUE(ops && halts && cpu);
  nlohmann::json report = {{"ops_per_sec", 5.0}, {"vmm", nullptr}, {"cpu_seconds", 2.0}, {"ops_total", 4000000}};
  EXPECT_EQ(read_metric(*ops, report, "p"), 5.0);
  EXPECT_FALSE(read_metric(*halts, report, "p").has_value());
  EXPECT_DOUBLE_EQ(*read_metric(*cpu, report, "p"), 0.5);
  report.erase("ops_per_sec");
  try {
    read_metric(*ops, report, "lock=tas#r0");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/ops_per_sec"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("lock=tas#r0"), std::string::npos);
  }
}

TEST(LabMetrics, WaitsInHostSlicesNeedTheSliceExitsArePerAcquisition) {
  const auto* max_slices = find_metric("latency_max_slices");
  const auto* exits = find_metric("vmm_exits_per_acq");
  ASSERT_TRUE(max_slices && exits);
  const nlohmann::json report = {{"latency_ns", {{"max", 12e6}}}, {"vmm", {{"exits", 300}}}, {"ops_total", 1000}};
  EXPECT_DOUBLE_EQ(*read_metric(*max_slices, report, "p", 4e6), 3.0);
  EXPECT_FALSE(read_metric(*max_slices, report, "p").has_value()) << "no slice: n/a, never a number of ns";
  EXPECT_DOUBLE_EQ(*read_metric(*exits, report, "p"), 0.3);
  const nlohmann::json native = {{"vmm", nullptr}, {"ops_total", 1000}};
  EXPECT_FALSE(read_metric(*exits, native, "p").has_value());
  EXPECT_EQ(host_slice_ns({{"machine", {{"host_slice", {{"ns", 4e6}}}}}}), 4e6);
  EXPECT_FALSE(host_slice_ns({{"machine", {{"host_slice", {{"ns", nullptr}}}}}}).has_value());
  EXPECT_FALSE(host_slice_ns({{"machine", nlohmann::json::object()}}).has_value()) << "a lab from before the slice";
}

// A completed run per point with every metric the summary reads; the
// throughput from `ops_per_sec(point)`.
template <class F>
std::vector<nlohmann::json> completed_records(const Scenario& s, F ops_per_sec) {
  std::vector<nlohmann::json> records;
  for (const auto& p : expand(s)) {
    nlohmann::json report = {{"ops_per_sec", ops_per_sec(p)},
                             {"fairness", {{"jain", 1.0}, {"cv", 0.0}}},
                             {"latency_ns", {{"p50", 1}, {"p99", 2}, {"p999", 3}, {"max", 4}}},
                             {"cpu_seconds", 1.0},
                             {"cpu_seconds_window", 0.9},
                             {"window_fairness", {{"jain_median", 0.9}, {"jain_min", 0.5}, {"starved_windows", 0}}},
                             {"ops_total", 1000},
                             {"steal_ns", nullptr},
                             {"vmm", nullptr}};
    records.push_back({{"id", p.id}, {"key", p.key}, {"outcome", "completed"}, {"report", report}});
  }
  return records;
}

TEST(LabSummary, ClaimsAreCheckedAgainstTheMedians) {
  auto s = parse_scenario(std::string(kTwoAxes) + R"(
[[claim]]
text = "tas beats ticket at 4:1"
a = "tas"
b = "ticket"
where = { placement = "4:1" }
expect = "a>b"
[[claim]]
kind = "outcome"
text = "ticket deadlocks somewhere"
outcome = "deadlock"
where = { lock = "ticket" }
expect = "some"
)",
                          "t");
  const auto records = completed_records(s, [](const Point& p) {
    return (p.key.find("lock=tas") != std::string::npos ? 1000.0 : 100.0) + p.repeat;
  });
  const auto summary = summarize(s, records, 2);
  ASSERT_EQ(summary.claims.size(), 2u);
  EXPECT_EQ(summary.claims[0].verdict, "holds");
  EXPECT_EQ(summary.claims[1].verdict, "not seen");
  const auto csv = summary_csv(summary);
  EXPECT_NE(csv.find("ops_per_sec_median"), std::string::npos);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 6);
}

// A run killed from outside (exit 128 + SIGKILL) is named in summary.md with
// the likely cause and the guest memory its point asked for; without one,
// there is no such note.
TEST(LabSummary, ARunKilledFromOutsideIsExplainedWithItsMemory) {
  const auto s = parse_scenario(kTwoAxes, "t");
  auto records = completed_records(s, [](const Point&) { return 100.0; });
  EXPECT_EQ(summary_markdown(s, summarize(s, records, 2)).find("OOM killer"), std::string::npos);
  records[0]["outcome"] = machine::outcome_for_exit_code(128 + 9);
  records[0]["report"] = nullptr;  // as the lab records a run that left none
  const auto md = summary_markdown(s, summarize(s, records, 2));
  const auto at = md.find("'killed-by-signal-9' is a SIGKILL that lockvisor did not send");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string memory = experiment::find_run_setting("memory_mib")->def;  // the scenario sets none
  EXPECT_NE(md.find(records[0]["key"].get<std::string>() + " (" + memory + " MiB of guest memory)", at),
            std::string::npos)
      << md;
}

// A lock axis value that is a variant of a lock (a label with a parameter)
// is named by its label in the headline, not by the lock it runs.
TEST(LabReport, HeadlineNamesLockVariantsByTheirLabel) {
  const auto s = parse_scenario(R"(
name = "variants"
[[axis]]
name = "lock"
values = ["tas", { label = "tas-tuned", lock = "tas", param = "x=1" }]
)",
                                "t");
  const auto records = completed_records(s, [](const Point& p) {
    return (p.key.find("tas-tuned") != std::string::npos ? 2000.0 : 1000.0) + p.repeat;
  });
  const auto summary = summarize(s, records, 2);
  const nlohmann::json manifest = {{"machine", nlohmann::json::object()}, {"repeats", 5}};
  const auto md = report_markdown(s, summary, manifest, "no plots");
  EXPECT_NE(md.find("| (all) | tas-tuned | 2002 | tas |"), std::string::npos) << md;
}

// A verdict cites its public source and says in plain words what it
// expects; the goal lists the locks inside it; the platform's part prints the
// numbers measured at the lab's start, not a figure from another machine.
TEST(LabReport, VerdictsCiteTheirSourceTheGoalNamesItsLocksThePlatformIsMeasured) {
  const auto s = parse_scenario(std::string(kTwoAxes) + R"(
[goal]
text = "at least 0.9x tas with a worst wait of at most 1 ms"
max_worst_wait_ms = 1
min_throughput_ratio = 0.9
relative_to = "tas"
where = { placement = "4:1" }
[[claim]]
source = "Jane Doe, \"[PATCH] locks\", LKML, 1 April 2014"
text = "tas beats ticket at 4:1"
a = "tas"
b = "ticket"
where = { placement = "4:1" }
expect = "a>b"
)",
                                "t");
  const auto records = completed_records(s, [](const Point& p) {
    return (p.key.find("lock=tas") != std::string::npos ? 1000.0 : 100.0) + p.repeat;
  });
  const auto summary = summarize(s, records, 2);
  const nlohmann::json platform = {
      {"exits",
       {{"bare_pio_exit_us", {{"median", 23.5}, {"p99", 30.0}}},
        {"doorbell_us", {{"median", 41.0}, {"p99", 50.0}}},
        {"kick_wake_same_cpu_us", {{"median", 90.0}, {"p99", 120.0}}}}},
      {"pause_loop_exiting", {{"module", "none"}, {"values", nlohmann::json::object()}}},
      {"halt_poll_ns", 200000}};
  const nlohmann::json manifest = {
      {"machine", {{"cpu_vendor", "GenuineIntel"}, {"cpu_family", "6"}, {"cpu_model", "167"}, {"platform", platform}}},
      {"repeats", 2}};
  const auto md = report_markdown(s, summary, manifest, "no plots");
  EXPECT_NE(md.find("- Source: Jane Doe, \"[PATCH] locks\", LKML, 1 April 2014\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- Expected here: tas's throughput (acquisitions/s) is higher than ticket's at placement 4:1"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("## This project's goal"), std::string::npos) << md;
  EXPECT_NE(md.find("- placement=4:1: met by tas ("), std::string::npos) << md;
  EXPECT_NE(md.find("worst wait 0.00 ms, longest of 2 runs 0.00 ms)"), std::string::npos)
      << "the goal names the longest single wait beside the median\n"
      << md;
  EXPECT_EQ(md.find("placement=1:1: "), std::string::npos) << "the goal applies at 4:1 only\n" << md;
  EXPECT_NE(md.find("A bare exit from the guest to the VMM and back (port I/O): 23.5 us (p99 30.0 us)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("on two host CPUs: not measured"), std::string::npos) << md;
  EXPECT_NE(md.find("Pause-loop exiting: absent"), std::string::npos) << md;
  EXPECT_NE(md.find("kvm halt_poll_ns: 200000"), std::string::npos) << md;
  EXPECT_NE(md.find("Host: GenuineIntel family 6 model 167"), std::string::npos) << md;
  // A lab directory from before the measurement says so instead of guessing.
  const nlohmann::json old_manifest = {{"machine", nlohmann::json::object()}, {"repeats", 2}};
  EXPECT_NE(report_markdown(s, summary, old_manifest, "").find("Exit costs were not measured"), std::string::npos);
  EXPECT_EQ(md.find("EMULATED"), std::string::npos) << "not made in the nested machine\n" << md;
}

// A lab made inside tools/nested-kvm says so at the top of report.md and
// summary.md, names the outer host beside the emulated CPU, and warns that
// only ratios within the run mean anything.
TEST(LabReport, AnEmulatedLabSaysSoAndNamesTheOuterHost) {
  const auto s = parse_scenario(kTwoAxes, "t");
  const auto summary = summarize(s, completed_records(s, [](const Point&) { return 1.0; }), 2);
  const nlohmann::json machine = {
      {"cpu_vendor", "AuthenticAMD"}, {"cpu_family", "23"}, {"cpu_model", "1"}, {"cpu_stepping", "2"},
      {"kernel", "6.1.0-57-amd64"},   {"kvm", "SVM"},       {"emulated", true},
      {"outer", {{"cpu_vendor", "AuthenticAMD"}, {"cpu_family", "26"}, {"cpu_model", "2"}, {"cpu_stepping", "1"},
                 {"kernel", "6.18.44"}, {"cpus", "2"}, {"kvm", "none"}}}};
  const nlohmann::json manifest = {{"machine", machine}, {"repeats", 2}};
  const auto md = report_markdown(s, summary, manifest, "no plots");
  const std::string outer = "AuthenticAMD family 26 model 2 stepping 1, Linux 6.18.44, 2 CPUs, KVM none";
  const auto warning = md.find("**EMULATED (nested): made inside tools/nested-kvm");
  ASSERT_NE(warning, std::string::npos) << md;
  EXPECT_LT(warning, md.find("## ")) << "the warning comes before the first section\n" << md;
  EXPECT_NE(md.find("only ratios within this run mean anything", warning), std::string::npos) << md;
  EXPECT_NE(md.find("Host: AuthenticAMD family 23 model 1 stepping 2, Linux 6.1.0-57-amd64, KVM SVM. That is the "
                    "nested machine's emulated CPU, not hardware; the outer host is " + outer),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- Emulated: yes, inside tools/nested-kvm (QEMU TCG); outer host: " + outer), std::string::npos)
      << md;
  const auto note = with_emulation_note("# Lab summary: t\n\ntext\n", machine);
  EXPECT_EQ(note.rfind("# Lab summary: t\n\n**EMULATED (nested): ", 0), 0u) << note;
  EXPECT_NE(note.find(".**\n\ntext\n"), std::string::npos) << note;
  EXPECT_EQ(with_emulation_note("# t\n\ntext\n", {{"emulated", false}}), "# t\n\ntext\n");
}

TEST(LabScenario, BadGoalTablesAreOneLineErrors) {
  const auto goal_error = [](const std::string& goal) { return scenario_error(std::string(kTwoAxes) + goal); };
  EXPECT_NE(goal_error("[goal]\nmax_worst_wait_ms = 1\n").find("needs 'text'"), std::string::npos);
  EXPECT_NE(goal_error("[goal]\ntext = \"g\"\n").find("states no bound"), std::string::npos);
  EXPECT_NE(goal_error("[goal]\ntext = \"g\"\nmin_throughput_ratio = 0.9\n").find("go together"), std::string::npos);
  EXPECT_NE(goal_error("[goal]\ntext = \"g\"\nmin_throughput_ratio = 0.9\nrelative_to = \"nosuch\"\n")
                .find("relative_to 'nosuch'"),
            std::string::npos);
  EXPECT_NE(goal_error("[goal]\ntext = \"g\"\nmax_worst_wait_ms = -1\n").find("positive"), std::string::npos);
  EXPECT_NE(goal_error("[goal]\ntext = \"g\"\nmax_worst_wait_ms = 1\nfrob = 2\n").find("unknown key 'frob'"),
            std::string::npos);
  EXPECT_NE(goal_error("[goal]\ntext = \"g\"\nmax_worst_wait_ms = 1\nwhere = { placement = \"9:1\" }\n")
                .find("no value '9:1'"),
            std::string::npos);
  EXPECT_EQ(goal_error("[goal]\ntext = \"g\"\n").find('\n'), std::string::npos);
}

// What a user reads names public sources in their own words: no internal
// tags, no paths outside the repository, no exit cost measured elsewhere.
TEST(LabScenario, PresetsSpeakInPublicWords) {
  for (const auto& p : presets()) {
    const std::string text(p.text);
    for (const char* banned : {"seed 0", "Seed 0", "seeds", "issue 1", "issue 2", "issue 8", "issue 9", "Issue ",
                               "anchor", "/work/", "../", "~20 us", "80-90 us", "section 3."})
      EXPECT_EQ(text.find(banned), std::string::npos) << p.name << ": " << banned;
    for (const auto& c : parse_scenario(text, std::string(p.name)).claims)
      EXPECT_FALSE(c.source.empty()) << p.name << ": " << c.text;
  }
}

TEST(Experiment, LongHoldEveryZeroTurnsLongHoldsOff) {
  experiment::WorkloadSettings w;
  w.workload = "torture";
  EXPECT_EQ(experiment::workload_params(w, 1, 2).long_hold_every, experiment::kTortureLongHoldEvery);
  w.long_hold_every = 0;
  EXPECT_EQ(experiment::workload_params(w, 1, 2).long_hold_every, 0u);
  w.long_hold_every = 7;
  EXPECT_EQ(experiment::workload_params(w, 1, 2).long_hold_every, 7u);
  w.workload = "lockbench";
  w.long_hold_every.reset();
  EXPECT_EQ(experiment::workload_params(w, 1, 2).long_hold_every, 0u);
  EXPECT_EQ(experiment::workload_params(w, 1, 2).nlocks, 1u);
}

TEST(LabTimelines, OneTracedRunPerSelectedCellNotPerRepeat) {
  auto s = parse_scenario(std::string(kTwoAxes) + "[timeline]\nwhere = { placement = \"4:1\" }\n", "test");
  add_native_twins(s);
  ASSERT_TRUE(s.timeline.enabled);
  const auto points = expand(s);
  const auto plans = plan_timelines(s, points, "/labdir");
  // 3 locks at 4:1, guest mode only (native twins have no VM to trace), repeat 0 only.
  ASSERT_EQ(plans.size(), 3u);
  std::set<std::string> ids;
  for (const auto& p : plans) {
    ids.insert(p.id);
    EXPECT_NE(p.key.find("placement=4:1"), std::string::npos) << p.key;
    EXPECT_NE(p.key.find("mode=guest"), std::string::npos) << p.key;
    const auto& a = p.args;
    const auto value_of = [&](const std::string& option) {
      const auto it = std::find(a.begin(), a.end(), option);
      return it == a.end() || it + 1 == a.end() ? std::string("(absent)") : *(it + 1);
    };
    EXPECT_EQ(value_of("--trace"), "/labdir/timelines/" + p.name + ".json");
    EXPECT_EQ(value_of("--trace-window"), "worst-wait");
    EXPECT_EQ(value_of("--memory"), std::to_string(kTimelineMemoryMib));
    EXPECT_EQ(value_of("--duration"), "0.05");  // the point's, below the cap
    EXPECT_EQ(value_of("--vcpus"), "4");
  }
  EXPECT_EQ(ids.size(), 3u);
  // A shard plans the cells whose first repeat it runs, so shards never overlap.
  std::size_t planned = 0;
  for (unsigned i = 1; i <= 3; ++i) planned += plan_timelines(s, shard_points(points, {i, 3}), "d").size();
  EXPECT_EQ(planned, 3u);
  // No [timeline]: nothing.
  EXPECT_TRUE(plan_timelines(parse_scenario(kTwoAxes, "t"), expand(parse_scenario(kTwoAxes, "t")), "d").empty());
}

TEST(LabTimelines, DurationIsThePointsCappedOrTheTablesAndMemoryOnlyGrows) {
  std::string text = kTwoAxes;
  text.replace(text.find("duration_s = 0.05"), 17, "duration_s = 3\nmemory_mib = 4096");
  auto s = parse_scenario(text + "[timeline]\n", "t");
  auto plans = plan_timelines(s, expand(s), "d");
  ASSERT_EQ(plans.size(), 6u);
  EXPECT_DOUBLE_EQ(plans[0].duration_s, kMaxTimelineSeconds);
  EXPECT_NE(std::find(plans[0].args.begin(), plans[0].args.end(), "4096"), plans[0].args.end());
  s = parse_scenario(text + "[timeline]\nduration_s = 0.2\n", "t");
  EXPECT_DOUBLE_EQ(plan_timelines(s, expand(s), "d").at(0).duration_s, 0.2);
}

TEST(LabTimelines, BadTimelineTablesAreOneLineErrors) {
  const std::string base = kTwoAxes;
  EXPECT_NE(scenario_error(base + "[timeline]\nwhere = { lock = \"mcs\" }\n").find("[timeline]: axis 'lock' has no value 'mcs'"),
            std::string::npos);
  EXPECT_NE(scenario_error(base + "[timeline]\nwhere = { colour = \"red\" }\n").find("no axis 'colour'"),
            std::string::npos);
  EXPECT_NE(scenario_error(base + "[timeline]\nduration_s = 5\n").find("duration_s"), std::string::npos);
  EXPECT_NE(scenario_error(base + "[timeline]\nduration_s = \"long\"\n").find("duration_s"), std::string::npos);
  EXPECT_NE(scenario_error(base + "[timeline]\nfrob = 1\n").find("unknown key 'frob'"), std::string::npos);
  EXPECT_NE(scenario_error("timeline = 3\n" + base).find("expected a table"), std::string::npos);
  EXPECT_NE(scenario_error("name = \"x\"\n[[vm]]\nlabel = \"a\"\n[[vm]]\nlabel = \"b\"\n[[axis]]\nname = \"lock\"\n"
                           "values = [\"tas\"]\n[timeline]\n")
                .find("[[vm]]"),
            std::string::npos);
}

}  // namespace
}  // namespace lockvisor::lab

namespace lockvisor::lab {
namespace {

std::string joined(const std::vector<std::string>& args) {
  std::string text;
  for (const auto& a : args) text += a + ' ';
  return text;
}

// The Linux presets cannot name a kernel (it is a file of the user's
// machine): they need one, and --kernel/--set gives it to every point and VM.
TEST(LabLinux, PresetsNeedAKernelCompareThePolicyAndCountOperations) {
  for (const auto* name : {"linux-policies", "linux-two-guests"}) {
    const auto* p = find_preset(name);
    ASSERT_NE(p, nullptr) << name;
    auto s = parse_scenario(p->text, name);
    EXPECT_FALSE(s.claims.empty()) << name;
    const auto why = error_of([&] { apply_overrides(s, {}, name); });
    EXPECT_NE(why.find("needs the setting 'kernel'"), std::string::npos) << why;
    EXPECT_NE(why.find("--kernel FILE"), std::string::npos) << why;
    apply_overrides(s, {{"kernel", "/k/vmlinuz"}}, name);
    EXPECT_STREQ(throughput_unit(s), "ops/s");
    for (const auto& point : expand(s)) {
      const auto args = joined(run_arguments(point.settings));
      EXPECT_NE(args.find("--kernel /k/vmlinuz "), std::string::npos) << args;
    }
  }
  auto policies = parse_scenario(find_preset("linux-policies")->text, "p");
  EXPECT_EQ(compared_axis(policies), "guest_lock");
  apply_overrides(policies, {{"kernel", "/k"}}, "p");
  const auto first = joined(run_arguments(expand(policies).front().settings));
  EXPECT_NE(first.find("--workload futex-hash "), std::string::npos) << first;
  EXPECT_NE(first.find("--guest-lock pv "), std::string::npos) << first;
  auto two = parse_scenario(find_preset("linux-two-guests")->text, "t");
  EXPECT_EQ(compared_axis(two), "vm");
  apply_overrides(two, {{"kernel", "/k"}}, "t");
  const auto vms = joined(run_arguments(expand(two).front().settings));
  EXPECT_NE(vms.find("--vm label=fair,guest-lock=native "), std::string::npos) << vms;
  EXPECT_NE(vms.find("--vm label=unfair,guest-lock=tas "), std::string::npos) << vms;
}

TEST(LabScenario, SetGivesEveryPointASettingNoAxisSets) {
  auto s = parse_scenario(kTwoAxes, "t");
  EXPECT_STREQ(throughput_unit(s), "acq/s");
  apply_overrides(s, {{"duration_s", "1"}, {"hogs", "2"}}, "t");
  for (const auto& p : expand(s)) {
    EXPECT_EQ(*lookup(p.settings, "duration_s"), "1");
    EXPECT_EQ(*lookup(p.settings, "hogs"), "2");
  }
  EXPECT_NE(error_of([&] { apply_overrides(s, {{"lock", "tas"}}, "t"); }).find("the axis 'lock' sets it"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(s, {{"vcpus", "8"}}, "t"); }).find("the axis 'placement' sets it"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(s, {{"bogus", "1"}}, "t"); }).find("--set bogus: not a lab setting"),
            std::string::npos);
  EXPECT_NE(error_of([&] { apply_overrides(s, {{"no_pv", "yes"}}, "t"); }).find("expected true or false"),
            std::string::npos);
}

TEST(LabScenario, CompareAndNeedsNameWhatTheScenarioHas) {
  const std::string base = kTwoAxes;
  EXPECT_EQ(compared_axis(parse_scenario(base, "t")), "lock");
  EXPECT_EQ(compared_axis(parse_scenario("compare = \"placement\"\n" + base, "t")), "placement");
  EXPECT_NE(error_of([&] { parse_scenario("compare = \"guest_lock\"\n" + base, "t"); }).find("compare: the name of an axis"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_scenario("needs = [\"kernal\"]\n" + base, "t"); }).find("unknown setting 'kernal'"),
            std::string::npos);
  auto s = parse_scenario("needs = [\"seed\"]\n" + base, "t");
  EXPECT_NE(error_of([&] { apply_overrides(s, {}, "t"); }).find("give --set seed=VALUE"), std::string::npos);
}

// The headline and the goal rank the values of the compared axis: a Linux
// lab's kernel policies, not a `lock` the scenario does not have.
TEST(LabReport, HeadlineRanksTheComparedAxisInItsUnit) {
  auto s = parse_scenario(R"(
name = "policies"
needs = ["kernel"]
compare = "guest_lock"
[[axis]]
name = "guest_lock"
values = ["pv", "tas", "native"]
)",
                          "t");
  apply_overrides(s, {{"kernel", "/k"}}, "t");
  const auto records = completed_records(s, [](const Point& p) {
    return (p.key.find("guest_lock=tas") != std::string::npos ? 3000.0 : 1000.0) + p.repeat;
  });
  const auto summary = summarize(s, records, 2);
  const nlohmann::json manifest = {{"machine", nlohmann::json::object()}, {"repeats", 5}};
  const auto md = report_markdown(s, summary, manifest, "no plots");
  EXPECT_NE(md.find("fastest guest_lock per setting"), std::string::npos) << md;
  EXPECT_NE(md.find("median ops/s"), std::string::npos) << md;
  EXPECT_NE(md.find("| (all) | tas | 3002 | pv |"), std::string::npos) << md;
  EXPECT_NE(summary_markdown(s, summary).find("throughput (ops/s)"), std::string::npos);
}

// KVM's counts are in reports since Linux guests (whose halts and kicks
// never reach the VMM); older reports lack them and still summarise.
TEST(LabMetrics, KvmCountsAreReadWhereTheReportHasThem) {
  const auto* halts = find_metric("kvm_halt_exits");
  const auto* calls = find_metric("kvm_hypercalls");
  ASSERT_TRUE(halts && calls);
  nlohmann::json report = {{"kvm_totals", {{"halt_exits", 2500}, {"hypercalls", 25}}}};
  EXPECT_EQ(read_metric(*halts, report, "p"), 2500.0);
  EXPECT_EQ(read_metric(*calls, report, "p"), 25.0);
  EXPECT_FALSE(read_metric(*halts, nlohmann::json{{"kvm_totals", nullptr}}, "p").has_value());
  EXPECT_FALSE(read_metric(*halts, nlohmann::json::object(), "p").has_value());
  // A metric that must be there still fails when it is not.
  EXPECT_THROW(read_metric(*find_metric("ops_per_sec"), nlohmann::json::object(), "p"), Error);
}

}  // namespace
}  // namespace lockvisor::lab

namespace lockvisor::lab {
namespace {

// One run a side has no spread: a claim gets no verdict from it.
TEST(LabSummary, OneRunASideIsTooFewForAVerdict) {
  auto s = parse_scenario(std::string(kTwoAxes) + R"(
[[claim]]
text = "tas beats ticket"
a = "tas"
b = "ticket"
expect = "a>b"
)",
                          "t");
  s.repeats = 1;
  const auto records = completed_records(s, [](const Point& p) {
    return p.key.find("lock=tas") != std::string::npos ? 1000.0 : 100.0;
  });
  const auto summary = summarize(s, records, 2);
  ASSERT_EQ(summary.claims.size(), 1u);
  EXPECT_EQ(summary.claims[0].verdict, "too few runs");
  ASSERT_FALSE(summary.claims[0].findings.empty());
  EXPECT_NE(summary.claims[0].findings[0].find("too few runs to tell"), std::string::npos)
      << summary.claims[0].findings[0];
}

// A ratio claim with a factor compares a with factor x b: "at least 0.9x"
// holds where the ratio's whole interval is above 0.9, is contradicted where
// it is wholly below, and says so in its finding.
TEST(LabSummary, ARatioClaimsFactorMovesTheLineItIsJudgedAgainst) {
  EXPECT_STREQ(ratio_verdict(Estimate{0.95, 0.92, 0.98}, 0.9), "a>b");
  EXPECT_STREQ(ratio_verdict(Estimate{0.95, 0.92, 0.98}), "a<b");
  EXPECT_STREQ(ratio_verdict(Estimate{0.9, 0.85, 0.95}, 0.9), "a~b");
  auto s = parse_scenario(std::string(kTwoAxes) + R"(
[[claim]]
text = "tas at least 0.9x ticket"
a = "tas"
b = "ticket"
factor = 0.9
expect = "a>b"
[[claim]]
text = "unfair at least 0.9x ticket"
a = "unfair"
b = "ticket"
factor = 0.9
expect = "a>b"
[[claim]]
text = "unfair beats ticket"
a = "unfair"
b = "ticket"
expect = "a>b"
)",
                          "t");
  // tas 0.95x ticket, unfair 0.8x: tas holds against 0.9 but not against 1.
  const auto records = completed_records(s, [](const Point& p) {
    return p.key.find("lock=tas") != std::string::npos ? 950.0 : p.key.find("lock=unfair") != std::string::npos ? 800.0 : 1000.0;
  });
  const auto summary = summarize(s, records, 2);
  ASSERT_EQ(summary.claims.size(), 3u);
  EXPECT_EQ(summary.claims[0].verdict, "holds");
  ASSERT_FALSE(summary.claims[0].findings.empty());
  EXPECT_NE(summary.claims[0].findings[0].find("tas higher than 0.9x ticket, beyond the spread"), std::string::npos)
      << summary.claims[0].findings[0];
  EXPECT_EQ(summary.claims[1].verdict, "contradicted");
  EXPECT_NE(summary.claims[1].findings[0].find("unfair lower than 0.9x ticket"), std::string::npos);
  EXPECT_EQ(summary.claims[2].verdict, "contradicted");
  const auto md = report_markdown(s, summary, {{"machine", nlohmann::json::object()}, {"repeats", 2}}, "no plots");
  EXPECT_NE(md.find("- Expected here: tas's throughput (acquisitions/s) is higher than 0.9x ticket's (the 95% "
                    "interval of the ratio above 0.9)"),
            std::string::npos)
      << md;
  const auto bad = [](const std::string& claim) {
    return error_of([&] { parse_scenario(std::string(kTwoAxes) + claim, "t"); });
  };
  EXPECT_NE(bad("[[claim]]\ntext = \"x\"\na = \"tas\"\nb = \"ticket\"\nfactor = 0\nexpect = \"a>b\"\n")
                .find("factor: a number above 0"),
            std::string::npos);
  EXPECT_NE(bad("[[claim]]\ntext = \"x\"\na = \"tas\"\nb = \"ticket\"\nfactor = \"big\"\nexpect = \"a>b\"\n")
                .find("factor: a number above 0"),
            std::string::npos);
  EXPECT_NE(bad("[[claim]]\nkind = \"level\"\ntext = \"x\"\nmetric = \"ops_per_sec\"\na = \"tas\"\nexpect = "
                "\"above\"\nvalue = 1\nfactor = 2\n")
                .find("only a ratio claim"),
            std::string::npos);
}

// A value with min_cpus exists only where the lab has that many CPUs; the
// others are left out, recorded, named by the dry run and the report, and
// the claims about them say "not on this host" instead of "no data".
TEST(LabSummary, ValuesThatNeedMoreCpusAreLeftOutAndTheirClaimsSaySo) {
  const std::string text = R"(
name = "t"
repeats = 2
[fixed]
workload = "lockbench"
duration_s = 0.05
[[axis]]
name = "setting"
values = [{ label = "2-on-2", vcpus = "1x", pcpus = "2cpus" }, { label = "8-on-8", vcpus = "1x", pcpus = "8cpus", min_cpus = 8 }]
[[axis]]
name = "lock"
values = ["ticket", "tas"]
[[claim]]
text = "tas beats ticket at 8 on 8"
a = "tas"
b = "ticket"
where = { setting = "8-on-8" }
expect = "a>b"
[[claim]]
text = "tas beats ticket everywhere"
a = "tas"
b = "ticket"
expect = "a>b"
)";
  auto s = parse_scenario(text, "t");
  s.host_cpus = {0, 1};
  const auto small = expand(s);
  EXPECT_EQ(small.size(), 4u) << "2 locks x 2 repeats at 2-on-2 only";
  expand_for_host(s);
  ASSERT_EQ(s.left_out.size(), 1u);
  EXPECT_EQ(s.left_out[0], (LeftOutValue{"setting", "8-on-8", 8}));
  expand_for_host(s);
  EXPECT_EQ(s.left_out.size(), 1u) << "idempotent";
  const auto records = completed_records(s, [](const Point& p) {
    return p.key.find("lock=tas") != std::string::npos ? 1000.0 : 100.0;
  });
  const auto summary = summarize(s, records, 2);
  ASSERT_EQ(summary.claims.size(), 2u);
  EXPECT_EQ(summary.claims[0].verdict, "not on this host");
  ASSERT_FALSE(summary.claims[0].findings.empty());
  EXPECT_EQ(summary.claims[0].findings.back(),
            "setting=8-on-8: not on this host (needs at least 8 host CPUs; this lab is planned for 2)");
  EXPECT_EQ(summary.claims[1].verdict, "holds") << "the points this host has";
  EXPECT_EQ(summary.claims[1].findings.size(), 1u) << "no where: it names no left-out value";
  const auto placement = placement_description({0, 1}, "test", {}, s.left_out);
  EXPECT_NE(left_out_line(placement).find("setting `8-on-8` (at least 8 CPUs)"), std::string::npos);
  EXPECT_NE(placement_markdown(placement).find("Left out on this host"), std::string::npos);

  auto big = parse_scenario(text, "t");
  big.host_cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(expand(big).size(), 8u);
  expand_for_host(big);
  EXPECT_TRUE(big.left_out.empty());
  EXPECT_TRUE(left_out_line(placement_description(big.host_cpus, "test", {}, big.left_out)).empty());

  // An axis with nothing left, and a bad min_cpus, are one-line errors.
  auto none = parse_scenario(R"(
name = "t"
[[axis]]
name = "setting"
values = [{ label = "8-on-8", vcpus = "1x", pcpus = "8cpus", min_cpus = 8 }]
)",
                             "t");
  none.host_cpus = {0, 1};
  EXPECT_NE(error_of([&] { expand_for_host(none); }).find("axis 'setting': no value on 2 host CPU(s)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_scenario("name = \"t\"\n[[axis]]\nname = \"s\"\nvalues = [{ label = \"a\", vcpus = 2, min_cpus = 0 }]\n",
                             "t");
            }).find("min_cpus: an integer 1.."),
            std::string::npos);
}

// A level claim: the 95% interval of one lock's median against a stated
// bound, per point: inside holds, wholly outside contradicts, straddling is
// not beyond the spread; a report without the metric has no data.
TEST(LabSummary, LevelClaimsCompareTheIntervalOfTheMedianWithTheBound) {
  auto s = parse_scenario(std::string(kTwoAxes) + R"(
[[claim]]
kind = "level"
text = "tas steals most acquisitions at 4:1"
metric = "steal_fraction"
a = "tas"
where = { placement = "4:1" }
expect = "above"
value = 0.5
[[claim]]
kind = "level"
text = "ticket steals 10-20%"
metric = "steal_fraction"
a = "ticket"
expect = "between"
low = 0.1
high = 0.2
[[claim]]
kind = "level"
text = "unfair steals below half"
metric = "steal_fraction"
a = "unfair"
expect = "below"
value = 0.5
[[claim]]
kind = "level"
text = "tas confers"
metric = "confers"
a = "tas"
expect = "above"
value = 0
)",
                          "t");
  auto records = completed_records(s, [](const Point&) { return 1000.0; });
  for (auto& r : records) {
    const auto key = r["key"].get<std::string>();
    const int repeat = r["id"].get<std::string>().back() - '0';
    // tas 0.9/0.91, ticket 0.6/0.61 (outside 0.1-0.2), unfair 0.4/0.6 (straddles 0.5).
    const double steal = key.find("lock=tas") != std::string::npos      ? 0.9 + 0.01 * repeat
                         : key.find("lock=ticket") != std::string::npos ? 0.6 + 0.01 * repeat
                                                                         : 0.4 + 0.2 * repeat;
    r["report"]["steal_fraction"] = steal;
  }
  const auto summary = summarize(s, records, 2);
  ASSERT_EQ(summary.claims.size(), 4u);
  EXPECT_EQ(summary.claims[0].verdict, "holds");
  EXPECT_EQ(summary.claims[0].findings.size(), 1u) << "only the 4:1 point of tas";
  EXPECT_EQ(summary.claims[1].verdict, "contradicted");
  EXPECT_EQ(summary.claims[1].findings.size(), 2u);
  EXPECT_EQ(summary.claims[2].verdict, "not beyond the spread");
  EXPECT_EQ(summary.claims[3].verdict, "no data") << "the reports have no pv_confer";
}

// Every report of a lab with a modelled remote cost says which points are a
// model, whatever the scenario's own words; a level claim reads in words.
TEST(LabReport, ModelledRemoteCostIsLabelledAndLevelClaimsReadInWords) {
  const auto s = parse_scenario(R"(
name = "numa"
repeats = 2
[fixed]
workload = "lockbench"
vcpus = 4
vnuma = "2"
[[axis]]
name = "remote"
values = [{ label = "none", vnuma_remote_ns = 0 }, { label = "model", vnuma_remote_ns = 500 }]
[[axis]]
name = "lock"
values = ["qspinlock", "hq"]
[[claim]]
kind = "level"
source = "Jane Doe, \"[RFC] locks\", LKML, 1 April 2025"
text = "hq stays local"
metric = "jain"
a = "hq"
where = { remote = "model" }
expect = "above"
value = 0.8
)",
                                "t");
  const auto records = completed_records(s, [](const Point&) { return 1000.0; });
  const auto summary = summarize(s, records, 2);
  const nlohmann::json manifest = {{"machine", nlohmann::json::object()}, {"repeats", 2}};
  const auto md = report_markdown(s, summary, manifest, "");
  EXPECT_NE(md.find("**Modelled remote cost.**"), std::string::npos) << md;
  EXPECT_NE(md.find("remote=model,lock=qspinlock"), std::string::npos) << md;
  EXPECT_EQ(md.find("remote=none,lock=qspinlock,"), std::string::npos) << "a point without the model is not listed";
  EXPECT_NE(md.find("- Expected here: hq's fairness (Jain index over per-CPU operations) is above 0.8 at remote model"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("### holds: hq stays local"), std::string::npos) << md;  // Jain 1 in every record
  const auto plain = parse_scenario(kTwoAxes, "t");
  EXPECT_EQ(report_markdown(plain, summarize(plain, completed_records(plain, [](const Point&) { return 1.0; }), 2),
                            manifest, "")
                .find("Modelled remote cost"),
            std::string::npos);
}

TEST(LabScenario, BadLevelClaimsAreOneLineErrors) {
  const std::string head = "name = \"x\"\n[[axis]]\nname = \"lock\"\nvalues = [\"tas\"]\n[[claim]]\nkind = \"level\"\n"
                           "text = \"c\"\na = \"tas\"\n";
  EXPECT_NE(scenario_error(head + "metric = \"steal_fraction\"\nexpect = \"above\"\n").find("needs 'value'"),
            std::string::npos);
  EXPECT_NE(scenario_error(head + "metric = \"steal_fraction\"\nexpect = \"a>b\"\nvalue = 1\n")
                .find("above, below or between"),
            std::string::npos);
  EXPECT_NE(scenario_error(head + "metric = \"steal_fraction\"\nexpect = \"between\"\nlow = 0.5\nhigh = 0.2\n")
                .find("not below high"),
            std::string::npos);
  EXPECT_NE(scenario_error(head + "metric = \"frobs\"\nexpect = \"above\"\nvalue = 1\n").find("metric 'frobs'"),
            std::string::npos);
  EXPECT_NE(scenario_error(head + "expect = \"above\"\nvalue = 1\n").find("needs 'metric'"), std::string::npos);
  EXPECT_NE(scenario_error(head + "metric = \"steal_fraction\"\nexpect = \"above\"\nvalue = \"x\"\n")
                .find("expected a number"),
            std::string::npos);
  EXPECT_EQ(scenario_error(head + "expect = \"above\"\n").find('\n'), std::string::npos);
}

}  // namespace
}  // namespace lockvisor::lab
