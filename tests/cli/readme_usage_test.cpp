// Every command of README.md's Usage block, run once with small parameters,
// so that a documented command that breaks fails here rather than for a
// reader. ReadmeUsage.EveryUsageCommandIsCovered fails when the Usage block
// gains a command this list does not run; the ReadmeUsageKvm cases boot
// guests (label kvm), ReadmeUsage.* ones do not.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/kvm_required.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code;
  std::string output;
};

// The scratch directory of case `name`: this process's own, so that two
// test runs on one machine (two checkouts) never remove each other's.
fs::path case_dir(const std::string& name) {
  return fs::temp_directory_path() / ("lockvisor-readme-" + std::to_string(::getpid()) + "-" + name);
}

// Runs `script` with sh; LV is the lockvisor binary, D a fresh scratch directory.
Outcome shell(const std::string& name, const std::string& script) {
  const fs::path dir = case_dir(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string command =
      "cd '" + dir.string() + "' && LV='" + LOCKVISOR_BINARY + "' D='" + dir.string() + "' sh -c '" + script + "' 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  while (pipe != nullptr && std::fgets(buffer.data(), buffer.size(), pipe)) output += buffer.data();
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return nlohmann::json::parse(in);
}

const char* const kScenario =
    "printf \"name = \\\"smoke\\\"\\nrepeats = 1\\n[fixed]\\nworkload = \\\"lockbench\\\"\\nduration_s = 0.05\\n"
    "vcpus = 2\\npcpus = \\\"0\\\"\\n[[axis]]\\nname = \\\"lock\\\"\\nvalues = [\\\"ticket\\\", \\\"tas\\\"]\\n\" > s.toml";

struct UsageCommand {
  const char* readme;  // the command as the Usage block writes it (up to its description)
  const char* name;    // the test's name
  bool boots;          // needs /dev/kvm
  std::string script;  // the command with small parameters ($LV: lockvisor)
};

// How gtest (and so ctest, whose test names carry it) shows a case's
// parameter: the README's command, not a dump of the struct's bytes. The
// script is in a failure's message.
void PrintTo(const UsageCommand& c, std::ostream* os) { *os << c.readme; }

std::vector<UsageCommand> usage_commands() {
  const std::string scenario = kScenario;
  return {
      {"lockvisor doctor", "doctor", true, "$LV doctor"},
      {"lockvisor conformance [--backend B] [--json F]", "conformance", true,
       "$LV conformance --pingpong-rounds 2000 --json c.json"},
      {"lockvisor run [options]", "run", true,
       "$LV run --workload lockbench --lock pvqspinlock --vcpus 2 --iterations 2000 --json r.json"},
      {"lockvisor run --native [options]", "run_native", false,
       "$LV run --native --workload lockbench --lock ticket --vcpus 2 --iterations 2000 --json r.json"},
      {"lockvisor run --vm SPEC --vm SPEC ...", "run_vm", true,
       "$LV run --workload lockbench --vcpus 2 --pcpus 0 --duration 0.05 --vm label=fair,lock=ticket "
       "--vm label=unfair,lock=unfair --hogs 1 --json r.json"},
      {"lockvisor run ... --inject SPEC", "run_inject", true,
       "$LV run --workload lockbench --vcpus 2 --iterations 20000 --inject periodic:vcpu=0,every=20ms,for=2ms --json r.json"},
      {"lockvisor run ... --trace FILE", "run_trace", true,
       "$LV run --workload lockbench --vcpus 2 --duration 0.05 --trace t.json --trace-window worst-wait"},
      // Booting a kernel needs hardware KVM or the nested machine with one
      // CPU (tools/linux-guest/conformance.sh boots Debian's kernels there,
      // in CI's nested step); here the command is checked to be understood:
      // on PVM it is refused as such, elsewhere a file that is no kernel is.
      // The oracle on a real trace: it works if it judges every long wait
      // (exit 0, or 1 when it finds the invariant broken: a finding, not a
      // failure of the command) and ends with its summary.
      {"lockvisor trace-check FILE [--bound-us T]", "trace_check", true,
       "$LV run --workload lockbench --lock pvbounded --vcpus 4 --pcpus 0 --duration 0.1 --trace t.json "
       "--trace-window worst-wait > run.log && $LV trace-check t.json --bound-us 1000 > check.txt; rc=$?; cat check.txt; "
       "[ $rc -le 1 ] && grep -q \"^trace-check: pvbounded, T = 1000 us\" check.txt"},
      {"lockvisor run --kernel FILE [options]", "run_kernel", false,
       "head -c 4096 /dev/zero > notakernel; out=$($LV run --kernel notakernel --vcpus 2 --workload futex-hash 2>&1); "
       "rc=$?; echo \"$out\"; [ $rc -eq 2 ] && if $LV doctor 2>/dev/null | grep -q \"^KVM kind *: PVM\"; then "
       "echo \"$out\" | grep -q \"cannot run on this PVM host\"; else echo \"$out\" | grep -q \"not a Linux bzImage\"; fi"},
      // The Linux case group, likewise without booting: on PVM refused as
      // such; elsewhere its one case that boots nothing runs.
      {"lockvisor conformance --linux KERNEL [--linux-cloud K]", "conformance_linux", false,
       "head -c 4096 /dev/zero > notakernel; out=$($LV conformance --linux notakernel --filter truncated 2>&1); "
       "rc=$?; echo \"$out\"; if $LV doctor 2>/dev/null | grep -q \"^KVM kind *: PVM\"; then [ $rc -eq 2 ] && "
       "echo \"$out\" | grep -q \"cannot run on this PVM host\"; else [ $rc -eq 0 ] && "
       "echo \"$out\" | grep -q \"PASS truncated-kernel-refused\"; fi"},
      {"lockvisor locks", "locks", false, "$LV locks"},
      {"lockvisor bench [--startup [--startup-vcpus LIST]] [--contended] [--json F] [--image F]", "bench", true,
       "$LV bench --repeat 1 --kick-rounds 8 --lock-runs 1 --lock-iterations 1000 --contended "
       "--contended-seconds 0.02 --json b.json && $LV bench --startup --startup-vcpus 2,1 --repeat 1"},
      {"lockvisor lab --preset NAME | --scenario F --out DIR [--resume] [--native] [--shard I/N] [--jobs N]", "lab", true,
       scenario + " && $LV lab --scenario s.toml --out lab && $LV lab --scenario s.toml --out lab --resume && "
                  "$LV lab --scenario s.toml --jobs 2 --out lab2"},
      {"lockvisor lab ... --set NAME=VALUE | --kernel FILE", "lab_set", true,
       scenario + " && $LV lab --scenario s.toml --set seed=7 --set duration_s=0.02 --out lab"},
      {"lockvisor linux initramfs --out F | report LOG", "linux_parts", false,
       "$LV linux initramfs --out init.cpio --workload futex-hash --duration 1 > cmdline && "
       "grep -q \"lockvisor.workload=futex-hash lockvisor.duration=1.000\" cmdline && [ -s init.cpio ] && "
       "$LV linux report " LOCKVISOR_SOURCE_DIR "/tests/linux/data/qemu-tcg-debian-6.1-lockref.console --json q.json"},
      {"lockvisor lab merge OUT IN...", "lab_merge", false,
       scenario + " && $LV lab --scenario s.toml --native --shard 1/2 --out s1 && "
                  "$LV lab --scenario s.toml --native --shard 2/2 --out s2 && $LV lab merge m s1 s2"},
      {"lockvisor lab compare BASE OTHER", "lab_compare", false,
       scenario + " && $LV lab --scenario s.toml --native --out a && $LV lab --scenario s.toml --native --jobs 2 "
                  "--out b && $LV lab compare a b > c.md; rc=$?; cat c.md; [ $rc -le 1 ]"},
      {"lockvisor ctl SOCK COMMAND [ARGS]", "ctl", true,
       "$LV run --workload lockbench --vcpus 2 --duration 600 --api api.sock > run.log 2>&1 & pid=$!; "
       "while [ ! -S api.sock ] && kill -0 $pid 2>/dev/null; do sleep 0.05; done; "
       "$LV ctl api.sock stats; rc=$?; kill -INT $pid; wait $pid; run=$?; cat run.log; [ $rc -eq 0 ] && [ $run -eq 130 ]"},
  };
}

// The commands of the Usage block: the lines of its first ```text block
// that start with "lockvisor ", each up to the two spaces before its
// description, or, for a command that runs into it, up to the column where
// the descriptions start.
std::vector<std::string> readme_usage_commands() {
  std::ifstream in(std::string(LOCKVISOR_SOURCE_DIR) + "/README.md");
  EXPECT_TRUE(in) << "README.md not found under " << LOCKVISOR_SOURCE_DIR;
  std::vector<std::string> commands;
  std::string line;
  bool in_usage = false, in_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_usage = line == "## Usage";
    if (!in_usage) continue;
    if (line.rfind("```", 0) == 0) {
      if (in_block) break;  // the first block of the section is the one
      in_block = true;
      continue;
    }
    if (!in_block || line.rfind("lockvisor ", 0) != 0) continue;
    constexpr std::size_t kDescriptionColumn = 38;
    auto end = line.find("  ");
    if (end == std::string::npos) end = std::min(line.size(), kDescriptionColumn);
    while (end > 0 && line[end - 1] == ' ') --end;
    commands.push_back(line.substr(0, end));
  }
  return commands;
}

