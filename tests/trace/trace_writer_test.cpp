// The timeline's pieces without a VM (label "unit"): the JSON writer, the
// event cap, flow pairing, the guest-TSC conversion and the lock-log reader's
// checks against a hostile guest.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockvisor/abi/lock_trace.h"
#include "vmm/trace/lock_log.h"
#include "vmm/trace/preemption_tracker.h"
#include "vmm/trace/trace.h"
#include "vmm/trace/trace_clock.h"
#include "vmm/trace/trace_writer.h"

namespace lockvisor::trace {
namespace {

constexpr const char* kExitNames[] = {"signal", "hlt", "hypercall"};
constexpr std::uint64_t kOrigin = 1'000'000'000;

Trace make_trace(unsigned vcpus, std::uint64_t max_events = 100000) {
  Trace trace(TraceOptions{max_events});
  trace.begin(vcpus, kOrigin, kExitNames);
  return trace;
}

nlohmann::json parse(const Trace& trace) { return nlohmann::json::parse(to_trace_json(trace)); }

std::vector<nlohmann::json> events_with(const nlohmann::json& doc, const std::string& ph) {
  std::vector<nlohmann::json> out;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

TEST(TraceWriter, DocumentHasTheDocumentedShape) {
  Trace trace = make_trace(2);
  trace.vcpu_lane(0).add({kOrigin + 1000, kOrigin + 3500, 0, 0, EventKind::kGuest});
  trace.vcpu_lane(0).add({kOrigin + 3500, kOrigin + 4000, 0, 2, EventKind::kExit});
  trace.metadata()["note"] = "x";
  const auto doc = parse(trace);
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_EQ(doc["metadata"]["note"], "x");
  ASSERT_TRUE(doc["traceEvents"].is_array());
  // Names for the process and three threads per vCPU, each with a sort index.
  std::set<std::pair<int, std::string>> names;
  for (const auto& e : events_with(doc, "M"))
    if (e["name"] == "thread_name") names.insert({e["tid"].get<int>(), e["args"]["name"].get<std::string>()});
  EXPECT_TRUE(names.count({0, "vCPU 0"}));
  EXPECT_TRUE(names.count({1, "vCPU 1"}));
  EXPECT_TRUE(names.count({static_cast<int>(kHostTidBase) + 1, "vCPU 1 host"}));
  EXPECT_TRUE(names.count({static_cast<int>(kLockTidBase), "vCPU 0 locks"}));
  const auto slices = events_with(doc, "X");
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0]["name"], "guest");
  EXPECT_DOUBLE_EQ(slices[0]["ts"].get<double>(), 1.0);   // microseconds since the origin
  EXPECT_DOUBLE_EQ(slices[0]["dur"].get<double>(), 2.5);  // nanosecond decimals kept
  EXPECT_EQ(slices[1]["name"], "exit hypercall");
  EXPECT_EQ(slices[1]["pid"], 1);
  EXPECT_EQ(slices[1]["tid"], 0);
}

TEST(TraceWriter, EmptyTraceIsValidJson) {
  const Trace trace = make_trace(1);
  const auto doc = parse(trace);
  EXPECT_EQ(doc["metadata"]["dropped_events"], 0);
  EXPECT_TRUE(events_with(doc, "X").empty());
}

TEST(TraceWriter, UnknownExitKindIsNamedUnknownNotOutOfBounds) {
  Trace trace = make_trace(1);
  trace.vcpu_lane(0).add({kOrigin, kOrigin + 10, 0, 99, EventKind::kExit});
  EXPECT_EQ(events_with(parse(trace), "X").at(0)["name"], "exit unknown");
}

TEST(TraceWriter, FlowsAreWrittenOnlyInPairs) {
  Trace trace = make_trace(3);
  // Paired: vCPU 0 kicks vCPU 1 (flow 7), vCPU 1's halt consumes it.
  trace.on_kick(0, 1, 7, kOrigin + 100);
  trace.vcpu_lane(1).add({kOrigin + 50, kOrigin + 300, 0, 0, EventKind::kHalt});
  trace.vcpu_lane(1).add({kOrigin + 250, kOrigin + 250, 7, 0, EventKind::kWake});
  // Unpaired both ways: a kick whose wake is missing, a wake without its kick.
  trace.on_kick(2, 0, 8, kOrigin + 400);
  trace.vcpu_lane(2).add({kOrigin + 500, kOrigin + 500, 9, 0, EventKind::kWake});
  const auto doc = parse(trace);
  const auto starts = events_with(doc, "s");
  const auto ends = events_with(doc, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0]["id"], ends[0]["id"]);
  EXPECT_EQ(starts[0]["tid"], 0);
  EXPECT_EQ(ends[0]["tid"], 1);
  EXPECT_EQ(ends[0]["bp"], "e");
  EXPECT_LE(starts[0]["ts"].get<double>(), ends[0]["ts"].get<double>());
  EXPECT_EQ(doc["metadata"]["kick_flows"], 1);
  EXPECT_EQ(doc["metadata"]["kick_flows_unpaired"], 2);
}

