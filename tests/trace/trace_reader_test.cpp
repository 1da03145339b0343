// The trace reader (vmm/trace/trace_reader.h) and trace-check's one call
// (vmm/trace/trace_check.h) on what the writer writes and on files that look
// like it but cannot be a run's: the writer's own files read back, whole,
// windowed, merged or with a full lane; every other file (an unknown path, a
// path "invalid" the metadata did not count, traceEvents that are no array,
// a lock run without lock slices, a time before the origin, run parameters
// the run refuses, an event written twice) is a one-line usage error naming
// the file, where in it and the value, clipped to a readable length.
#include "vmm/trace/trace_reader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "locks/lock_events.h"
#include "locks/pvbounded_tuning.h"
#include "tests/trace/sample_trace.h"
#include "vmm/trace/bound_check.h"
#include "vmm/trace/trace_check.h"
#include "vmm/trace/trace_writer.h"
#include "vmm/util/error.h"

namespace lockvisor::trace {
namespace {

using json = nlohmann::json;
constexpr const char* kArgs = "lock=pvbounded pvb_bound_max_us=1";

TraceTimeline read(const std::string& text) {
  std::istringstream in(text);
  return read_trace_json(in, "bad.json");
}

// The reader's one-line usage error for `text` ("" when it reads it), with
// the file named.
std::string refusal(const std::string& text) {
  try {
    read(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.json: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return what;
  }
  return {};
}

json sample() { return json::parse(sample_trace_json(kArgs)); }

bool lock_slice(const json& e) { return e["ph"] == "X" && e["tid"].get<unsigned>() >= kLockTidBase; }

// `s` holds every one of `parts`.
::testing::AssertionResult mentions(const std::string& s, std::initializer_list<std::string> parts) {
  if (s.empty()) return ::testing::AssertionFailure() << "accepted";
  for (const std::string& p : parts)
    if (s.find(p) == std::string::npos) return ::testing::AssertionFailure() << "no '" << p << "' in: " << s;
  return ::testing::AssertionSuccess();
}

TEST(TraceReader, TheWritersOwnFilesReadBack) {
  EXPECT_EQ(refusal(sample_trace_json(kArgs)), "");
  EXPECT_EQ(refusal(sample_trace_json(kArgs, TraceOptions{100000, 0}, "2ms:4ms")), "") << "a window";
  EXPECT_EQ(refusal(sample_trace_json(kArgs, TraceOptions{100000, 0}, "10ms:11ms")), "") << "a window without locks";
  const std::string merged = sample_trace_json(kArgs, TraceOptions{100000, 2'000'000});
  ASSERT_NE(merged.find("\"acquisitions\""), std::string::npos) << merged;
  EXPECT_EQ(refusal(merged), "") << "--trace-merge-short";
  EXPECT_EQ(read(merged).merged_slices, 1u);
  // A lock lane that filled: the file holds fewer records than the run read.
  Trace full(TraceOptions{100000, 0});
  fill_sample_trace(full, kArgs);
  full.lock_lane(1).add_dropped(6);
  EXPECT_EQ(refusal(to_trace_json(full)), "") << "a full lane";
  // The same verdict as ever: the steal past a due running head.
  const TraceTimeline t = read(sample_trace_json(kArgs));
  EXPECT_EQ(t.file, "bad.json");
  EXPECT_EQ(check_trace(t, TraceCheckOptions{}).bound.violations, 1u);
}

// A path the writer never writes is no acquisition the oracle can judge.
TEST(TraceReader, AnUnknownPathIsRefused) {
  json doc = sample();
  for (json& e : doc["traceEvents"])
    if (lock_slice(e)) e["args"]["path"] = "bogus";
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"traceEvents[", "args.path \"bogus\"", "fast, spin"}));
  doc = sample();
  for (json& e : doc["traceEvents"])
    if (lock_slice(e)) e["args"].erase("path");
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"args.path null"}));
}

