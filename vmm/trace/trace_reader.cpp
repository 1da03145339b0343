#include "vmm/trace/trace_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>

#include "locks/lock_events.h"
#include "lockvisor/abi/guest_layout.h"
#include "vmm/trace/trace_buffer.h"
#include "vmm/trace/trace_writer.h"
#include "vmm/util/error.h"

namespace lockvisor::trace {
namespace {

using json = nlohmann::json;

// A `ts`/`dur` (microseconds with nanosecond decimals) as nanoseconds. The
// writer's times are within the run (an hour at most); anything else is not
// its file.
std::optional<std::int64_t> us_to_ns(const json& v) {
  if (!v.is_number()) return std::nullopt;
  const double us = v.get<double>();
  if (!std::isfinite(us) || std::fabs(us) > 1e13) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(us * 1000.0));
}

std::uint8_t path_code(const json& args) {
  const auto it = args.find("path");
  if (it == args.end() || !it->is_string()) return kInvalidPath;
  const std::string& name = it->get_ref<const std::string&>();
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p)
    if (name == locks::kAcqPathNames[p]) return static_cast<std::uint8_t>(p);
  return kInvalidPath;
}

class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}

  // One element of traceEvents; false: not the writer's format (why_ says).
  bool event(const json& e) {
    if (!e.is_object()) return bad("an event that is not an object");
    const std::string ph = e.value("ph", "");
    if (ph == "M" || ph == "f") return true;
    const auto tid_it = e.find("tid");
    if (tid_it == e.end() || !tid_it->is_number_unsigned()) return bad("an event without a valid tid");
    const std::uint64_t tid = tid_it->get<std::uint64_t>();
    const std::uint64_t lane = tid / kHostTidBase, index = tid % kHostTidBase;
    if (lane > 2 || index >= abi::kMaxVcpus) return bad(fmt::format("tid {} is no lane of a vCPU", tid));
    const unsigned vcpu = static_cast<unsigned>(index);
    const auto ts = us_to_ns(e.value("ts", json()));
    if (!ts) return bad(fmt::format("an event on tid {} without a valid ts", tid));
    const std::uint64_t begin = static_cast<std::uint64_t>(std::max<std::int64_t>(*ts, 0));
    TracedVcpu& v = at(vcpu);
    const std::string name = e.value("name", "");
    if (ph == "i") {
      // "dropped N events": the lane knows nothing after its last event (a
      // full host lane leaves the vCPU's state unknown as a full vCPU lane).
      if (name.rfind("dropped ", 0) == 0) {
        std::optional<std::uint64_t>& until = lane == 2 ? v.lock_lane_until : v.vcpu_lane_until;
        until = until ? std::min(*until, begin) : begin;
      }
      return true;
    }
    if (ph == "s") {
      const json args = e.value("args", json::object());
      const auto target = args.find("target");
      if (target == args.end() || !target->is_number_unsigned() || target->get<std::uint64_t>() >= abi::kMaxVcpus)
        return bad("a kick without a valid target");
      at(static_cast<unsigned>(target->get<std::uint64_t>())).kicked_ns.push_back(begin);
      return true;
    }
    if (ph != "X") return true;
    const auto dur = us_to_ns(e.value("dur", json()));
    if (!dur || *dur < 0) return bad(fmt::format("a slice on tid {} without a valid dur", tid));
    const Span span{begin, begin + static_cast<std::uint64_t>(*dur)};
    end_ = std::max(end_, span.end_ns);
    if (lane == 0) {
      if (name == "guest")
        v.guest.push_back(span);
      else if (name == "halted")
        v.halted.push_back(span);
      else if (name.rfind("exit ", 0) == 0)
        v.exits.push_back(span);
      else if (name.rfind("parked", 0) == 0 || name == "paused")
        v.parked.push_back(span);
      return true;
    }
    if (lane == 1) {
      if (name == "preempted") v.preempted.push_back(span);
      return true;
    }
    return lock_slice(vcpu, name, span, e.value("args", json::object()));
  }

  TraceTimeline finish(json metadata) {
    if (!why_.empty()) fail("{}: not a lockvisor trace: {}", name_, why_);
    if (!metadata.is_object()) fail("{}: not a lockvisor trace: no metadata object", name_);
    const auto vcpus = metadata.find("vcpus");
    if (vcpus == metadata.end() || !vcpus->is_number_unsigned() || vcpus->get<std::uint64_t>() == 0 ||
        vcpus->get<std::uint64_t>() > abi::kMaxVcpus)
      fail("{}: not a lockvisor trace: metadata.vcpus is missing or out of range", name_);
    t_.vcpus = static_cast<unsigned>(vcpus->get<std::uint64_t>());
    if (t_.vcpu.size() > t_.vcpus)
      fail("{}: events on vCPU {} of a {}-vCPU trace", name_, t_.vcpu.size() - 1, t_.vcpus);
    t_.vcpu.resize(t_.vcpus);
    for (TracedVcpu& v : t_.vcpu)
      for (auto* spans : {&v.guest, &v.preempted, &v.halted, &v.exits, &v.parked})
        std::sort(spans->begin(), spans->end(), [](const Span& a, const Span& b) { return a.begin_ns < b.begin_ns; });
    t_.begin_ns = 0;
    t_.end_ns = end_;
    if (const auto w = metadata.find("window"); w != metadata.end() && w->is_object()) {
      const auto b = us_to_ns(w->value("begin_us", json())), e = us_to_ns(w->value("end_us", json()));
      if (!b || !e || *e < *b) fail("{}: not a lockvisor trace: metadata.window without begin_us/end_us", name_);
      t_.begin_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(*b, 0));
      t_.end_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(*e, 0));
      t_.windowed = true;
    }
    t_.metadata = std::move(metadata);
    return std::move(t_);
  }

 private:
  bool bad(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return false;
  }
  TracedVcpu& at(unsigned vcpu) {
    if (t_.vcpu.size() <= vcpu) {
      t_.vcpu.resize(vcpu + 1);
      pending_.resize(vcpu + 1);
    }
    return t_.vcpu[vcpu];
  }

  // A wait opens a record; the hold that starts where it ended closes it
  // (the writer puts them next to each other on the lane).
  bool lock_slice(unsigned vcpu, const std::string& name, const Span& span, const json& args) {
    if (name == "acquisitions") {
      ++t_.merged_slices;
      return true;
    }
    if (name != "wait" && name != "hold") return true;
    const auto lock = args.find("lock");
    if (lock == args.end() || !lock->is_number_unsigned() || lock->get<std::uint64_t>() > 0xffffffffu)
      return bad("a lock slice without a valid lock slot");
    const auto slot = static_cast<std::uint32_t>(lock->get<std::uint64_t>());
    const std::uint8_t path = path_code(args);
    std::optional<std::size_t>& open = pending_[vcpu];
    if (name == "wait") {
      open = t_.acquisitions.size();
      t_.acquisitions.push_back({vcpu, slot, span.begin_ns, span.end_ns, std::nullopt, path});
      return true;
    }
    if (open) {
      TracedAcquisition& a = t_.acquisitions[*open];
      if (a.lock == slot && a.acquired_ns == span.begin_ns) {
        a.released_ns = span.end_ns;
        open.reset();
        return true;
      }
    }
    open.reset();
    t_.acquisitions.push_back({vcpu, slot, std::nullopt, span.begin_ns, span.end_ns, path});
    return true;
  }

  std::string name_;
  std::string why_;
  TraceTimeline t_;
  std::vector<std::optional<std::size_t>> pending_;
  std::uint64_t end_ = 0;
};

}  // namespace

TraceTimeline read_trace_json(std::istream& in, const std::string& name) {
  Reader reader(name);
  std::string key;
  json doc;
  try {
    // traceEvents' elements are read one at a time and dropped: the file
    // never has to fit in memory as a JSON tree.
    doc = json::parse(in, [&](int depth, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::key && depth == 1) key = parsed.get<std::string>();
      if (ev == json::parse_event_t::object_end && depth == 2 && key == "traceEvents") {
        reader.event(parsed);
        return false;
      }
      return true;
    });
  } catch (const json::exception& e) {
    fail("{}: not a lockvisor trace: {}", name, e.what());
  }
  if (!doc.is_object() || !doc.contains("traceEvents")) fail("{}: not a lockvisor trace: no traceEvents", name);
  return reader.finish(doc.value("metadata", json()));
}

TraceTimeline read_trace_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("{}: cannot read: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  return read_trace_json(in, path);
}

}  // namespace lockvisor::trace
