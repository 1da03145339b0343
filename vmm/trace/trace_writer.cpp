#include "vmm/trace/trace_writer.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <iterator>
#include <unordered_set>

#include "locks/lock_events.h"

namespace lockvisor::trace {
namespace {

const char* park_name(std::uint32_t cause) { return cause == 0 ? "parked (injected)" : "paused"; }

// The colour of a hold by its path: chrome://tracing's reserved colour names
// ("cname"); Perfetto ignores them and shows args.path. The steal (a queued
// waiter bypassed) and the borrow stand out; queue-order paths are blues.
constexpr const char* kPathColours[] = {"good", "olive", "terrible", "yellow", "rail_response", "rail_idle", "bad"};
static_assert(std::size(kPathColours) == locks::kAcqPathCount, "a colour per path (lock_events.h)");
const char* path_colour(std::uint8_t path) { return path < locks::kAcqPathCount ? kPathColours[path] : "black"; }

class Writer {
 public:
  Writer(const Trace& trace, const ResolvedWindow* window) : trace_(trace), window_(window) {}

  std::string run() {
    out_.append(std::string_view("{\"traceEvents\":[\n"));
    const unsigned n = trace_.vcpus();
    meta(0, "process_name", R"({"name":"lockvisor VM"})");
    for (unsigned i = 0; i < n; ++i) {
      thread(i, fmt::format("vCPU {}", i), 3 * i);
      thread(kHostTidBase + i, fmt::format("vCPU {} host", i), 3 * i + 1);
      thread(kLockTidBase + i, fmt::format("vCPU {} locks", i), 3 * i + 2);
    }
    pair_flows();
    for (unsigned i = 0; i < n; ++i) {
      lane(i, trace_.vcpu_lane(i));
      lane(kHostTidBase + i, trace_.host_lane(i));
      lane(kLockTidBase + i, trace_.lock_lane(i));
    }
    nlohmann::json metadata = trace_.metadata();
    metadata["dropped_events"] = trace_.dropped_events();
    metadata["kick_flows"] = paired_;
    metadata["kick_flows_unpaired"] = unpaired_;
    if (trace_.options().merge_short_ns != 0)
      metadata["lock_merge"] = {{"below_ns", trace_.options().merge_short_ns},
                                {"slices_merged", merged_slices_},
                                {"acquisitions_slices", merged_written_}};
    if (window_) {
      metadata["window"] = window_->description;
      metadata["window"]["events_outside"] = outside_;
    }
    // Drop the separator after the last event.
    if (out_.size() >= 2 && out_[out_.size() - 2] == ',') out_.resize(out_.size() - 2);
    fmt::format_to(std::back_inserter(out_), "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{}}}\n",
                   metadata.dump());
    return fmt::to_string(out_);
  }

 private:
  void meta(unsigned tid, const char* name, std::string_view args) {
    fmt::format_to(std::back_inserter(out_), "{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"{}\",\"args\":{}}},\n", tid,
                   name, args);
  }
  void thread(unsigned tid, const std::string& name, unsigned sort) {
    meta(tid, "thread_name", fmt::format(R"({{"name":"{}"}})", name));
    meta(tid, "thread_sort_index", fmt::format(R"({{"sort_index":{}}})", sort));
  }

  // Microseconds since the origin, with the nanoseconds as decimals.
  std::string ts(std::uint64_t ns) const {
    const auto rel = static_cast<std::int64_t>(ns - trace_.origin_ns());
    const std::uint64_t mag = rel < 0 ? static_cast<std::uint64_t>(-rel) : static_cast<std::uint64_t>(rel);
    return fmt::format("{}{}.{:03}", rel < 0 ? "-" : "", mag / 1000, mag % 1000);
  }
  static std::string dur(std::uint64_t begin, std::uint64_t end) {
    const std::uint64_t d = end > begin ? end - begin : 0;
    return fmt::format("{}.{:03}", d / 1000, d % 1000);
  }

  void slice(unsigned tid, const char* cat, std::string_view name, const Event& e, std::string_view args = "{}",
             const char* colour = nullptr) {
    fmt::format_to(std::back_inserter(out_),
                   "{{\"ph\":\"X\",\"pid\":1,\"tid\":{},\"cat\":\"{}\",\"name\":\"{}\",\"ts\":{},\"dur\":{},\"args\":{}{}}},\n",
                   tid, cat, name, ts(e.begin_ns), dur(e.begin_ns, e.end_ns), args,
                   colour != nullptr ? fmt::format(",\"cname\":\"{}\"", colour) : std::string());
  }
  void flow(unsigned tid, const char* ph, const Event& e, std::uint32_t target) {
    fmt::format_to(std::back_inserter(out_),
                   "{{\"ph\":\"{}\",\"pid\":1,\"tid\":{},\"cat\":\"kick\",\"name\":\"kick\",\"id\":{},\"ts\":{}{}}},\n", ph,
                   tid, e.id, ts(e.begin_ns),
                   *ph == 'f' ? std::string(",\"bp\":\"e\"") : fmt::format(",\"args\":{{\"target\":{}}}", target));
  }

  // Both slices of an acquisition carry its path; the hold is coloured by it.
  void plain_lock_slice(unsigned tid, const Event& e) {
    const bool hold = e.kind == EventKind::kLockHold;
    slice(tid, "lock", hold ? "hold" : "wait", e,
          fmt::format(R"({{"lock":{},"path":"{}"}})", e.arg, acq_path_name(e.path)),
          hold ? path_colour(e.path) : nullptr);
  }