TEST(TraceWriter, CapKeepsFirstEventsAndMarksTheDrops) {
  Trace trace = make_trace(1, 1000);  // one vCPU: 437 exit-loop events
  const LaneQuota quota = lane_quota(1000, 1);
  ASSERT_EQ(trace.vcpu_lane(0).capacity(), quota.vcpu_events);
  const std::size_t extra = 37;
  for (std::size_t i = 0; i < quota.vcpu_events + extra; ++i)
    trace.vcpu_lane(0).add({kOrigin + i * 10, kOrigin + i * 10 + 5, 0, 0, EventKind::kGuest});
  EXPECT_EQ(trace.vcpu_lane(0).events().size(), quota.vcpu_events);
  EXPECT_EQ(trace.vcpu_lane(0).dropped(), extra);
  const auto doc = parse(trace);
  EXPECT_EQ(events_with(doc, "X").size(), quota.vcpu_events);
  const auto marks = events_with(doc, "i");
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0]["name"], "dropped 37 events");
  EXPECT_EQ(marks[0]["args"]["dropped"], extra);
  EXPECT_EQ(doc["metadata"]["dropped_events"], extra);
}

TEST(TraceWriter, QuotaNeverExceedsTheCap) {
  for (const unsigned vcpus : {1u, 3u, 8u, 128u}) {
    const LaneQuota q = lane_quota(4000000, vcpus);
    EXPECT_LE((q.vcpu_events + 2 * q.lock_records + q.host_events) * vcpus, 4000000u) << vcpus;
  }
}

TEST(TraceWriter, TheCapToHoldANeedIsTheSmallestWhoseSharesHoldIt) {
  for (const unsigned vcpus : {1u, 3u, 64u, 1024u})
    for (const LaneQuota need : {LaneQuota{1000, 0, 0}, LaneQuota{0, 250000, 0}, LaneQuota{0, 0, 77}, LaneQuota{437, 91, 5}}) {
      const std::uint64_t cap = max_events_to_hold(need, vcpus);
      const LaneQuota got = lane_quota(cap, vcpus);
      EXPECT_GE(got.vcpu_events, need.vcpu_events) << vcpus;
      EXPECT_GE(got.lock_records, need.lock_records) << vcpus;
      EXPECT_GE(got.host_events, need.host_events) << vcpus;
      // One event per vCPU less and some lane kind falls short.
      const LaneQuota less = lane_quota(cap - vcpus, vcpus);
      EXPECT_TRUE(less.vcpu_events < need.vcpu_events || less.lock_records < need.lock_records ||
                  less.host_events < need.host_events)
          << vcpus;
    }
}

TEST(TraceWriter, AFullTraceSaysWhatCapWouldHaveKeptItAll) {
  Trace trace = make_trace(2, 1000);  // 500 per vCPU: 218 exit-loop events, 125 lock records, 31 host events
  for (int i = 0; i < 300; ++i) trace.vcpu_lane(1).add({kOrigin + i, kOrigin + i + 1, 0, 0, EventKind::kGuest});
  trace.lock_lane(0).add_dropped(2 * 400);  // the guest's log dropped 400 acquisitions
  EXPECT_GT(trace.dropped_events(), 0u);
  const LaneQuota need = trace.most_needed();
  EXPECT_EQ(need.vcpu_events, 300u);
  EXPECT_EQ(need.lock_records, 400u);
  EXPECT_EQ(need.host_events, 0u);
  const LaneQuota q = lane_quota(max_events_to_hold(need, 2), 2);
  EXPECT_GE(q.vcpu_events, 300u);
  EXPECT_GE(q.lock_records, 400u);
}

