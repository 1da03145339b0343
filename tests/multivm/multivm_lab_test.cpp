// Multi-VM lab points without running anything: [[vm]] tables and per-VM
// axis settings become `run --vm` options, each VM's result becomes its own
// summary row, and bad multi-VM scenarios are one-line errors.
#include <gtest/gtest.h>

#include "vmm/lab/matrix.h"
#include "vmm/lab/presets.h"
#include "vmm/lab/scenario.h"
#include "vmm/lab/settings.h"
#include "vmm/lab/lab_summary.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {
namespace {

constexpr const char* kTwoVms = R"(
name = "two"
repeats = 2
[fixed]
workload = "lockbench"
vcpus = 4
[[vm]]
label = "fair"
[[vm]]
label = "unfair"
lock = "unfair"
no_pv = true
[[axis]]
name = "fair_lock"
values = [{ label = "ticket", fair = { lock = "ticket", cs_ns = 50 } }, { label = "tas", fair.lock = "tas" }]
[[claim]]
text = "unfair is faster"
axis = "vm"
a = "unfair"
b = "fair"
expect = "a>b"
)";

std::string joined(const std::vector<std::string>& args) {
  std::string text;
  for (const auto& a : args) text += (text.empty() ? "" : " ") + a;
  return text;
}

TEST(MultiVmLab, VmTablesAndAxisValuesBecomeVmOptions) {
  const auto s = parse_scenario(kTwoVms, "test");
  ASSERT_EQ(s.vms.size(), 2u);
  const auto points = expand(s);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(joined(run_arguments(points[0].settings)),
            "--workload lockbench --vcpus 4 --vm label=fair,lock=ticket,cs=50 --vm label=unfair,lock=unfair,no-pv=true");
  EXPECT_EQ(joined(run_arguments(points[1].settings)),
            "--workload lockbench --vcpus 4 --vm label=fair,lock=tas --vm label=unfair,lock=unfair,no-pv=true");
}

nlohmann::json vm_entry(const std::string& label, const std::string& outcome, double ops) {
  nlohmann::json result = nullptr;
  if (outcome == "completed")
    result = {{"ops_per_sec", ops}, {"ops_total", ops}, {"cpu_seconds", 1.0}, {"fairness", {{"jain", 1.0}, {"cv", 0.0}}},
              {"latency_ns", {{"p50", 1}, {"p99", 2}, {"p999", 3}, {"max", 4}}}, {"cpu_seconds_window", 1.0},
              {"window_fairness", nullptr}, {"steal_ns", nullptr}, {"vmm", nullptr}};
  return {{"label", label}, {"outcome", outcome}, {"result", result}};
}

TEST(MultiVmLab, EachVmIsItsOwnSummaryRow) {
  const auto s = parse_scenario(kTwoVms, "test");
  std::vector<nlohmann::json> records;
  // Three repeats; in the second the unfair VM timed out: two runs a side
  // remain for the claim (one would be too few for a verdict).
  for (unsigned r = 0; r < 3; ++r)
    for (const char* key : {"fair_lock=ticket", "fair_lock=tas"})
      records.push_back({{"id", std::string(key) + "#r" + std::to_string(r)},
                         {"key", key},
                         {"outcome", r == 1 ? "timeout" : "completed"},
                         {"report",
                          {{"vms",
                            {vm_entry("fair", "completed", 10 + r),
                             vm_entry("unfair", r == 1 ? "timeout" : "completed", 1000)}}}}});
  const auto summary = summarize(s, records, 2);
  ASSERT_EQ(summary.points.size(), 4u);
  EXPECT_EQ(summary.points[0].key, "fair_lock=ticket,vm=fair");
  EXPECT_EQ(summary.points[1].key, "fair_lock=ticket,vm=unfair");
  EXPECT_EQ(*lookup(summary.points[0].settings, "lock"), "ticket");
  EXPECT_EQ(*lookup(summary.points[1].settings, "lock"), "unfair");
  EXPECT_EQ(lookup(summary.points[1].settings, "vm:unfair:lock"), nullptr);
  EXPECT_DOUBLE_EQ(summary.points[0].overcommit, 4.0);  // 8 vCPUs on the 2 host CPUs
  // Per VM: its own outcomes and values.
  EXPECT_EQ(summary.points[0].outcomes.at("completed"), 3u);
  EXPECT_EQ(summary.points[1].outcomes.at("completed"), 2u);
  EXPECT_EQ(summary.points[1].outcomes.at("timeout"), 1u);
  EXPECT_EQ(summary.points[0].values.at("ops_per_sec"), (std::vector<double>{10, 11, 12}));
  ASSERT_EQ(summary.claims.size(), 1u);
  EXPECT_EQ(summary.claims[0].verdict, "holds");
  EXPECT_EQ(summary.claims[0].findings.size(), 2u);
}

TEST(MultiVmLab, BadMultiVmScenariosAreOneLineErrors) {
  auto error_of = [](const std::string& text) {
    try {
      parse_scenario(text, "s.toml");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = "name = \"x\"\n[[axis]]\nname = \"lock\"\nvalues = [\"ticket\"]\n";
  EXPECT_NE(error_of(head + "[[vm]]\nlabel = \"a\"\n[[vm]]\nlabel = \"a\"\n").find("label 'a' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[vm]]\nlabel = \"a\"\n").find("one [[vm]] is no multi-VM point"), std::string::npos);
  EXPECT_NE(error_of(head + "[[vm]]\nlabel = \"a\"\nnative = true\n[[vm]]\nlabel = \"b\"\n").find("native runs no VM"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[vm]]\nlabel = \"a b\"\n[[vm]]\nlabel = \"b\"\n").find("label \"a b\": 1-32 characters"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[vm]]\nlabel = \"a\"\nbogus = 1\n[[vm]]\nlabel = \"b\"\n").find("unknown setting 'bogus'"),
            std::string::npos);
  EXPECT_NE(error_of(head + "[[vm]]\nlabel = \"a\"\n[[vm]]\nlabel = \"b\"\n[[claim]]\ntext = \"t\"\naxis = \"vm\"\n"
                            "a = \"a\"\nb = \"c\"\nexpect = \"a>b\"\n")
                .find("axis 'vm' has no value 'c'"),
            std::string::npos);
}

TEST(MultiVmLab, TwoGuestsPresetParses) {
  const auto* preset = find_preset("two-guests");
  ASSERT_NE(preset, nullptr);
  const auto s = parse_scenario(preset->text, "preset two-guests");
  EXPECT_EQ(s.vms.size(), 2u);
  EXPECT_GE(s.repeats, 5u);
  EXPECT_EQ(s.claims.size(), 3u);
}

}  // namespace
}  // namespace lockvisor::lab