TEST(ReadmeUsage, EveryUsageCommandIsCovered) {
  const auto commands = readme_usage_commands();
  ASSERT_GE(commands.size(), 10u) << "the Usage block was not found in README.md";
  std::set<std::string> covered;
  for (const auto& c : usage_commands()) covered.insert(c.readme);
  for (const auto& c : commands) {
    EXPECT_TRUE(covered.count(c)) << "README.md's Usage block has '" << c
                                  << "', which tests/cli/readme_usage_test.cpp does not run";
  }
  // And no entry here is stale (a command the README no longer documents).
  const std::set<std::string> documented(commands.begin(), commands.end());
  for (const auto& c : covered) {
    EXPECT_TRUE(documented.count(c)) << "'" << c << "' is no longer in README.md";
  }
}

class UsageCase : public ::testing::TestWithParam<UsageCommand> {};

void run_case(const UsageCommand& c) {
  const auto o = shell(c.name, c.script);
  EXPECT_EQ(o.exit_code, 0) << c.readme << "\n$ " << c.script << "\n" << o.output;
  const fs::path dir = case_dir(c.name);
  if (o.exit_code != 0) return;
  // What each command leaves, read back (beyond its exit code).
  const std::string name = c.name;
  if (name == "conformance") {
    EXPECT_FALSE(read_json(dir / "c.json").empty());
  } else if (name == "run" || name == "run_native" || name == "run_inject") {
    EXPECT_GT(read_json(dir / "r.json")["ops_total"].get<std::uint64_t>(), 0u) << o.output;
  } else if (name == "run_vm") {
    EXPECT_EQ(read_json(dir / "r.json")["vms"].size(), 2u);
  } else if (name == "run_trace") {
    EXPECT_TRUE(read_json(dir / "t.json").contains("traceEvents"));
  } else if (name == "lab") {
    EXPECT_TRUE(fs::exists(dir / "lab" / "summary.md"));
  } else if (name == "lab_set") {
    const auto manifest = read_json(dir / "lab" / "lab.json");
    EXPECT_EQ(manifest["overrides"], nlohmann::json::parse(R"([["seed", "7"], ["duration_s", "0.02"]])"));
    for (const auto& line : read_lines(dir / "lab" / "results.jsonl"))
      EXPECT_EQ(nlohmann::json::parse(line)["settings"]["seed"], "7");
  } else if (name == "linux_parts") {
    EXPECT_GT(read_json(dir / "q.json")["ops_per_sec"].get<double>(), 0.0);
  } else if (name == "lab_compare") {
    EXPECT_NE(o.output.find("medians of the other lab inside the base's 95% interval"), std::string::npos) << o.output;
  } else if (name == "lab_merge") {
    EXPECT_TRUE(fs::exists(dir / "m" / "summary.csv"));
  } else if (name == "bench") {
    const auto startup = read_json(dir / "b.json")["startup_ms"];
    EXPECT_GT(startup["first_entry"].get<double>(), 0.0);
    EXPECT_GT(startup["floor"].get<double>(), 0.0);
    EXPECT_TRUE(startup["page_faults"]["build"].is_number()) << startup.dump();
    EXPECT_TRUE(startup["page_faults"]["floor"].is_number()) << startup.dump();
    const auto forms = read_json(dir / "b.json")["release_forms_ns"];
    for (const char* form : {"byte_store", "locked_and", "word_store"})
      EXPECT_GT(forms[form].get<double>(), 0.0) << forms.dump();
  } else if (name == "locks") {
    EXPECT_NE(o.output.find("pvqspinlock"), std::string::npos);
  }
  fs::remove_all(dir);  // kept only when the command failed, to look at
}