  // --trace-merge-short: a run of short lock slices (each, and each gap,
  // shorter than the threshold) becomes one "acquisitions" slice; a long one
  // (the waits a reader looks for) is always written as it is.
  void lock_slice(unsigned tid, const Event& e) {
    const std::uint64_t limit = trace_.options().merge_short_ns;
    const std::uint64_t length = e.end_ns - e.begin_ns;
    if (limit == 0 || length >= limit) {
      flush_merged(tid);
      plain_lock_slice(tid, e);
      return;
    }
    if (group_.count != 0 && (e.begin_ns < group_.end_ns || e.begin_ns - group_.end_ns >= limit)) flush_merged(tid);
    if (group_.count == 0) group_ = {e, e.begin_ns, e.end_ns, 0, 0, 0, {}};
    group_.end_ns = std::max(group_.end_ns, e.end_ns);
    ++group_.count;
    if (e.kind == EventKind::kLockWait) {
      ++group_.waits;
      group_.longest_wait_ns = std::max(group_.longest_wait_ns, length);
      ++group_.paths[e.path < locks::kAcqPathCount ? e.path : locks::kAcqPathCount];
    }
  }

  void flush_merged(unsigned tid) {
    if (group_.count == 1) {
      plain_lock_slice(tid, group_.first);
    } else if (group_.count > 1) {
      const Event merged{group_.begin_ns, group_.end_ns, 0, group_.first.arg, EventKind::kLockHold};
      // The merged acquisitions by path (each counted once, at its wait).
      std::string paths;
      for (unsigned p = 0; p <= locks::kAcqPathCount; ++p)
        if (group_.paths[p] != 0)
          paths += fmt::format("{}\"{}\":{}", paths.empty() ? "" : ",", acq_path_name(p), group_.paths[p]);
      slice(tid, "lock", "acquisitions", merged,
            fmt::format(R"({{"slices":{},"acquisitions":{},"longest_wait_ns":{},"paths":{{{}}}}})", group_.count,
                        group_.waits, group_.longest_wait_ns, paths));
      merged_slices_ += group_.count;
      ++merged_written_;
    }
    group_.count = 0;
  }

  // What the window holds; no window: all.
  bool inside(const Event& e) const { return window_ == nullptr || window_->holds(e); }

  // Kicks whose wake is in the trace (and the window), and wakes whose kick is.
  void pair_flows() {
    std::unordered_set<std::uint64_t> kicks, wakes;
    for (unsigned i = 0; i < trace_.vcpus(); ++i)
      for (const Event& e : trace_.vcpu_lane(i).events()) {
        if (!inside(e)) continue;
        if (e.kind == EventKind::kKick) kicks.insert(e.id);
        if (e.kind == EventKind::kWake) wakes.insert(e.id);
      }
    for (std::uint64_t id : kicks) {
      if (wakes.count(id)) {
        paired_ids_.insert(id);
        ++paired_;
      } else {
        ++unpaired_;
      }
    }
    for (std::uint64_t id : wakes)
      if (!kicks.count(id)) ++unpaired_;
  }

  void lane(unsigned tid, const TraceBuffer& buffer) {
    std::uint64_t last = trace_.origin_ns();
    for (const Event& e : buffer.events()) {
      last = std::max(last, e.end_ns);
      if (!inside(e)) {
        ++outside_;
        continue;
      }
      switch (e.kind) {
        case EventKind::kGuest: slice(tid, "vcpu", "guest", e); break;
        case EventKind::kExit: {
          const auto names = trace_.exit_names();
          const char* name = e.arg < names.size() ? names[e.arg] : "unknown";
          slice(tid, "exit", fmt::format("exit {}", name), e);
          break;
        }
        case EventKind::kHalt: slice(tid, "halt", "halted", e); break;
        case EventKind::kParked: slice(tid, "park", park_name(e.arg), e); break;
        case EventKind::kPreempted:
          slice(tid, "host", "preempted", e,
                e.arg == 1   ? std::string(R"({"exact":true})")
                : e.arg == 2 ? std::string(R"({"exact":false,"source":"schedstat run_delay growth within one period"})")
                : e.arg == 3 ? fmt::format(R"({{"exact":false,"merged_preemptions":{}}})", e.id)
                             : std::string(R"({"exact":false})"));
          break;
        case EventKind::kLockWait:
        case EventKind::kLockHold: lock_slice(tid, e); break;
        case EventKind::kKick:
          if (paired_ids_.count(e.id)) flow(tid, "s", e, e.arg);
          break;
        case EventKind::kWake:
          if (paired_ids_.count(e.id)) flow(tid, "f", e, 0);
          break;
      }
    }
    flush_merged(tid);
    if (buffer.dropped() != 0)
      fmt::format_to(std::back_inserter(out_),
                     "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":{},\"cat\":\"trace\",\"name\":\"dropped {} events\","
                     "\"ts\":{},\"args\":{{\"dropped\":{}}}}},\n",
                     tid, buffer.dropped(), ts(last), buffer.dropped());
  }

  const Trace& trace_;
  const ResolvedWindow* window_;
  std::uint64_t outside_ = 0;
  struct MergeGroup {
    Event first;
    std::uint64_t begin_ns, end_ns, count, waits, longest_wait_ns;
    std::array<std::uint64_t, locks::kAcqPathCount + 1> paths;  // by path, [kAcqPathCount]: invalid
  } group_{};
  std::uint64_t merged_slices_ = 0, merged_written_ = 0;
  fmt::memory_buffer out_;
  std::unordered_set<std::uint64_t> paired_ids_;
  std::uint64_t paired_ = 0, unpaired_ = 0;
};

}  // namespace

std::string to_trace_json(const Trace& trace, const ResolvedWindow* window) { return Writer(trace, window).run(); }

}  // namespace lockvisor::trace