// The writer writes "invalid" for a code the VMM did not know, and counts
// those in metadata.locks.invalid_path: a file is read with as many as
// metadata counted, no more.
TEST(TraceReader, InvalidPathsCountOnlyWhenTheMetadataCountedThem) {
  json doc = sample();
  for (json& e : doc["traceEvents"])
    if (lock_slice(e)) e["args"]["path"] = "invalid";
  EXPECT_TRUE(
      mentions(refusal(doc.dump()), {"metadata.locks.invalid_path is 0", "3 acquisitions with path \"invalid\""}));
  doc["metadata"]["locks"]["invalid_path"] = 3;
  for (auto& [path, n] : doc["metadata"]["locks"]["by_path"].items()) n = 0;
  ASSERT_EQ(refusal(doc.dump()), "");
  const TraceTimeline t = read(doc.dump());
  EXPECT_EQ(t.acquisitions[0].path, kInvalidPath);
  const BoundReport r = check_bound(t, bound_rules_from(t.metadata));
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.by_reason[static_cast<unsigned>(Reason::kUnknownPath)], 2u) << "judged unknown, never passed";
  // Without metadata.locks none is counted.
  doc["metadata"].erase("locks");
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"metadata.locks.invalid_path is absent"}));
  // A valid path renamed into another shows in the counts by path.
  doc = sample();
  for (json& e : doc["traceEvents"])
    if (lock_slice(e) && e["args"]["path"] == "steal") e["args"]["path"] = "queue";
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"metadata.locks.by_path.steal is 1", "0 steal acquisitions"}));
}

TEST(TraceReader, TraceEventsMustBeAnArrayOfEvents) {
  for (const char* events : {"5", R"({"a":1})", R"("x")", "null"}) {
    json doc = sample();
    doc["traceEvents"] = json::parse(events);
    EXPECT_TRUE(mentions(refusal(doc.dump()), {"traceEvents is", "not an array"})) << events;
  }
  for (const char* element : {"1", "[2]", "\"x\""}) {
    json doc = sample();
    doc["traceEvents"].insert(doc["traceEvents"].begin(), json::parse(element));
    EXPECT_TRUE(mentions(refusal(doc.dump()), {"traceEvents[0]", "is not an event object"})) << element;
  }
  std::string twice = sample_trace_json(kArgs);
  twice.insert(1, R"("traceEvents":[],)");
  EXPECT_TRUE(mentions(refusal(twice), {"\"traceEvents\" twice"}));
}

// A lock workload's trace with no lock slice gives no verdict: the reader
// refuses one whose metadata counted records, and trace-check one that
// holds none (a window where nothing happened, metadata without counts).
TEST(TraceReader, ALockRunsTraceWithoutLockSlicesIsNothingToJudge) {
  json doc = sample();
  json kept = json::array();
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M") kept.push_back(e);
  doc["traceEvents"] = kept;
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"metadata.locks.records is 3", "has 0 acquisitions"}));
  doc["metadata"].erase("locks");
  for (const std::string& text : {doc.dump(), sample_trace_json(kArgs, TraceOptions{100000, 0}, "10ms:11ms")}) {
    const TraceTimeline t = read(text);
    try {
      check_trace(t, TraceCheckOptions{});
      ADD_FAILURE() << "judged a trace without lock slices";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
      EXPECT_TRUE(mentions(e.what(), {"bad.json: nothing to judge"}));
    }
  }
  // A run without locks has none to miss.
  doc["metadata"]["args"] = "rounds=10";
  EXPECT_NO_THROW(check_trace(read(doc.dump()), TraceCheckOptions{}));
}

TEST(TraceReader, ATimeBeforeTheRunsOriginIsRefused) {
  json doc = sample();
  for (json& e : doc["traceEvents"])
    if (lock_slice(e)) e["ts"] = -1e6;
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"traceEvents[", "ts -1000000", "before the run's origin"}));
}

