// Host-relative placements: the words of pcpus/vcpus/vnuma, the contender
// sweep, every preset's dry-run on a 2-CPU host against the lines it printed
// before the words (tests/lab/golden/*.2cpu.txt), the 16-CPU expansions of
// quick and scaling, and points side by side on disjoint CPUs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "vmm/host/cpu_set.h"
#include "vmm/host/host_cpus.h"
#include "vmm/lab/lab.h"
#include "vmm/lab/lab_summary.h"
#include "vmm/lab/matrix.h"
#include "vmm/lab/placement.h"
#include "vmm/lab/presets.h"
#include "vmm/lab/scenario.h"
#include "vmm/lab/side_by_side.h"
#include "vmm/util/error.h"
#include "tests/lab/error_of.h"

namespace lockvisor::lab {
namespace {

using host::resolve_host_cpus;
using host::resolve_vcpus;

const std::vector<int> kTwo = {0, 1};
const std::vector<int> kSixteen = [] {
  std::vector<int> cpus;
  for (int i = 0; i < 16; ++i) cpus.push_back(i);
  return cpus;
}();

TEST(HostCpus, WordsResolveAgainstTheUsableCpus) {
  EXPECT_EQ(resolve_host_cpus("all", kTwo), kTwo);
  EXPECT_EQ(resolve_host_cpus("all", kSixteen), kSixteen);
  EXPECT_EQ(resolve_host_cpus("1cpu", kSixteen), (std::vector<int>{0}));
  EXPECT_EQ(resolve_host_cpus("4cpus", kSixteen), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(resolve_host_cpus("1/2", kSixteen).size(), 8u);
  EXPECT_EQ(resolve_host_cpus("50%", kSixteen).size(), 8u);
  EXPECT_EQ(resolve_host_cpus("1/2", kTwo), (std::vector<int>{0}));
  // Rounded down, at least one.
  EXPECT_EQ(resolve_host_cpus("1/4", kTwo), (std::vector<int>{0}));
  EXPECT_EQ(resolve_host_cpus("3/4", kSixteen).size(), 12u);
  // The larger of two words: a share that never falls below a count.
  EXPECT_EQ(resolve_host_cpus("max(2cpus,1/8)", kTwo), kTwo);
  EXPECT_EQ(resolve_host_cpus("max(2cpus,1/8)", kSixteen), (std::vector<int>{0, 1}));
  EXPECT_EQ(resolve_host_cpus("max(1/8,2cpus)", kSixteen), (std::vector<int>{0, 1}));
  EXPECT_EQ(resolve_host_cpus("max(2cpus,1/4)", kSixteen), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(resolve_host_cpus("max(2cpus,max(1/4,50%))", kSixteen).size(), 8u);
  // The first usable CPUs of a mask with holes (taskset -c 2,5,7).
  EXPECT_EQ(resolve_host_cpus("2cpus", {2, 5, 7}), (std::vector<int>{2, 5}));
  // A bare number is a CPU list, as it always was.
  EXPECT_EQ(resolve_host_cpus("1", kSixteen), (std::vector<int>{1}));
  EXPECT_EQ(resolve_host_cpus("0-1", kSixteen), kTwo);
  EXPECT_EQ(resolve_host_cpus("0,3-4", kSixteen), (std::vector<int>{0, 3, 4}));
}

TEST(HostCpus, BadWordsAreOneLineWithTheAcceptedForms) {
  // Not a word at all: the message lists the accepted forms.
  for (const char* word : {"", "some", "0cpus", "4cpu", "x2", "all,1", "1/2/3", "max(2cpus)", "max(2cpus,1/8", "min(1cpu,all)"}) {
    const auto why = error_of([&] { resolve_host_cpus(word, kSixteen); });
    EXPECT_NE(why.find(host::kHostCpuForms), std::string::npos) << "'" << word << "': " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  // A word out of range, or a list that is no list: one line saying so.
  for (const char* word : {"3/2", "1/0", "0%", "150%", "-1", "1-"}) {
    const auto why = error_of([&] { resolve_host_cpus(word, kSixteen); });
    EXPECT_FALSE(why.empty()) << "'" << word << "' was accepted";
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  EXPECT_NE(error_of([] { resolve_host_cpus("4cpus", kTwo); }).find("asks for 4 CPUs, 2 are usable (0-1)"),
            std::string::npos);
  // Inside max(): each word as on its own, except that a count is a floor;
  // and no CPU list.
  EXPECT_EQ(resolve_host_cpus("max(4cpus,1/8)", kTwo), kTwo);
  EXPECT_EQ(resolve_host_cpus("max(2cpus,1/8)", {5}), (std::vector<int>{5}));
  EXPECT_NE(error_of([] { resolve_host_cpus("max(0-3,1/8)", kSixteen); }).find("not CPU lists"), std::string::npos);
  EXPECT_NE(error_of([] { resolve_host_cpus("max(1cpu,3/2)", kSixteen); }).find("between 0 and 1"), std::string::npos);
}

TEST(HostCpus, VcpusAreACountOrARatioOfTheHostCpus) {
  EXPECT_EQ(resolve_vcpus("3", 2), 3u);
  EXPECT_EQ(resolve_vcpus("1x", 2), 2u);
  EXPECT_EQ(resolve_vcpus("4x", 16), 64u);
  for (const char* word : {"", "x", "0x", "2.5x", "-2", "2y", "99999x"}) {
    const auto why = error_of([&] { resolve_vcpus(word, 2); });
    EXPECT_NE(why.find(host::kVcpuForms), std::string::npos) << "'" << word << "': " << why;
  }
}

TEST(HostCpus, TheVariableDeclaresTheUsableCpus) {
  const char* before = std::getenv(host::kHostCpusVariable);
  const std::string saved = before ? before : "";
  ::setenv(host::kHostCpusVariable, "0-15", 1);
  EXPECT_EQ(host::usable_cpus(), kSixteen);
  ::setenv(host::kHostCpusVariable, "all", 1);
  EXPECT_NE(error_of([] { host::usable_cpus(); }).find("expected a CPU list"), std::string::npos);
  ::unsetenv(host::kHostCpusVariable);
  EXPECT_EQ(host::usable_cpus(), host::allowed_cpus());
  if (before) ::setenv(host::kHostCpusVariable, saved.c_str(), 1);
}

TEST(LabPlacement, PointsResolveTheirWordsAndSayWhatTheyBecame) {
  SettingValues s = {{"vcpus", "2x"}, {"pcpus", "1/2"}};
  const auto terms = resolve_placement(s, kSixteen);
  EXPECT_EQ(*lookup(s, "pcpus"), "0-7");
  EXPECT_EQ(*lookup(s, "vcpus"), "16");
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0], (PlacementTerm{"pcpus", "1/2", "0-7"}));
  EXPECT_EQ(terms[1], (PlacementTerm{"vcpus", "2x", "16"}));
  // Explicit values are no terms and stay as written.
  SettingValues plain = {{"vcpus", "3"}, {"pcpus", "0-1"}};
  EXPECT_TRUE(resolve_placement(plain, kSixteen).empty());
  EXPECT_EQ(plain, (SettingValues{{"vcpus", "3"}, {"pcpus", "0-1"}}));
  // Without pcpus a ratio is of every usable CPU.
  SettingValues unpinned = {{"vcpus", "2x"}};
  resolve_placement(unpinned, kTwo);
  EXPECT_EQ(*lookup(unpinned, "vcpus"), "4");
  // A VM's own words, against the point's CPUs.
  SettingValues vms = {{"pcpus", "all"}, {"vm:a:vcpus", "1x"}, {"vm:b:pcpus", "1cpu"}, {"vm:b:vcpus", "2x"}};
  resolve_placement(vms, kSixteen);
  EXPECT_EQ(*lookup(vms, "vm:a:vcpus"), "16");
  EXPECT_EQ(*lookup(vms, "vm:b:pcpus"), "0");
  EXPECT_EQ(*lookup(vms, "vm:b:vcpus"), "2");
  SettingValues bad = {{"pcpus", "lots"}};
  EXPECT_EQ(error_of([&] { resolve_placement(bad, kTwo); }).rfind("pcpus: host CPUs 'lots'", 0), 0u);
}

TEST(LabPlacement, SharedVirtualNodesBecomeTheExplicitMap) {
  SettingValues s = {{"vcpus", "8"}, {"vnuma", "shared:2"}};
  resolve_placement(s, kTwo);
  EXPECT_EQ(*lookup(s, "vnuma"), "0-3@0-1,4-7@0-1");
  SettingValues wide = {{"vcpus", "1x"}, {"pcpus", "all"}, {"vnuma", "shared:2"}};
  resolve_placement(wide, kSixteen);
  EXPECT_EQ(*lookup(wide, "vnuma"), "0-7@0-15,8-15@0-15");
  EXPECT_EQ(lookup(wide, "pcpus"), nullptr) << "the explicit form names its own CPUs";
  SettingValues two = {{"vcpus", "2"}, {"vnuma", "shared:2"}};
  resolve_placement(two, kTwo);
  EXPECT_EQ(*lookup(two, "vnuma"), "0@0-1,1@0-1");
  SettingValues few = {{"vcpus", "1"}, {"vnuma", "shared:2"}};
  EXPECT_NE(error_of([&] { resolve_placement(few, kTwo); }).find("cannot fill 2 nodes"), std::string::npos);
  // N and the explicit form pass unchanged.
  SettingValues n = {{"vcpus", "4"}, {"pcpus", "all"}, {"vnuma", "2"}};
  EXPECT_EQ(resolve_placement(n, kTwo).size(), 1u);
  EXPECT_EQ(*lookup(n, "vnuma"), "2");
}

TEST(LabPlacement, SweepsCountContendersBelowTheHostsCpus) {
  EXPECT_EQ(sweep_counts(1), (std::vector<unsigned>{}));
  EXPECT_EQ(sweep_counts(2), (std::vector<unsigned>{1}));
  EXPECT_EQ(sweep_counts(16), (std::vector<unsigned>{1, 2, 4, 8}));
  EXPECT_EQ(sweep_counts(24), (std::vector<unsigned>{1, 2, 4, 8, 16}));
  auto s = parse_scenario(find_preset("scaling")->text, "scaling");
  s.host_cpus = kSixteen;
  expand_for_host(s);
  std::vector<std::string> labels;
  for (const auto& v : s.axes.front().values) labels.push_back(v.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"1-on-1", "2-on-2", "4-on-4", "8-on-8", "1:1", "2:1", "4:1", "8:1"}));
  EXPECT_NE(error_of([] {
              parse_scenario("name = \"x\"\n[[axis]]\nname = \"p\"\nvalues = [{ label = \"a\", sweep = \"cpus\", "
                             "vcpus = \"{n}\" }]\n",
                             "x");
            }).find("needs {n}"),
            std::string::npos);
}

// What `lab --dry-run` prints for a preset planned for `host_cpus`.
std::string dry_run(const std::string& preset, const std::string& host_cpus) {
  const auto* p = find_preset(preset);
  if (p == nullptr) return "no preset " + preset;
  LabOptions o;
  o.scenario_text = p->text;
  o.origin = "preset " + preset;
  o.dry_run = true;
  o.host_cpus = host_cpus;
  const auto s = parse_scenario(p->text, o.origin);
  // As `--kernel /boot/vmlinuz` gave it when the golden files were made.
  if (std::find(s.needs.begin(), s.needs.end(), "kernel") != s.needs.end()) o.overrides = {{"kernel", "/boot/vmlinuz"}};
  const auto path = std::filesystem::temp_directory_path() / ("lockvisor-dry-run-" + std::to_string(::getpid()));
  std::fflush(stdout);
  const int saved = ::dup(1);
  std::FILE* out = std::fopen(path.c_str(), "w");
  ::dup2(::fileno(out), 1);
  std::string why;
  try {
    run_lab(o);
  } catch (const Error& e) {
    why = e.what();
  }
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  std::fclose(out);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  return why.empty() ? text.str() : "error: " + why;
}

std::string golden(const std::string& name) {
  std::ifstream in(std::string(LOCKVISOR_LAB_GOLDEN_DIR) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// On a 2-CPU host every preset prints the run lines it printed before its
// placements were host-relative: results stay comparable. (The "#timeline"
// lines are extra traced runs, not results; their trace flags are the lab's
// own, vmm/lab/timelines.h, and the golden files follow them.)
TEST(LabPresets, TwoCpuDryRunsPrintTheLinesOfBefore) {
  std::size_t compared = 0;
  for (const auto& p : presets()) {
    const std::string name(p.name);
    const auto expected = golden(name + ".2cpu.txt");
    if (name == "scaling") continue;  // newer than the words: its expansion is checked below
    ASSERT_FALSE(expected.empty()) << "no tests/lab/golden/" << name << ".2cpu.txt";
    EXPECT_EQ(dry_run(name, "0-1"), expected) << name;
    ++compared;
  }
  EXPECT_GE(compared, 17u);
}

// The annotated reference scenario (docs/lab-example.toml) parses and plans:
// on 2 CPUs its 8-CPU value is left out, on 16 it is there.
TEST(LabPresets, TheAnnotatedExampleScenarioIsValidOnBothSizes) {
  std::ifstream in(std::string(LOCKVISOR_SOURCE_DIR) + "/docs/lab-example.toml");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_FALSE(text.str().empty());
  for (const auto& [cpus, left] : {std::pair{kTwo, 1u}, std::pair{kSixteen, 0u}}) {
    auto s = parse_scenario(text.str(), "docs/lab-example.toml");
    s.host_cpus = cpus;
    EXPECT_FALSE(expand(s).empty());
    expand_for_host(s);
    EXPECT_EQ(s.left_out.size(), left) << cpus.size() << " CPUs";
  }
}

// On 16 CPUs: quick's ratios on an eighth of the host (at least 2 CPUs, so
// that eight points fit side by side), the contender sweep and the ratios
// over every CPU (scaling), the 8- and 16-CPU settings that a 2-CPU host
// leaves out (pvbounded-scale).
TEST(LabPresets, SixteenCpuExpansionsAreTheExpectedOnes) {
  for (const char* name : {"quick", "scaling", "pvbounded-scale"}) {
    const auto expected = golden(std::string(name) + ".16cpu.txt");
    ASSERT_FALSE(expected.empty()) << name;
    EXPECT_EQ(dry_run(name, "0-15"), expected) << name;
  }
  EXPECT_EQ(dry_run("scaling", "0-1"), golden("scaling.2cpu.txt"));
  // The lines that say the ratios, read back: quick's 2:1 is 4 vCPUs on 2 of the 16.
  const auto quick = dry_run("quick", "0-15");
  EXPECT_NE(quick.find("placement=1:1,lock=ticket#r0  lockvisor run --workload lockbench --lock ticket --vcpus 2 "
                       "--pcpus 0-1 "),
            std::string::npos);
  EXPECT_NE(quick.find("placement=2:1,lock=tas#r0  lockvisor run --workload lockbench --lock tas --vcpus 4 --pcpus 0-1 "),
            std::string::npos);
  EXPECT_NE(quick.find("placement=4:1,lock=tas#r0  lockvisor run --workload lockbench --lock tas --vcpus 4 --pcpus 0 "),
            std::string::npos);
  // And the eighth grows with the host: on 64 CPUs 1:1 is 8 vCPUs on 8.
  const auto quick64 = dry_run("quick", "0-63");
  EXPECT_NE(quick64.find("placement=1:1,lock=ticket#r0  lockvisor run --workload lockbench --lock ticket --vcpus 8 "
                         "--pcpus 0-7 "),
            std::string::npos);
  EXPECT_NE(quick64.find("placement=2:1,lock=tas#r0  lockvisor run --workload lockbench --lock tas --vcpus 16 "
                         "--pcpus 0-7 "),
            std::string::npos);
}

// Points whose vCPUs a host-relative word made more than a VM may have are
// left out with their reason, in matrix order and once per key; a count the
// scenario spells out stays (`run` refuses it before any run); a claim that
// selects only such points says "not on this host", one finding per point,
// instead of "no data".
TEST(LabPlacement, PointsBeyondALimitAreLeftOutWithTheirReason) {
  auto s = parse_scenario(R"(name = "limits"
repeats = 2
[fixed]
workload = "lockbench"
[[axis]]
name = "placement"
values = [{ label = "1:1", vcpus = "1x", pcpus = "all" }, { label = "4:1", vcpus = "4x", pcpus = "all" },
          { label = "fixed", vcpus = "600", pcpus = "all" }]
[[axis]]
name = "lock"
values = ["tas", "pvbounded"]
[[claim]]
source = "a test"
text = "pvbounded is faster than tas at 4:1"
a = "pvbounded"
b = "tas"
where = { placement = ["4:1"] }
expect = "a>b"
)",
                          "limits");
  std::vector<int> host(200);
  for (int i = 0; i < 200; ++i) host[i] = i;
  s.host_cpus = host;
  // Every lock serves as many vCPUs as a VM may have, and lockvisor's own
  // limit holds the 4:1 points' 800: nothing is left out.
  EXPECT_TRUE(expand_matrix(s).left_out.empty());
  // A KVM that allows fewer vCPUs than lockvisor (lab.json records it).
  s.vcpu_limit = 512;
  auto e = expand_matrix(s);
  std::vector<std::string> ids;
  for (const auto& p : e.points) ids.push_back(p.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"placement=1:1,lock=tas#r0", "placement=1:1,lock=pvbounded#r0",
                                           "placement=fixed,lock=tas#r0", "placement=fixed,lock=pvbounded#r0",
                                           "placement=1:1,lock=tas#r1", "placement=1:1,lock=pvbounded#r1",
                                           "placement=fixed,lock=tas#r1", "placement=fixed,lock=pvbounded#r1"}))
      << "600 vCPUs spelled out stay";
  ASSERT_EQ(e.left_out.size(), 2u);
  EXPECT_EQ(e.left_out[0].key, "placement=4:1,lock=tas");
  EXPECT_EQ(e.left_out[0].vcpus, 800u);
  EXPECT_EQ(e.left_out[0].why, "a VM has at most 512 vCPUs");
  EXPECT_EQ(e.left_out[1].key, "placement=4:1,lock=pvbounded");
  // Native points are host threads: a KVM's limit is not theirs.
  auto native = s;
  assign(native.fixed, "native", "true");
  EXPECT_TRUE(expand_matrix(native).left_out.empty());
  // The points keep their places in the whole matrix (shards split it).
  ASSERT_EQ(e.points.size(), 8u);
  EXPECT_EQ(e.points[2].key, "placement=fixed,lock=tas");
  EXPECT_EQ(e.points[2].index, 4u);