TEST(GuestClock, ConvertsThroughOffsetAndRate) {
  // Host TSC at 2 GHz (0.5 ns per cycle) measured from the pairs; guest TSC
  // runs 1000 cycles ahead of the host's.
  const ClockPair start{10'000, 5'000'000, 10};
  const ClockPair end{2'010'000, 6'000'000, 10};
  const GuestClock clock(start, end, 1000, 0);
  EXPECT_DOUBLE_EQ(clock.ns_per_cycle(), 0.5);
  EXPECT_EQ(clock.to_ns(11'000), 5'000'000);        // guest 11000 = host 10000 = start
  EXPECT_EQ(clock.to_ns(2'011'000), 6'000'000);     // the end pair
  EXPECT_EQ(clock.to_ns(1'011'000), 5'500'000);     // halfway
  EXPECT_EQ(clock.to_ns(10'000), 4'999'500);        // before the start pair: earlier, not wrapped
  // Negative offsets (guest behind the host) work the same way.
  const GuestClock behind(start, end, -4000, 0);
  EXPECT_EQ(behind.to_ns(6'000), 5'000'000);
  // Without a usable end pair, tsc_khz gives the rate.
  const GuestClock by_khz(start, start, 0, 1'000'000);  // 1 GHz
  EXPECT_DOUBLE_EQ(by_khz.ns_per_cycle(), 1.0);
  EXPECT_EQ(by_khz.to_ns(10'500), 5'000'500);
}

TEST(GuestClock, HostClockPairIsTight) {
  const ClockPair pair = sample_clock_pair();
  EXPECT_GT(pair.tsc, 0u);
  EXPECT_GT(pair.ns, 0u);
  EXPECT_LT(pair.bracket_cycles, 1'000'000u);  // a clock_gettime, not a context switch
}

abi::VcpuRunState record(std::uint64_t preemptions, std::uint64_t sleeps, std::uint64_t preempted_ns,
                         std::uint64_t since) {
  abi::VcpuRunState r{};
  r.state = LOCKVISOR_RUNSTATE_RUNNING;
  r.preemptions = preemptions;
  r.sleeps = sleeps;
  r.preempted_ns = preempted_ns;
  r.state_since_ns = since;
  return r;
}

TEST(PreemptionTracker, OnePreemptionIsExactSeveralAreMergedSleepsAreMissed) {
  TraceBuffer lane(16);
  PreemptionTracker t;
  t.observe(record(3, 1, 500, 1000), lane);        // baseline: nothing drawn
  t.observe(record(3, 1, 500, 1000), lane);        // no change
  t.observe(record(4, 1, 800, 5000), lane);        // one preemption of 300 ns ending at 5000
  t.observe(record(7, 1, 1400, 9000), lane);       // three, 600 ns together, the last ending at 9000
  t.observe(record(8, 2, 1500, 12000), lane);      // one preemption and a sleep: `since` may be the sleep's end
  ASSERT_EQ(lane.events().size(), 2u);
  EXPECT_EQ(lane.events()[0].begin_ns, 4700u);
  EXPECT_EQ(lane.events()[0].end_ns, 5000u);
  EXPECT_EQ(lane.events()[0].arg, 1u);             // exact
  EXPECT_EQ(lane.events()[1].begin_ns, 8400u);
  EXPECT_EQ(lane.events()[1].end_ns, 9000u);
  EXPECT_EQ(lane.events()[1].id, 3u);              // merged count
  EXPECT_EQ(t.counts().exact, 1u);
  EXPECT_EQ(t.counts().merged, 3u);
  EXPECT_EQ(t.counts().missed, 1u);
  // A record that goes backwards (never from a real page) restarts the baseline.
  t.observe(record(1, 0, 0, 13000), lane);
  t.observe(record(2, 0, 100, 14000), lane);
  EXPECT_EQ(lane.events().size(), 3u);
}

// A guest-memory image with the lock log of `vcpus` vCPUs.
struct LogImage {
  std::vector<std::byte> memory = std::vector<std::byte>(8 << 20);
  LockLogPlacement place;
  LogImage(unsigned vcpus, std::size_t records) {
    place = place_lock_log(2 << 20, 8 << 20, vcpus, records);
    init_lock_log(memory, place, vcpus);
  }
  abi::LockTraceHeader& header(unsigned vcpu) {
    return *reinterpret_cast<abi::LockTraceHeader*>(memory.data() + place.gpa + vcpu * place.stride);
  }
  abi::LockTraceRecord* records(unsigned vcpu) { return reinterpret_cast<abi::LockTraceRecord*>(&header(vcpu) + 1); }
};

TEST(LockLog, PlacementStaysInsideTheFreeMemoryTop) {
  const auto place = place_lock_log(2 << 20, 8 << 20, 4, 1000);
  EXPECT_EQ(place.capacity, 1000u);  // what was asked for, though the pages hold more
  EXPECT_GE(place.gpa, std::uint64_t{2} << 20);
  EXPECT_LE(place.gpa + 4 * place.stride, std::uint64_t{8} << 20);
  EXPECT_EQ(place.gpa % 4096, 0u);
  // Never more than half the free memory, however many records are wanted.
  const auto big = place_lock_log(2 << 20, 8 << 20, 4, 100000000);
  EXPECT_LE(4 * big.stride, std::uint64_t{3} << 20);
  EXPECT_EQ(place_lock_log(0, 4096, 4, 1000).stride, 0u);  // no room: no log
  // The free memory lock_log_free_bytes_for asks for holds that many records.
  for (const unsigned vcpus : {1u, 64u, 256u})
    for (const std::uint64_t records : {1ull, 1000ull, 250000ull}) {
      const std::uint64_t free = lock_log_free_bytes_for(records, vcpus);
      EXPECT_EQ(place_lock_log(1 << 20, (1 << 20) + free, vcpus, records).capacity, records) << vcpus << " " << records;
      EXPECT_LT(place_lock_log(1 << 20, (1 << 20) + free - 4096 * 2 * vcpus, vcpus, records).capacity, records);
    }
}

TEST(LockLog, GoodRecordsBecomeWaitAndHoldSlices) {
  LogImage image(2, 100);
  // Identity clock: guest TSC = ns.
  const GuestClock clock(ClockPair{0, 0, 0}, ClockPair{1'000'000, 1'000'000, 0}, 0, 0);
  image.records(1)[0] = {1000, 1500, 1800, 0, 0};
  image.records(1)[1] = {2000, 2000, 2100, 0, 0};
  image.header(1).count = 2;
  image.header(1).dropped = 5;
  Trace trace = make_trace(2);
  const auto stats = read_lock_log(image.memory, image.place, std::vector<GuestClock>(2, clock), 0, 1'000'000, 0, 1, trace);
  EXPECT_EQ(stats.records, 2u);
  EXPECT_EQ(stats.dropped, 5u);
  EXPECT_EQ(stats.rejected, 0u);
  const auto events = trace.lock_lane(1).events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, EventKind::kLockWait);
  EXPECT_EQ(events[0].begin_ns, 1000u);
  EXPECT_EQ(events[0].end_ns, 1500u);
  EXPECT_EQ(events[1].kind, EventKind::kLockHold);
  EXPECT_EQ(events[1].end_ns, 1800u);
  EXPECT_TRUE(trace.lock_lane(0).events().empty());
}

// The record's path code: a known one travels to both slices, is counted and
// labels (and colours) the acquisition in the file; an unknown one is counted
// as invalid and drawn as such, never used as an index.
TEST(LockLog, PathsAreCheckedCountedAndWritten) {
  LogImage image(1, 10);
  const GuestClock clock(ClockPair{kOrigin, kOrigin, 0}, ClockPair{kOrigin + 1'000'000, kOrigin + 1'000'000, 0}, 0,
                         0);
  const auto steal = static_cast<std::uint32_t>(locks::AcqPath::steal);
  const auto reserved = static_cast<std::uint32_t>(locks::AcqPath::reserved);
  auto* r = image.records(0);
  r[0] = {kOrigin + 100, kOrigin + 200, kOrigin + 300, 0, steal};
  r[1] = {kOrigin + 400, kOrigin + 500, kOrigin + 600, 0, reserved};
  r[2] = {kOrigin + 700, kOrigin + 800, kOrigin + 900, 0, locks::kAcqPathCount};  // one past the last
  r[3] = {kOrigin + 1000, kOrigin + 1100, kOrigin + 1200, 0, ~std::uint32_t{0}};
  r[4] = {kOrigin + 1300, kOrigin + 1300, kOrigin + 1400, 0, 0};  // fast
  image.header(0).count = 5;
  Trace trace = make_trace(1);
  const auto stats = read_lock_log(image.memory, image.place, std::vector<GuestClock>(1, clock), kOrigin,
                                   kOrigin + 1'000'000, 0, 1, trace);
  EXPECT_EQ(stats.records, 5u) << "a bad path code does not make the times untrustworthy";
  EXPECT_EQ(stats.rejected, 0u);
  EXPECT_EQ(stats.invalid_path, 2u);
  EXPECT_EQ(stats.by_path[steal], 1u);
  EXPECT_EQ(stats.by_path[reserved], 1u);
  EXPECT_EQ(stats.by_path[0], 1u);
  const auto events = trace.lock_lane(0).events();
  ASSERT_EQ(events.size(), 10u);
  EXPECT_EQ(events[0].path, steal);
  EXPECT_EQ(events[1].path, steal);
  EXPECT_EQ(events[4].path, kInvalidPath);
  EXPECT_EQ(events[7].path, kInvalidPath);

  const auto doc = nlohmann::json::parse(to_trace_json(trace));
  std::vector<nlohmann::json> holds;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "wait") {
      EXPECT_FALSE(e.contains("cname")) << "waits keep their default colour";
    }
    if (e["name"] == "hold") holds.push_back(e);
  }
  ASSERT_EQ(holds.size(), 5u);
  EXPECT_EQ(holds[0]["args"]["path"], "steal");
  EXPECT_EQ(holds[0]["cname"], "terrible");
  EXPECT_EQ(holds[1]["args"]["path"], "reserved");
  EXPECT_EQ(holds[2]["args"]["path"], "invalid");
  EXPECT_EQ(holds[2]["cname"], "black");
  EXPECT_EQ(holds[4]["args"]["path"], "fast");
}

TEST(LockLog, HostileRecordsAreRejectedNotTrusted) {
  LogImage image(1, 10);
  const GuestClock clock(ClockPair{0, 0, 0}, ClockPair{1'000'000, 1'000'000, 0}, 0, 0);
  auto* r = image.records(0);
  r[0] = {100, 50, 200, 0, 0};          // acquired before arrival
  r[1] = {100, 200, 150, 0, 0};         // released before acquired
  r[2] = {100, 200, 300, 7, 0};         // lock slot out of range
  r[3] = {100, 200, 5'000'000, 0, 0};   // outside the run
  r[4] = {100, 200, 300, 0, 0};         // good
  image.header(0).count = ~std::uint64_t{0};  // claims far more than its capacity
  image.header(0).capacity = ~std::uint64_t{0};  // and rewrote the capacity
  Trace trace = make_trace(1);
  // The window starts at 50: the untouched (zero) records after r[4] fall
  // outside it. count is clamped to the VMM's own capacity.
  const auto stats = read_lock_log(image.memory, image.place, std::vector<GuestClock>(1, clock), 50, 1'000'000, 0, 1, trace);
  EXPECT_EQ(stats.records, 1u);
  EXPECT_EQ(stats.rejected, image.place.capacity - 1 + 1) << "every other record, and the header's count";
  ASSERT_EQ(trace.lock_lane(0).events().size(), 2u);
  EXPECT_EQ(trace.lock_lane(0).events()[0].begin_ns, 100u);
}

// A vCPU's TSC offset that moved during the run misplaces its records by up
// to that much: one outside the run by no more than the slack is kept, its
// times clamped into the run in order; one beyond the slack is rejected.
TEST(LockLog, RecordsMisplacedWithinTheClocksErrorAreClampedNotLost) {
  LogImage image(1, 10);
  const GuestClock clock(ClockPair{0, 0, 0}, ClockPair{2'000'000, 2'000'000, 0}, 0, 0);
  auto* r = image.records(0);
  r[0] = {900, 1200, 1500, 0, 0};              // starts 100 before the window
  r[1] = {500'000, 600'000, 1'000'400, 0, 0};  // ends 400 after it
  r[2] = {2000, 3000, 4000, 0, 0};             // inside
  r[3] = {400, 500, 600, 0, 0};                // 600 before: beyond the slack
  r[4] = {999'000, 999'500, 1'000'600, 0, 0};  // 600 after: beyond the slack
  image.header(0).count = 5;
  const auto read = [&](std::uint64_t slack_ns, Trace& trace) {
    return read_lock_log(image.memory, image.place, std::vector<GuestClock>(1, clock), 1000, 1'000'000, slack_ns, 1,
                         trace);
  };
  Trace trace = make_trace(1);
  const auto stats = read(500, trace);
  EXPECT_EQ(stats.records, 3u);
  EXPECT_EQ(stats.clamped, 2u);
  EXPECT_EQ(stats.rejected, 2u);
  const auto events = trace.lock_lane(0).events();
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].begin_ns, 1000u) << "clamped to the window's start";
  EXPECT_EQ(events[0].end_ns, 1200u);
  EXPECT_EQ(events[1].end_ns, 1500u);
  EXPECT_EQ(events[3].begin_ns, 600'000u);
  EXPECT_EQ(events[3].end_ns, 1'000'000u) << "clamped to the window's end";
  EXPECT_EQ(events[4].begin_ns, 2000u) << "a record inside is untouched";

  // Without slack the same misplaced records are rejected.
  Trace strict = make_trace(1);
  const auto none = read(0, strict);
  EXPECT_EQ(none.records, 1u);
  EXPECT_EQ(none.clamped, 0u);
  EXPECT_EQ(none.rejected, 4u);
}

TEST(TraceWriter, MergeShortWritesRunsOfShortLockSlicesAsOneAndKeepsLongOnes) {
  Trace trace(TraceOptions{100000, 1000});  // merge below 1 us
  trace.begin(1, kOrigin, kExitNames);
  auto& lane = trace.lock_lane(0);
  std::uint64_t t = kOrigin;
  // Three short acquisitions back to back: wait 100, hold 200, gap 100.
  for (int i = 0; i < 3; ++i) {
    lane.add({t, t + 100, 0, 2, EventKind::kLockWait});
    lane.add({t + 100, t + 300, 0, 2, EventKind::kLockHold});
    t += 400;
  }
  lane.add({t, t + 50000, 0, 2, EventKind::kLockWait});  // a long wait: as it is
  lane.add({t + 50000, t + 50200, 0, 2, EventKind::kLockHold});  // a lone short hold: as it is
  t += 60000;  // a gap longer than the threshold ends a run
  lane.add({t, t + 100, 0, 2, EventKind::kLockWait});
  lane.add({t + 100, t + 300, 0, 2, EventKind::kLockHold});
  const auto doc = nlohmann::json::parse(to_trace_json(trace));
  std::vector<nlohmann::json> xs;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X") xs.push_back(e);
  ASSERT_EQ(xs.size(), 4u);
  EXPECT_EQ(xs[0]["name"], "acquisitions");
  EXPECT_EQ(xs[0]["args"]["slices"], 6);
  EXPECT_EQ(xs[0]["args"]["acquisitions"], 3);
  EXPECT_EQ(xs[0]["args"]["longest_wait_ns"], 100);
  EXPECT_EQ(xs[0]["args"]["paths"], nlohmann::json({{"fast", 3}}));
  EXPECT_DOUBLE_EQ(xs[0]["dur"].get<double>(), 1.1);  // first wait's start to last hold's end
  EXPECT_EQ(xs[1]["name"], "wait");
  EXPECT_DOUBLE_EQ(xs[1]["dur"].get<double>(), 50.0);
  EXPECT_EQ(xs[2]["name"], "hold");
  EXPECT_EQ(xs[3]["name"], "acquisitions");
  EXPECT_EQ(xs[3]["args"]["slices"], 2);
  EXPECT_EQ(doc["metadata"]["lock_merge"]["slices_merged"], 8);
  EXPECT_EQ(doc["metadata"]["lock_merge"]["acquisitions_slices"], 2);
}

}  // namespace
}  // namespace lockvisor::trace