// The run's parameters as the run accepts them: the same rows, read here.
TEST(TraceReader, TheRunsParametersMustBeOnesTheRunAccepts) {
  const locks::pvb::TuningKey* bound = locks::pvb::find_tuning_key("pvb_bound_us", 12);
  ASSERT_NE(bound, nullptr);
  const std::string range = fmt::format("{}..{}", bound->min, bound->max);
  for (const char* value : {"abc", "0", "18446744073709551615", "", "99999999999999999999999"}) {
    json doc = sample();
    doc["metadata"]["args"] = fmt::format("lock=pvbounded pvb_bound_us={} cs=100", value);
    EXPECT_TRUE(mentions(refusal(doc.dump()), {"metadata.args: pvb_bound_us=", range})) << value;
  }
  json doc = sample();
  doc["metadata"]["args"] = "lock=bogus";
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"metadata.args: lock=bogus"}));
  const std::pair<const char*, const char*> bad[] = {
      {"tsc_khz", "0"},
      {"tsc_khz", "-2600000"},
      {"tsc_khz", R"("fast")"},
      {"dropped_events", "-1"},
      {"dropped_events", "5"},
      {"program", "3"},
      {"program", R"("")"},
      {"vcpu_host_cpus", "[[0]]"},
      {"vcpu_host_cpus", R"([["x"], [0]])"},
      {"vcpu_host_cpus", "[[], [0]]"},
      {"vcpu_host_cpus", "[[-1], [0]]"},
      {"vcpu_node", "[0, 7]"},
      {"vcpus", "0"},
      {"args", "5"},
      {"guest_tsc", R"({"error_ns": -1})"},
      {"host_preemptions", R"({"switches_unseen": -1})"},
      {"locks", R"({"records": -3})"},
      {"window", R"({"begin_us": 5})"},
  };
  for (const auto& [key, value] : bad) {
    doc = sample();
    doc["metadata"][key] = json::parse(value);
    EXPECT_TRUE(mentions(refusal(doc.dump()), {std::string("metadata.") + key})) << key << " " << value;
  }
}

// One vCPU is in one KVM_RUN at a time and takes a lock once at a time:
// the same slice twice is no run's.
TEST(TraceReader, AnEventWrittenTwiceIsRefused) {
  json doc = sample();
  json twice = json::array();
  for (const json& e : doc["traceEvents"]) {
    twice.push_back(e);
    twice.push_back(e);
  }
  doc["traceEvents"] = twice;
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"traceEvents[", "waits for or holds lock 0 twice at once"}));
  doc = sample();
  twice = json::array();
  for (const json& e : doc["traceEvents"]) {
    twice.push_back(e);
    if (e["ph"] == "X" && e["name"] == "guest") twice.push_back(e);
  }
  doc["traceEvents"] = twice;
  EXPECT_TRUE(mentions(refusal(doc.dump()), {"vCPU 0's guest slices overlap"}));
}

// A message quotes a value of the file only in part: a line to read, not the
// file echoed.
TEST(TraceReader, LongValuesAreClippedInTheMessage) {
  const std::string digits(5000, '7');
  const std::string text = sample_trace_json(kArgs);
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string out = text;
    const auto at = out.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return out.replace(at, from.size(), to);
  };
  for (const std::string& variant :
       {replaced("\"vcpus\":2", "\"vcpus\":" + digits), replaced("\"path\":\"steal\"", "\"path\":\"" + digits + "\""),
        replaced("\"program\":\"lockbench\"", "\"program\":" + digits + ".5"),
        replaced("pvb_bound_max_us=1", "pvb_bound_max_us=" + digits),
        replaced("\"tid\":2000", "\"tid\":" + digits + "x")}) {
    const std::string why = refusal(variant);
    EXPECT_TRUE(mentions(why, {"…"}));
    EXPECT_LT(why.size(), 300u) << why;
  }
}

}  // namespace
}  // namespace lockvisor::trace