  const auto summary = summarize(s, {}, 200, std::nullopt);
  ASSERT_EQ(summary.claims.size(), 1u);
  EXPECT_EQ(summary.claims[0].verdict, "not on this host");
  ASSERT_EQ(summary.claims[0].findings.size(), 2u);
  EXPECT_EQ(summary.claims[0].findings[0], "placement=4:1,lock=tas: not on this host (800 vCPUs; a VM has at most 512 vCPUs)");

  // Every point beyond a limit: one line, and how to plan for fewer CPUs.
  auto only = parse_scenario("name = \"only\"\n[fixed]\nworkload = \"lockbench\"\nlock = \"pvbounded\"\n"
                             "[[axis]]\nname = \"placement\"\nvalues = [{ label = \"4:1\", vcpus = \"4x\" }]\n",
                             "only");
  only.host_cpus = host;
  only.vcpu_limit = 512;
  EXPECT_NE(error_of([&] { expand_matrix(only); })
                .find("on 200 host CPUs every point is beyond a limit (the first, placement=4:1: 800 vCPUs, and a VM "
                      "has at most 512 vCPUs); plan it for fewer CPUs (taskset -c 0-99 lockvisor lab ...)"),
            std::string::npos);
}

Point movable_point(const std::string& id, const std::string& pcpus_word, const std::vector<int>& host_cpus) {
  Point p;
  p.id = id;
  p.settings = {{"vcpus", "1x"}, {"pcpus", pcpus_word}};
  p.terms = resolve_placement(p.settings, host_cpus);
  return p;
}

// Side by side: no CPU is ever given to two running points, every point runs
// once, a moved point's arguments name its CPUs, and a point without pcpus
// has the host to itself.
TEST(LabSideBySide, RunningPointsNeverShareACpu) {
  const std::vector<int> host = {0, 1, 2, 3, 4, 5};
  std::vector<Point> points;
  for (int i = 0; i < 12; ++i) points.push_back(movable_point("p" + std::to_string(i), i % 3 ? "2cpus" : "1cpu", host));
  Point whole;
  whole.id = "unpinned";
  whole.settings = {{"vcpus", "2"}};
  points.insert(points.begin() + 5, whole);
  Point fixed;
  fixed.id = "fixed";
  fixed.settings = {{"vcpus", "2"}, {"pcpus", "4-5"}};
  points.push_back(fixed);
  std::vector<const Point*> todo;
  for (const auto& p : points) todo.push_back(&p);

  std::mutex mutex;
  std::multiset<int> busy;
  bool overlap = false, unpinned_alone = true;
  std::size_t max_running = 0, running = 0;
  std::map<std::string, std::string> ran_on;
  const auto run = [&](const Point&, const std::vector<std::string>& args) {
    std::vector<int> cpus;
    const auto at = std::find(args.begin(), args.end(), "--pcpus");
    if (at != args.end()) cpus = host::parse_cpu_list(*(at + 1));
    {
      std::lock_guard lock(mutex);
      if (at == args.end()) unpinned_alone = unpinned_alone && running == 0;
      for (int cpu : cpus) overlap = overlap || busy.count(cpu) > 0;
      busy.insert(cpus.begin(), cpus.end());
      max_running = std::max(max_running, ++running);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    {
      std::lock_guard lock(mutex);
      for (int cpu : cpus) busy.erase(busy.find(cpu));
      --running;
    }
    PointRun r;
    r.outcome = "completed";
    return r;
  };
  const auto finished = [&](const Point& p, const PointRun&, const std::vector<int>& cpus) {
    EXPECT_TRUE(ran_on.emplace(p.id, host::format_cpu_list(cpus)).second) << p.id << " reported twice";
  };
  ASSERT_TRUE(run_side_by_side(todo, host, 3, run, finished));
  EXPECT_FALSE(overlap);
  EXPECT_TRUE(unpinned_alone);
  EXPECT_LE(max_running, 3u);
  EXPECT_EQ(ran_on.size(), points.size());
  EXPECT_EQ(ran_on["fixed"], "4-5");
  EXPECT_EQ(ran_on["unpinned"], "0-5");
  for (const auto& [id, cpus] : ran_on) {
    if (id == "unpinned" || id == "fixed") continue;
    EXPECT_EQ(host::parse_cpu_list(cpus).size(), std::stoi(id.substr(1)) % 3 ? 2u : 1u) << id;
  }
  // One at a time: every point on its planned CPUs.
  ran_on.clear();
  ASSERT_TRUE(run_side_by_side(todo, host, 1, run, finished));
  EXPECT_EQ(ran_on["p1"], "0-1");
  EXPECT_EQ(ran_on["p3"], "0");
}

// A moved point keeps its planned CPUs' place in the host's topology: k CPUs
// start at a multiple of k rounded up to a power of two, never on the lowest
// free ones across such a boundary. On 8 CPUs: a 1-CPU point holds CPU 0, so
// the 2-CPU point after it gets 2-3, not 1-2; the next 1-CPU point gets 1;
// a 3-CPU point gets 4-6 (its block is 4 wide); a 4-CPU point waits for 0-3
// or 4-7 whole. The first four run until all four have started (the event,
// not a time), so where each went is decided by the blocks alone.
TEST(LabSideBySide, AMovedPointKeepsItsPlannedCpusPlaceInAnAlignedBlock) {
  const std::vector<int> host = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<Point> points = {movable_point("a", "1cpu", host), movable_point("b", "2cpus", host),
                               movable_point("c", "1cpu", host), movable_point("d", "3cpus", host),
                               movable_point("e", "4cpus", host)};
  std::vector<const Point*> todo;
  for (const auto& p : points) todo.push_back(&p);
  std::mutex mutex;
  std::condition_variable all_started;
  std::size_t started = 0;
  std::size_t together = 4;  // the first `together` points run until all of them have started
  const auto run = [&](const Point&, const std::vector<std::string>&) {
    std::unique_lock lock(mutex);
    if (++started <= together) {
      all_started.notify_all();
      all_started.wait(lock, [&] { return started >= together; });
    }
    PointRun r;
    r.outcome = "completed";
    return r;
  };
  std::map<std::string, std::string> ran_on;
  const auto finished = [&](const Point& p, const PointRun&, const std::vector<int>& cpus) {
    ran_on[p.id] = host::format_cpu_list(cpus);
  };
  ASSERT_TRUE(run_side_by_side(todo, host, 5, run, finished));
  EXPECT_EQ(ran_on["a"], "0");
  EXPECT_EQ(ran_on["b"], "2-3");
  EXPECT_EQ(ran_on["c"], "1");
  EXPECT_EQ(ran_on["d"], "4-6");
  EXPECT_TRUE(ran_on["e"] == "0-3" || ran_on["e"] == "4-7") << ran_on["e"];
  // Blocks count the usable CPUs, not CPU numbers: on CPUs 1,3,5,7 the
  // 2-CPU point after a 1-CPU one gets the third and fourth, 5 and 7 (the
  // two run until both have started: the first must still hold CPU 1).
  const std::vector<int> odd = {1, 3, 5, 7};
  points = {movable_point("a", "1cpu", odd), movable_point("b", "2cpus", odd)};
  todo = {&points[0], &points[1]};
  started = 0;
  together = 2;
  ran_on.clear();
  ASSERT_TRUE(run_side_by_side(todo, odd, 2, run, finished));
  EXPECT_EQ(ran_on["a"], "1");
  EXPECT_EQ(ran_on["b"], "5,7");
}

// quick on 16 CPUs with the default --jobs: its 1:1 and 2:1 points take 2
// CPUs each, so eight of them run at once and fill the host, without sharing
// a CPU. Each of the first eight runs waits until all eight are running (the
// event, not a time), so a scheduler that started fewer would hang the test.
TEST(LabSideBySide, QuickFillsSixteenCpusWithEightPointsAtOnce) {
  const auto* preset = find_preset("quick");
  ASSERT_NE(preset, nullptr);
  auto s = parse_scenario(preset->text, "preset quick");
  s.host_cpus = kSixteen;
  const auto points = expand(s);
  std::vector<const Point*> todo;
  for (const auto& p : points) todo.push_back(&p);
  const unsigned jobs = default_jobs(kSixteen.size());
  ASSERT_EQ(jobs, 8u);

  std::mutex mutex;
  std::condition_variable all_started;
  std::multiset<int> busy;
  bool overlap = false;
  std::size_t started = 0, running = 0, max_running = 0, max_busy = 0;
  const auto run = [&](const Point&, const std::vector<std::string>& args) {
    const auto at = std::find(args.begin(), args.end(), "--pcpus");
    const auto cpus = host::parse_cpu_list(*(at + 1));
    std::unique_lock lock(mutex);
    for (int cpu : cpus) overlap = overlap || busy.count(cpu) > 0;
    busy.insert(cpus.begin(), cpus.end());
    max_busy = std::max(max_busy, busy.size());
    max_running = std::max(max_running, ++running);
    if (++started <= jobs) {
      all_started.notify_all();
      all_started.wait(lock, [&] { return started >= jobs; });
    }
    for (int cpu : cpus) busy.erase(busy.find(cpu));
    --running;
    PointRun r;
    r.outcome = "completed";
    return r;
  };
  std::size_t finished_points = 0;
  const auto finished = [&](const Point&, const PointRun&, const std::vector<int>&) { ++finished_points; };
  ASSERT_TRUE(run_side_by_side(todo, kSixteen, jobs, run, finished));
  EXPECT_FALSE(overlap);
  EXPECT_EQ(max_running, 8u);
  EXPECT_EQ(max_busy, 16u);
  EXPECT_EQ(finished_points, points.size());
}

TEST(LabSideBySide, TheDefaultIsOneBelowEightCpusThenHalfOfThem) {
  EXPECT_EQ(default_jobs(1), 1u);
  EXPECT_EQ(default_jobs(2), 1u);
  EXPECT_EQ(default_jobs(kSideBySideMinCpus - 1), 1u);
  EXPECT_EQ(default_jobs(16), 8u);
}

}  // namespace
}  // namespace lockvisor::lab
