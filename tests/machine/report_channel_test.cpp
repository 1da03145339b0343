// The report channel without a VM (vmm/machine/report_channel.h): decoding
// hostile Ucalls out of a byte span, the per-VM limits, O(log n) CASE_END,
// and the text rules every guest string goes through (guest_text.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lockvisor/abi/ucall.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/util/guest_text.h"
#include "vmm/machine/report_channel.h"

namespace lockvisor::machine {
namespace {
namespace abi = lockvisor::abi;
using Kind = UcallAction::Kind;

constexpr std::uint64_t kSlot = 0x1000;     // where the tests put their Ucall
constexpr std::uint64_t kArrayAt = 0x8000;  // and arrays

class ReportChannel : public ::testing::Test {
 protected:
  std::vector<std::byte> memory_ = std::vector<std::byte>(1 << 20);
  GuestLimits limits_;

  std::span<const std::byte> memory() const { return memory_; }

  abi::Ucall& slot(abi::UcallType type, const std::string& text = "", std::uint64_t at = kSlot) {
    auto* u = reinterpret_cast<abi::Ucall*>(memory_.data() + at);
    std::memset(u, 0, sizeof *u);
    u->magic = abi::kUcallMagic;
    u->type = type;
    std::memcpy(u->text, text.data(), std::min<std::size_t>(text.size(), sizeof u->text));
    return *u;
  }
  UcallAction send(GuestReport& report, abi::UcallType type, const std::string& text = "", std::uint64_t a0 = 0,
                   std::uint64_t a1 = 0) {
    auto& u = slot(type, text);
    u.args[0] = a0;
    u.args[1] = a1;
    return report.handle(memory(), kSlot);
  }
};

TEST_F(ReportChannel, StructuresOutsideMemoryAreRefusedOverflowSafely) {
  GuestBudget budget(limits_);
  GuestReport report(budget);
  const std::uint64_t size = memory_.size();
  for (const std::uint64_t gpa : {size, size - 8, size - sizeof(abi::Ucall) + 1, ~std::uint64_t{0} - 16,
                                  ~std::uint64_t{0}}) {
    const auto action = report.handle(memory(), gpa);
    EXPECT_EQ(action.kind, Kind::kGuestError) << gpa;
    EXPECT_NE(action.text.find("outside guest memory"), std::string::npos) << action.text;
  }
  slot(abi::UcallType::kDone, "", size - sizeof(abi::Ucall));
  EXPECT_EQ(report.handle(memory(), size - sizeof(abi::Ucall)).kind, Kind::kDone) << "the last fitting address";
}

TEST_F(ReportChannel, BadMagicAndUnknownTypes) {
  GuestBudget budget(limits_);
  GuestReport report(budget);
  slot(abi::UcallType::kPrint, "x").magic = 0x1234;
  EXPECT_NE(report.handle(memory(), kSlot).text.find("bad magic"), std::string::npos);
  for (std::uint32_t type : {0u, 10u, 99u, 0xFFFFFFFFu}) {
    slot(static_cast<abi::UcallType>(type));
    const auto action = report.handle(memory(), kSlot);
    EXPECT_EQ(action.kind, Kind::kGuestError);
    EXPECT_NE(action.text.find("unknown type " + std::to_string(type)), std::string::npos) << action.text;
  }
}

TEST_F(ReportChannel, StringsStopAtTheirCapacityAndBecomeValidUtf8) {
  GuestBudget budget(limits_);
  GuestReport report(budget);
  auto& u = slot(abi::UcallType::kPrint);
  std::memset(u.text, 'A', sizeof u.text);  // no terminator
  std::memset(u.file, 'B', sizeof u.file);
  auto action = report.handle(memory(), kSlot);
  ASSERT_EQ(action.kind, Kind::kPrint);
  EXPECT_EQ(action.text, std::string(abi::kUcallTextBytes, 'A'));

  action = send(report, abi::UcallType::kPrint, "ok \xff\xfe \xC3");
  EXPECT_EQ(action.text, "ok \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD");
  EXPECT_EQ(report.replaced_strings(), 1u);

  auto& a = slot(abi::UcallType::kAssertFail, "fail\n\x1b[2K");
  std::memset(a.file, '\xFF', sizeof a.file);
  a.args[0] = 7;
  action = report.handle(memory(), kSlot);
  ASSERT_EQ(action.kind, Kind::kAssertFailed);
  EXPECT_EQ(action.text.find('\n'), std::string::npos) << action.text;
  EXPECT_NE(action.text.find(":7: fail\\n\\x1b[2K"), std::string::npos) << action.text;
  EXPECT_EQ(report.replaced_strings(), 2u);
}

TEST_F(ReportChannel, ArraysAreBoundsCheckedAndCopied) {
  GuestBudget budget(limits_);
  GuestReport report(budget);
  auto* values = reinterpret_cast<std::uint64_t*>(memory_.data() + kArrayAt);
  for (int i = 0; i < 4; ++i) values[i] = 100 + i;
  auto array = [&](std::uint64_t gpa, std::uint64_t count) {
    auto& u = slot(abi::UcallType::kResultArray, "samples");
    u.args[0] = gpa;
    u.args[1] = count;
    u.args[2] = 3;
    return report.handle(memory(), kSlot);
  };
  ASSERT_EQ(array(kArrayAt, 4).kind, Kind::kContinue);
  ASSERT_EQ(report.results().size(), 1u);
  EXPECT_EQ(report.results()[0].values, (std::vector<std::uint64_t>{100, 101, 102, 103}));
  EXPECT_EQ(report.results()[0].kind, 3u);
  EXPECT_EQ(array(kArrayAt, 0).kind, Kind::kContinue) << "an empty array is legal";
  EXPECT_TRUE(report.results()[1].values.empty());

  const std::uint64_t size = memory_.size();
  EXPECT_EQ(array(size - 8, 2).kind, Kind::kGuestError);
  EXPECT_EQ(array(size, 1).kind, Kind::kGuestError);
  EXPECT_EQ(array(~std::uint64_t{0} - 7, 2).kind, Kind::kGuestError);
  const auto huge = array(0, ~std::uint64_t{0});
  EXPECT_EQ(huge.kind, Kind::kGuestError);
  EXPECT_NE(huge.text.find("longer than 4194304"), std::string::npos) << huge.text;
  EXPECT_EQ(array(0, (std::uint64_t{1} << 61) + 1).kind, Kind::kGuestError) << "count * 8 would wrap";
  EXPECT_EQ(report.results().size(), 2u);
}

// RISC-V's RAM starts at 0x80000000: memory[0] is that GPA, the Ucall and
// its array are named by GPAs above it, and an address below it is outside.
TEST_F(ReportChannel, AMemoryBaseShiftsEveryAddress) {
  constexpr std::uint64_t kBase = 0x80000000;
  GuestBudget budget(limits_);
  GuestReport report(budget, kBase);
  auto* values = reinterpret_cast<std::uint64_t*>(memory_.data() + kArrayAt);
  values[0] = 7;
  auto& u = slot(abi::UcallType::kResultArray, "rv");
  u.args[0] = kBase + kArrayAt;
  u.args[1] = 1;
  ASSERT_EQ(report.handle(memory(), kBase + kSlot).kind, Kind::kContinue);
  ASSERT_EQ(report.results().size(), 1u);
  EXPECT_EQ(report.results()[0].values, std::vector<std::uint64_t>{7});
  u.args[0] = kArrayAt;  // below the base
  EXPECT_EQ(report.handle(memory(), kBase + kSlot).kind, Kind::kGuestError);
  EXPECT_EQ(report.handle(memory(), kSlot).kind, Kind::kGuestError);
  EXPECT_EQ(report.handle(memory(), kBase + memory_.size()).kind, Kind::kGuestError);
}

TEST_F(ReportChannel, TheMessageLimitCountsEveryMessage) {
  limits_.report_messages = 10;
  GuestBudget budget(limits_);
  GuestReport report(budget);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(send(report, abi::UcallType::kCaseEnd, "none").kind, Kind::kContinue) << i;
  const auto action = send(report, abi::UcallType::kPrint, "one too many");
  EXPECT_EQ(action.kind, Kind::kGuestError);
  EXPECT_NE(action.text.find("--max-report-messages"), std::string::npos) << action.text;
  // Counted before decoding: a structure outside memory is refused by the limit too.
  EXPECT_NE(report.handle(memory(), ~std::uint64_t{0}).text.find("--max-report-messages"), std::string::npos);
}

TEST_F(ReportChannel, TheByteLimitIsCheckedBeforeAnythingIsKept) {
  limits_.report_bytes = 1000;
  GuestBudget budget(limits_);
  GuestReport report(budget);
  // Each RESULT: key (3) + value (8) + overhead (64) = 75 bytes; 13 fit.
  int kept = 0;
  while (send(report, abi::UcallType::kResult, "key", kept).kind == Kind::kContinue) ++kept;
  EXPECT_EQ(kept, 13);
  EXPECT_EQ(report.results().size(), 13u);
  EXPECT_EQ(budget.report_bytes(), 13u * 75);
  // An array too big for what is left is refused whole, and nothing is kept.
  auto& u = slot(abi::UcallType::kResultArray, "a");
  u.args[0] = kArrayAt;
  u.args[1] = 100;
  const auto action = report.handle(memory(), kSlot);
  EXPECT_EQ(action.kind, Kind::kGuestError);
  EXPECT_NE(action.text.find("--max-report-bytes"), std::string::npos) << action.text;
  EXPECT_EQ(report.results().size(), 13u);
  EXPECT_LE(budget.report_bytes(), limits_.report_bytes);
}

TEST_F(ReportChannel, TheBudgetIsSharedByEveryVcpuAndNeverOvershoots) {
  limits_.report_bytes = 64 * 1024;
  GuestBudget budget(limits_);
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> accepted{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i)
        if (!budget.charge_report_bytes(37)) accepted += 37;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(accepted.load(), budget.report_bytes());
  EXPECT_LE(budget.report_bytes(), limits_.report_bytes);
  EXPECT_GT(budget.report_bytes(), limits_.report_bytes - 37);
  EXPECT_TRUE(budget.charge_report_bytes(~std::uint64_t{0}).has_value()) << "no wrap-around";
}

TEST_F(ReportChannel, OpenCasesAreLimitedPerVcpu) {
  limits_.open_cases = 3;
  GuestBudget budget(limits_);
  GuestReport report(budget);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(send(report, abi::UcallType::kCaseBegin, "c").kind, Kind::kContinue);
  const auto action = send(report, abi::UcallType::kCaseBegin, "c");
  EXPECT_EQ(action.kind, Kind::kGuestError);
  EXPECT_NE(action.text.find("--max-open-cases"), std::string::npos) << action.text;
  // Closing one makes room again; the limit is on open cases, not all cases.
  EXPECT_EQ(send(report, abi::UcallType::kCaseEnd, "c", 1).kind, Kind::kContinue);
  EXPECT_EQ(send(report, abi::UcallType::kCaseBegin, "d").kind, Kind::kContinue);
  GuestReport other_vcpu(budget);
  EXPECT_EQ(send(other_vcpu, abi::UcallType::kCaseBegin, "c").kind, Kind::kContinue);
}

TEST_F(ReportChannel, CaseEndClosesTheInnermostOpenCaseOfThatName) {
  GuestBudget budget(limits_);
  GuestReport report(budget);
  send(report, abi::UcallType::kCaseBegin, "a");
  send(report, abi::UcallType::kCaseBegin, "b");
  send(report, abi::UcallType::kCaseBegin, "a");
  send(report, abi::UcallType::kCaseEnd, "a", 0);  // the inner "a" failed
  send(report, abi::UcallType::kCaseEnd, "zzz", 1);  // matches nothing
  send(report, abi::UcallType::kCaseEnd, "a", 1);
  const auto& cases = report.cases();
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_TRUE(cases[0].ended && cases[0].passed);
  EXPECT_FALSE(cases[1].ended);
  EXPECT_TRUE(cases[2].ended && !cases[2].passed);
  EXPECT_EQ(report.open_cases(), 1u);
}

TEST_F(ReportChannel, CaseChurnCostsNoScan) {
  // 50k begin/end pairs, each followed by a CASE_END that matches nothing:
  // when CASE_END scanned every case ever begun, that was 50k x 50k string
  // compares; now each is a map lookup among the open cases.
  GuestBudget budget(limits_);
  GuestReport report(budget);
  const auto start = std::chrono::steady_clock::now();
  send(report, abi::UcallType::kCaseBegin, "outer");
  for (int i = 0; i < 50000; ++i) {
    send(report, abi::UcallType::kCaseBegin, "churn");
    send(report, abi::UcallType::kCaseEnd, "churn", 1);
    send(report, abi::UcallType::kCaseEnd, "never begun", 1);
  }
  send(report, abi::UcallType::kCaseEnd, "outer", 1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(report.cases().size(), 50001u);
  EXPECT_EQ(report.open_cases(), 0u);
  EXPECT_LT(seconds, 2.0);  // ~0.05 s; the scan took minutes
}

TEST_F(ReportChannel, DoneCarriesTheExitCode) {
  GuestBudget budget(limits_);
  GuestReport report(budget);
  const auto action = send(report, abi::UcallType::kDone, "", ~std::uint64_t{0});
  EXPECT_EQ(action.kind, Kind::kDone);
  EXPECT_EQ(action.exit_code, ~std::uint64_t{0});
}

TEST_F(ReportChannel, WindowMarksCarryTheirEdgeAndRefuseOthers) {
  GuestBudget budget(limits_);
  GuestReport report(budget);
  for (std::uint64_t edge : {abi::kWindowStart, abi::kWindowEnd}) {
    const auto action = send(report, abi::UcallType::kWindowMark, "", edge);
    EXPECT_EQ(action.kind, Kind::kWindowMark);
    EXPECT_EQ(action.exit_code, edge);
  }
  const auto bad = send(report, abi::UcallType::kWindowMark, "", 2);
  EXPECT_EQ(bad.kind, Kind::kGuestError);
  EXPECT_NE(bad.text.find("window mark edge 2"), std::string::npos) << bad.text;
}

// ---- guest_text.h -------------------------------------------------------------------

TEST(GuestText, ValidUtf8PassesUnchanged) {
  const std::string valid[] = {"", "plain ascii", "caf\xC3\xA9", "\xE2\x82\xAC euro", "\xF0\x9F\x98\x80",
                               "\xF4\x8F\xBF\xBF", std::string("nul\0inside", 10)};
  for (const std::string& s : valid) {
    bool replaced = false;
    EXPECT_EQ(valid_utf8(s, &replaced), s);
    EXPECT_FALSE(replaced) << s;
  }
}

TEST(GuestText, InvalidSequencesBecomeOneReplacementPerMaximalSubpart) {
  const std::string fffd = "\xEF\xBF\xBD";
  const struct {
    std::string in, out;
  } cases[] = {
      {"\x80", fffd},                                   // lone continuation byte
      {"\xC0\xAF", fffd + fffd},                        // overlong '/': C0 is never a lead byte
      {"\xE0\x80\xAF", fffd + fffd + fffd},             // overlong 3-byte form
      {"\xED\xA0\x80", fffd + fffd + fffd},             // surrogate U+D800
      {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},  // above U+10FFFF
      {"\xF8\x88\x80\x80\x80", fffd + fffd + fffd + fffd + fffd},
      {"\xFF\xFE", fffd + fffd},
      {"\xE2\x82", fffd},          // truncated at the end: one maximal subpart
      {"\xE2\x82" "A", fffd + "A"},
      {"\xE0\xA0" "A", fffd + "A"},
      {"\xF0\x9F\x98", fffd},
      {"a\xC3", "a" + fffd},
  };
  for (const auto& c : cases) {
    bool replaced = false;
    const std::string out = valid_utf8(c.in, &replaced);
    EXPECT_EQ(out, c.out) << "input bytes: " << c.in.size();
    EXPECT_TRUE(replaced);
    EXPECT_EQ(valid_utf8(out), out) << "idempotent";
  }
}

TEST(GuestText, ConsoleEscapeLeavesNoControlCharacter) {
  EXPECT_EQ(console_escape("plain"), "plain");
  EXPECT_EQ(console_escape("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(console_escape("\x1b[2K\x7f\x01"), "\\x1b[2K\\x7f\\x01");
  EXPECT_EQ(console_escape("back\\slash"), "back\\\\slash");
  EXPECT_EQ(console_escape("\xC2\x9B" "31m"), "\\u009b31m");     // C1 CSI
  EXPECT_EQ(console_escape("caf\xC3\xA9"), "caf\xC3\xA9");       // printable UTF-8 stays
  EXPECT_EQ(console_escape("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(console_escape(std::string("a\0b", 3)), "a\\x00b");
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string escaped = console_escape(all);
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    const auto c = static_cast<unsigned char>(escaped[i]);
    EXPECT_FALSE(c < 0x20 || c == 0x7F) << i;
    if (c == 0xC2 && i + 1 < escaped.size()) {
      EXPECT_GE(static_cast<unsigned char>(escaped[i + 1]), 0xA0u);
    }
  }
}

}  // namespace
}  // namespace lockvisor::machine