class ReadmeUsage : public UsageCase {};
class ReadmeUsageKvm : public UsageCase {};

TEST_P(ReadmeUsage, Runs) { run_case(GetParam()); }
TEST_P(ReadmeUsageKvm, Runs) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  run_case(GetParam());
}

std::vector<UsageCommand> select(bool boots) {
  std::vector<UsageCommand> out;
  for (auto& c : usage_commands())
    if (c.boots == boots) out.push_back(c);
  return out;
}
std::string case_name(const ::testing::TestParamInfo<UsageCommand>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Commands, ReadmeUsage, ::testing::ValuesIn(select(false)), case_name);
INSTANTIATE_TEST_SUITE_P(Commands, ReadmeUsageKvm, ::testing::ValuesIn(select(true)), case_name);

// `bench --knobs` (documented below the Usage block, with its table): both
// legs run, every cell has a positive median. The lock leg runs 4 vCPUs on
// one host CPU for a wall-clock window: at 20 ms, on a host busy with other
// work, the vCPUs' threads sometimes did not run inside the window at all
// (0 operations, 5 ms of CPU for all four), so each run is 0.25 s.
TEST(ReadmeUsageKvmKnobs, BenchKnobsRunsBothLegs) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  (void)kvm;
  const auto o = shell("knobs", "$LV bench --knobs --knobs-repeats 1 --knobs-seconds 0.25 --knobs-rounds 50 --json k.json");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const auto j = read_json(case_dir("knobs") / "k.json");
  std::set<std::string> workloads;
  for (const auto& cell : j["cells"]) {
    workloads.insert(cell["workload"].get<std::string>());
    EXPECT_GT(cell["median"].get<double>(), 0) << cell.dump();
  }
  EXPECT_EQ(workloads, (std::set<std::string>{"pingpong", "pvqspinlock"}));
  fs::remove_all(case_dir("knobs"));
}

}  // namespace
