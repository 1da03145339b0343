// --trace-window (vmm/trace/trace_window.h) without a VM: the spec parser's
// refusals, the worst-wait search, and what the writer keeps.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "vmm/trace/trace.h"
#include "vmm/trace/trace_window.h"
#include "vmm/trace/trace_writer.h"
#include "vmm/util/error.h"

namespace lockvisor::trace {
namespace {

constexpr const char* kExitNames[] = {"signal", "hlt", "hypercall"};
constexpr std::uint64_t kOrigin = 5'000'000'000;
constexpr std::uint64_t kMs = 1'000'000;

Trace make_trace(unsigned vcpus) {
  Trace trace(TraceOptions{100000});
  trace.begin(vcpus, kOrigin, kExitNames);
  return trace;
}

std::vector<nlohmann::json> slices(const nlohmann::json& doc) {
  std::vector<nlohmann::json> out;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") out.push_back(e);
  return out;
}

TEST(TraceWindowSpec, ParsesTheThreeForms) {
  EXPECT_EQ(parse_trace_window("all").kind, TraceWindowSpec::Kind::kAll);
  const auto range = parse_trace_window("120ms:125ms");
  EXPECT_EQ(range.kind, TraceWindowSpec::Kind::kRange);
  EXPECT_EQ(range.begin_ns, 120 * kMs);
  EXPECT_EQ(range.end_ns, 125 * kMs);
  EXPECT_EQ(parse_trace_window("800us:1s").end_ns, 1000 * kMs);
  const auto worst = parse_trace_window("worst-wait");
  EXPECT_EQ(worst.kind, TraceWindowSpec::Kind::kWorstWait);
  EXPECT_FALSE(worst.pad_ns);
  EXPECT_EQ(parse_trace_window("worst-wait:2ms").pad_ns, 2 * kMs);
  // Formatting and parsing agree.
  EXPECT_EQ(parse_trace_window(format_trace_window(range)).begin_ns, range.begin_ns);
  EXPECT_EQ(parse_trace_window(format_trace_window(parse_trace_window("worst-wait:7us"))).pad_ns, 7000u);
}

TEST(TraceWindowSpec, RefusesWhatItCannotRead) {
  for (const char* bad : {"", "worst", "worst-wait:", "worst-wait:2", "1:2", "5ms:2ms", "5ms:5ms", "x:1ms", "1ms:",
                          "-1ms:2ms", "1.5ms:2ms", "99999999999s:100000000000s", "1ms:2ms:3ms"}) {
    try {
      parse_trace_window(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
      EXPECT_NE(std::string(e.what()).find("--trace-window"), std::string::npos) << e.what();
    }
  }
}

TEST(TraceWindow, WorstWaitIsTheLongestWaitOfAnyVcpuWithItsPadding) {
  Trace trace = make_trace(3);
  trace.lock_lane(0).add({kOrigin + 1 * kMs, kOrigin + 2 * kMs, 0, 0, EventKind::kLockWait});
  trace.lock_lane(0).add({kOrigin + 2 * kMs, kOrigin + 20 * kMs, 0, 0, EventKind::kLockHold});  // a hold is no wait
  trace.lock_lane(2).add({kOrigin + 10 * kMs, kOrigin + 14 * kMs, 0, 1, EventKind::kLockWait});
  trace.lock_lane(1).add({kOrigin + 30 * kMs, kOrigin + 33 * kMs, 0, 0, EventKind::kLockWait});
  std::string note;
  const auto w = resolve_trace_window(parse_trace_window("worst-wait"), trace, &note);
  ASSERT_TRUE(w);
  EXPECT_TRUE(note.empty());
  const auto& worst = w->description["worst_wait"];
  EXPECT_EQ(worst["vcpu"], 2);
  EXPECT_EQ(worst["lock"], 1);
  EXPECT_DOUBLE_EQ(worst["wait_us"].get<double>(), 4000.0);
  EXPECT_DOUBLE_EQ(worst["begin_us"].get<double>(), 10000.0);
  EXPECT_EQ(worst["waits_searched"], 3);
  // Default padding: half the wait, at least 1 ms -> 2 ms each side.
  EXPECT_EQ(w->begin_ns, kOrigin + 8 * kMs);
  EXPECT_EQ(w->end_ns, kOrigin + 16 * kMs);
  const auto padded = resolve_trace_window(parse_trace_window("worst-wait:1us"), trace, nullptr);
  EXPECT_EQ(padded->begin_ns, kOrigin + 10 * kMs - 1000);
  // A short wait still gets a millisecond of context.
  Trace small = make_trace(1);
  small.lock_lane(0).add({kOrigin + 5 * kMs, kOrigin + 5 * kMs + 300, 0, 0, EventKind::kLockWait});
  EXPECT_EQ(resolve_trace_window(parse_trace_window("worst-wait"), small, nullptr)->end_ns, kOrigin + 6 * kMs + 300);
}

TEST(TraceWindow, WithoutLockWaitsTheWholeRunIsWrittenAndSaysWhy) {
  Trace trace = make_trace(1);
  trace.vcpu_lane(0).add({kOrigin, kOrigin + kMs, 0, 0, EventKind::kGuest});
  std::string note;
  EXPECT_FALSE(resolve_trace_window(parse_trace_window("worst-wait"), trace, &note));
  EXPECT_NE(note.find("no lock waits"), std::string::npos);
  EXPECT_FALSE(resolve_trace_window(parse_trace_window("all"), trace, &note));
}

TEST(TraceWindow, WriterKeepsWhatOverlapsAndPairsOnlyKeptFlows) {
  Trace trace = make_trace(2);
  auto& v0 = trace.vcpu_lane(0);
  v0.add({kOrigin + 0 * kMs, kOrigin + 1 * kMs, 0, 0, EventKind::kGuest});    // before: dropped
  v0.add({kOrigin + 2 * kMs, kOrigin + 6 * kMs, 0, 0, EventKind::kGuest});    // starts before, overlaps: kept
  v0.add({kOrigin + 7 * kMs, kOrigin + 7 * kMs, 11, 1, EventKind::kKick});    // inside
  v0.add({kOrigin + 8 * kMs, kOrigin + 8 * kMs, 12, 1, EventKind::kKick});    // inside, but its wake is not
  v0.add({kOrigin + 20 * kMs, kOrigin + 21 * kMs, 0, 0, EventKind::kGuest});  // after: dropped
  auto& v1 = trace.vcpu_lane(1);
  v1.add({kOrigin + 7 * kMs + 500, kOrigin + 7 * kMs + 500, 11, 0, EventKind::kWake});
  v1.add({kOrigin + 30 * kMs, kOrigin + 30 * kMs, 12, 0, EventKind::kWake});  // outside
  trace.host_lane(1).add({kOrigin + 9 * kMs, kOrigin + 12 * kMs, 0, 1, EventKind::kPreempted});  // ends after: kept
  const auto w = resolve_trace_window(parse_trace_window("5ms:10ms"), trace, nullptr);
  ASSERT_TRUE(w);
  const auto doc = nlohmann::json::parse(to_trace_json(trace, &*w));
  const auto kept = slices(doc);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_DOUBLE_EQ(kept[0]["ts"].get<double>(), 2000.0);
  EXPECT_EQ(kept[1]["name"], "preempted");
  unsigned starts = 0, finishes = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") ++starts;
    if (e["ph"] == "f") ++finishes;
  }
  EXPECT_EQ(starts, 1u);
  EXPECT_EQ(finishes, 1u);
  const auto& meta = doc["metadata"]["window"];
  EXPECT_EQ(meta["events_outside"], 3);  // two guest slices and one wake
  EXPECT_DOUBLE_EQ(meta["begin_us"].get<double>(), 5000.0);
  EXPECT_DOUBLE_EQ(meta["end_us"].get<double>(), 10000.0);
  EXPECT_EQ(doc["metadata"]["kick_flows"], 1);
  // Without a window every event is written and there is no window entry.
  const auto whole = nlohmann::json::parse(to_trace_json(trace));
  EXPECT_EQ(slices(whole).size(), 4u);
  EXPECT_FALSE(whole["metadata"].contains("window"));
}

// The run's trace line says what the window holds: a window past the end of
// the run (or before its first event) is empty, and the line says so with
// the time the run's events cover, instead of naming the file as if it
// held the run.
TEST(TraceWindow, TheRunsLineSaysWhenTheWindowHoldsNoEvent) {
  Trace trace = make_trace(1);
  trace.vcpu_lane(0).add({kOrigin + 2 * kMs, kOrigin + 90 * kMs, 0, 0, EventKind::kGuest});
  trace.lock_lane(0).add({kOrigin + 3 * kMs, kOrigin + 4 * kMs, 0, 0, EventKind::kLockWait});
  trace.vcpu_lane(0).add({kOrigin + 100 * kMs, kOrigin + 100 * kMs, 1, 0, EventKind::kKick});
  const auto late = resolve_trace_window(parse_trace_window("10s:11s"), trace, nullptr);
  ASSERT_TRUE(late);
  EXPECT_EQ(window_words(*late, trace),
            ", window 10000.000..11000.000 ms: empty, the run's events lie in 2.000..90.000 ms");
  EXPECT_EQ(window_words(*resolve_trace_window(parse_trace_window("50ms:60ms"), trace, nullptr), trace),
            ", window 50.000..60.000 ms");
  const auto worst = resolve_trace_window(parse_trace_window("worst-wait"), trace, nullptr);
  EXPECT_EQ(window_words(*worst, trace), ", window 2.000..5.000 ms around the worst lock wait (1.000 ms, vCPU 0)");
  const Trace none = make_trace(1);
  EXPECT_NE(window_words(*resolve_trace_window(parse_trace_window("1ms:2ms"), none, nullptr), none)
                .find("empty, the run recorded no events"),
            std::string::npos);
}

}  // namespace
}  // namespace lockvisor::trace
