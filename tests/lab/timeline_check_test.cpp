// The lab's trace-check of a timeline (vmm/lab/timeline_check.h): run once
// on the trace, kept beside it as NAME.check.json and NAME.check.txt, read
// back from the JSON after that, and rendered into report.md's lines; a
// trace that cannot be read costs only its table. The trace is
// tests/trace/sample_trace.h's: with a fixed 1 ms bound, one wait of 5 ms,
// one steal past it after its head was due (a violation) and one while the
// head was preempted.
#include "vmm/lab/timeline_check.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "locks/pvbounded_tuning.h"
#include "tests/trace/sample_trace.h"

namespace lockvisor::lab {
namespace {
namespace fs = std::filesystem;
constexpr std::uint64_t kMs = 1'000'000;

class TimelineCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lockvisor-timeline-check-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "timelines");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  fs::path dir_;
};

TEST_F(TimelineCheck, JudgesTheTraceOnceKeepsBothFilesAndRendersTheVerdictAndPaths) {
  write("timelines/a.json", trace::sample_trace_json("lock=pvbounded pvb_bound_max_us=1"));
  const auto check = timeline_check(dir_, "timelines/a.json");
  ASSERT_TRUE(check.is_object()) << check.dump();
  EXPECT_TRUE(fs::exists(dir_ / "timelines/a.check.json"));
  ASSERT_TRUE(fs::exists(dir_ / "timelines/a.check.txt"));
  EXPECT_EQ(check["bound"]["violations"], 1u);
  EXPECT_EQ(check["bound"]["bound_ns"], 1 * kMs);
  // The text is trace-check's own.
  std::ifstream text(dir_ / "timelines/a.check.txt");
  const std::string body((std::istreambuf_iterator<char>(text)), {});
  EXPECT_NE(body.find("lock 0 time: 3 acquisitions"), std::string::npos) << body;

  const auto md = timeline_check_markdown(check, "timelines/a.json");
  EXPECT_NE(md.find("[text](timelines/a.check.txt), [JSON](timelines/a.check.json)"), std::string::npos) << md;
  EXPECT_NE(md.find("T = 1.00 ms: 1 wait longer than T, 1 checked: **1 bypass in 1 wait breaks the invariant**"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("merged"), std::string::npos) << md;
  EXPECT_NE(md.find("- Lock 0: 3 acquisitions"), std::string::npos) << md;
  for (const char* row : {"  | reserved | 1 (33.3 %) |", "  | steal | 1 (33.3 %) |", "  | fast | 1 (33.3 %) |"})
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
  EXPECT_EQ(md.find("NUMA bound"), std::string::npos) << "not a NUMA lock:\n" << md;

  // Kept: a second look reads the JSON, not the trace (which is now junk).
  write("timelines/a.json", "not a trace");
  EXPECT_EQ(timeline_check(dir_, "timelines/a.json"), check);
}

TEST_F(TimelineCheck, WithinTheBoundItSaysSoAndALockWithoutTheOracleGetsOnlyItsPaths) {
  // Judged against the lock's default T_max, longer than every wait of the sample: nothing to judge.
  write("timelines/adaptive.json", trace::sample_trace_json("lock=pvbounded"));
  const auto md = timeline_check_markdown(timeline_check(dir_, "timelines/adaptive.json"), "timelines/adaptive.json");
  char want[64];
  std::snprintf(want, sizeof want, "T = %.2f ms: no wait longer than T\n", locks::pvb::kDefaultBoundMaxUs / 1000.0);
  EXPECT_NE(md.find(want), std::string::npos) << md;
  write("timelines/tas.json", trace::sample_trace_json("lock=tas"));
  const auto tas = timeline_check_markdown(timeline_check(dir_, "timelines/tas.json"), "timelines/tas.json");
  EXPECT_EQ(tas.find("bound oracle"), std::string::npos) << tas;
  EXPECT_NE(tas.find("- Lock 0: 3 acquisitions"), std::string::npos) << tas;
}

// What the report says when the oracle could not look (the acquisitions of a
// merged trace, a wait reaching outside the window) is never "no violation".
TEST(TimelineCheckMarkdown, AWaitNobodyCheckedIsNoVerdictAndMergedAcquisitionsAreSaid) {
  nlohmann::json check = {{"merged_slices", 0},
                          {"bound",
                           {{"judged", true}, {"bound_ns", 16000000}, {"waits", 900}, {"long_waits", 3},
                            {"checked", 2}, {"violations", 0}, {"waits_with_violation", 0}}},
                          {"locks", nlohmann::json::array()}};
  auto md = timeline_check_markdown(check, "timelines/x.json");
  EXPECT_NE(md.find("T = 16.00 ms: 3 waits longer than T, 2 checked (the text says why not the others): no bypass "
                    "breaks the invariant"),
            std::string::npos)
      << md;
  // Would-be violations that the trace's guest clock cannot decide are not "no bypass".
  check["bound"]["by_reason"] = {{"clock-unsure", 7}};
  md = timeline_check_markdown(check, "timelines/x.json");
  EXPECT_NE(md.find("2 checked (the text says why not the others): none shown to break the invariant; 7 would by a "
                    "guest clock that cannot decide them (clock-unsure)"),
            std::string::npos)
      << md;
  check["bound"]["checked"] = 0;
  check["merged_slices"] = 41;
  md = timeline_check_markdown(check, "timelines/x.json");
  EXPECT_NE(md.find("3 waits longer than T, **none checked** (the text says why)\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("no bypass"), std::string::npos) << md;
  EXPECT_NE(md.find("merged runs of short acquisitions into 41 slices"), std::string::npos) << md;
  EXPECT_NE(md.find("- No lock has two whole acquisitions in the trace's window to tabulate\n"), std::string::npos)
      << md;
}

TEST_F(TimelineCheck, AnUnreadableTraceCostsOnlyItsTableInOneLine) {
  write("timelines/bad.json", "{\"traceEvents\": [");
  const auto check = timeline_check(dir_, "timelines/bad.json");
  ASSERT_TRUE(check.is_string()) << check.dump();
  EXPECT_FALSE(fs::exists(dir_ / "timelines/bad.check.json"));
  const auto md = timeline_check_markdown(check, "timelines/bad.json");
  EXPECT_EQ(md.rfind("- No trace-check: ", 0), 0u) << md;
  EXPECT_NE(md.find("bad.json"), std::string::npos) << md;
  EXPECT_EQ(md.find('\n'), md.size() - 1) << md;
  // A missing trace says so too.
  EXPECT_TRUE(timeline_check(dir_, "timelines/none.json").is_string());
}

}  // namespace
}  // namespace lockvisor::lab
