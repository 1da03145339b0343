// Reading a trace file back for trace-check: the streamed parse of its
// events and the checks of every value against what the writer can write.
// One file (over 500 lines) because the reader and its checks are one
// definition of the file format as input: a rule split from the code that
// reads the value would drift from it.
#include "vmm/trace/trace_reader.h"

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <string_view>
#include <tuple>

#include "locks/lock_events.h"
#include "locks/pvbounded_tuning.h"
#include "locks/registry.h"
#include "lockvisor/abi/guest_layout.h"
#include "vmm/trace/bound_check.h"
#include "vmm/trace/trace_buffer.h"
#include "vmm/trace/trace_writer.h"
#include "vmm/util/error.h"

namespace lockvisor::trace {
namespace {

using json = nlohmann::json;

// A message quotes at most this many characters of a value from the file:
// enough to recognise it, and the one-line error stays readable whatever the
// file holds (a number of thousands of digits, a path name of a megabyte).
constexpr std::size_t kShownChars = 40;

// `text` cut to kShownChars bytes (never inside a UTF-8 sequence), "…" where it was cut.
std::string clipped(std::string_view text) {
  if (text.size() <= kShownChars) return std::string(text);
  std::size_t n = kShownChars;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return std::string(text.substr(0, n)) + "…";
}

// A value of the file as a message shows it: its JSON text (escaped: one
// line), clipped.
std::string shown(const json& v) { return clipped(v.dump(-1, ' ', false, json::error_handler_t::replace)); }

// The JSON parser's message, with what it quotes ('...': the token it last
// read, which may be the whole of a huge number) clipped.
std::string parser_message(std::string_view what) {
  std::string out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t open = what.find('\'', at);
    if (open == std::string_view::npos) break;
    const std::size_t close = what.find('\'', open + 1);
    const std::size_t end = close == std::string_view::npos ? what.size() : close;
    out.append(what.substr(at, open + 1 - at));
    out += clipped(what.substr(open + 1, end - open - 1));
    if (close == std::string_view::npos) return out;
    out += '\'';
    at = close + 1;
  }
  out.append(what.substr(at));
  return out;
}

// A `ts`/`dur` (microseconds with nanosecond decimals) as nanoseconds. The
// writer's times are within the run (an hour at most); anything else is not
// its file.
std::optional<std::int64_t> us_to_ns(const json& v) {
  if (!v.is_number()) return std::nullopt;
  const double us = v.get<double>();
  if (!std::isfinite(us) || std::fabs(us) > 1e13) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(us * 1000.0));
}

std::string as_us(std::uint64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

// A path name as the writer writes it (acq_path_name): its code, or nullopt.
std::optional<std::uint8_t> path_code(std::string_view name) {
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p)
    if (name == locks::kAcqPathNames[p]) return static_cast<std::uint8_t>(p);
  if (name == kInvalidPathName) return kInvalidPath;
  return std::nullopt;
}

std::string path_names() {
  std::string names;
  for (unsigned p = 0; p < locks::kAcqPathCount; ++p) names += fmt::format("{}, ", locks::kAcqPathNames[p]);
  return names + kInvalidPathName;
}

// Counts by path, the last slot for kInvalidPath.
using PathCounts = std::array<std::uint64_t, locks::kAcqPathCount + 1>;
unsigned path_slot(std::uint8_t path) { return path < locks::kAcqPathCount ? path : locks::kAcqPathCount; }

class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}

  // traceEvents[index]: one of the writer's events, or a one-line usage error.
  void event(const json& e) {
    index_ = events_++;
    if (!e.is_object()) bad("{} is not an event object", shown(e));
    const auto ph_it = e.find("ph");
    if (ph_it == e.end() || !ph_it->is_string()) bad("no ph");
    const std::string& ph = ph_it->get_ref<const std::string&>();
    if (ph == "M" || ph == "f") return;  // thread names, and the kick flows' ends (their starts say it all)
    if (ph != "X" && ph != "s" && ph != "i") bad("ph {} is none the writer writes (M, X, s, f, i)", shown(*ph_it));
    const auto tid_it = e.find("tid");
    if (tid_it == e.end() || !tid_it->is_number_unsigned()) bad("tid {} is no lane", shown(e.value("tid", json())));
    const std::uint64_t tid = tid_it->get<std::uint64_t>();
    const std::uint64_t lane = tid / kHostTidBase, index = tid % kHostTidBase;
    if (lane > 2 || index >= abi::kMaxVcpus) bad("tid {} is no lane of a vCPU", tid);
    const unsigned vcpu = static_cast<unsigned>(index);
    const json ts_value = e.value("ts", json());
    const auto ts = us_to_ns(ts_value);
    if (!ts) bad("ts {} is no time in microseconds", shown(ts_value));
    // Every event is stamped after the run's origin (taken before the VM
    // was built; a lock record converted to before it is clamped to it).
    if (*ts < 0) bad("ts {} is before the run's origin", shown(ts_value));
    const auto begin = static_cast<std::uint64_t>(*ts);
    TracedVcpu& v = at(vcpu);
    const json name_value = e.value("name", json());
    const std::string name = name_value.is_string() ? name_value.get<std::string>() : std::string();
    const json args = e.value("args", json::object());
    if (!args.is_object()) bad("args {} is not an object", shown(args));
    if (ph == "i") {
      // "dropped N events": the lane knows nothing after its last event (a
      // full host lane leaves the vCPU's state unknown as a full vCPU lane).
      if (!name.starts_with("dropped "))
        bad("an instant named {}: the writer's are \"dropped N events\"", shown(name_value));
      const auto dropped = args.find("dropped");
      if (dropped == args.end() || !dropped->is_number_unsigned() || dropped->get<std::uint64_t>() == 0)
        bad("args.dropped {} is no count of events", shown(args.value("dropped", json())));
      if (dropped_ > ~std::uint64_t{0} - dropped->get<std::uint64_t>())
        bad("args.dropped {} overflows", shown(*dropped));
      dropped_ += dropped->get<std::uint64_t>();
      if (lane == 2) lock_lane_dropped_ = true;
      std::optional<std::uint64_t>& until = lane == 2 ? v.lock_lane_until : v.vcpu_lane_until;
      until = until ? std::min(*until, begin) : begin;
      return;
    }
    if (ph == "s") {
      const auto target = args.find("target");
      if (target == args.end() || !target->is_number_unsigned() || target->get<std::uint64_t>() >= abi::kMaxVcpus)
        bad("a kick's args.target {} is no vCPU", shown(args.value("target", json())));
      at(static_cast<unsigned>(target->get<std::uint64_t>())).kicked_ns.push_back(begin);
      return;
    }
    const json dur_value = e.value("dur", json());
    const auto dur = us_to_ns(dur_value);
    if (!dur || *dur < 0) bad("dur {} is no duration in microseconds", shown(dur_value));
    const Span span{begin, begin + static_cast<std::uint64_t>(*dur)};
    end_ = std::max(end_, span.end_ns);
    if (lane == 0) {
      if (name == "guest")
        v.guest.push_back(span);
      else if (name == "halted")
        v.halted.push_back(span);
      else if (name.starts_with("exit "))
        v.exits.push_back(span);
      else if (name.starts_with("parked") || name == "paused")
        v.parked.push_back(span);
      else
        bad("a slice named {} on vCPU {}'s lane", shown(name_value), vcpu);
      return;
    }
    if (lane == 1) {
      if (name != "preempted") bad("a slice named {} on vCPU {}'s host lane", shown(name_value), vcpu);
      v.preempted.push_back(span);
      return;
    }
    lock_slice(vcpu, name, name_value, span, args);
  }

  TraceTimeline finish(json metadata, const json& events) {
    // The parser kept of traceEvents only what the callback did not take:
    // nothing, for the writer's array of events.
    if (!events.is_array()) fail("{}: not a lockvisor trace: traceEvents is {}, not an array", name_, shown(events));
    if (!metadata.is_object()) fail("{}: not a lockvisor trace: no metadata object", name_);
    const auto vcpus = metadata.find("vcpus");
    if (vcpus == metadata.end() || !vcpus->is_number_unsigned() || vcpus->get<std::uint64_t>() == 0 ||
        vcpus->get<std::uint64_t>() > abi::kMaxVcpus)
      fail("{}: not a lockvisor trace: metadata.vcpus {} is no vCPU count (1..{})", name_,
           shown(metadata.value("vcpus", json())), abi::kMaxVcpus);
    t_.vcpus = static_cast<unsigned>(vcpus->get<std::uint64_t>());
    if (t_.vcpu.size() > t_.vcpus)
      fail("{}: not a lockvisor trace: events on vCPU {} of a {}-vCPU trace", name_, t_.vcpu.size() - 1, t_.vcpus);
    t_.vcpu.resize(t_.vcpus);
    for (TracedVcpu& v : t_.vcpu)
      for (auto* spans : {&v.guest, &v.preempted, &v.halted, &v.exits, &v.parked})
        std::sort(spans->begin(), spans->end(), [](const Span& a, const Span& b) { return a.begin_ns < b.begin_ns; });
    t_.begin_ns = 0;
    t_.end_ns = end_;
    if (const auto w = metadata.find("window"); w != metadata.end()) {
      if (!w->is_object()) fail("{}: not a lockvisor trace: metadata.window {} is not an object", name_, shown(*w));
      // A window without a range is the writer's note that it wrote the
      // whole run (worst-wait on a run without lock waits).
      if (w->contains("begin_us") || w->contains("end_us")) {
        // The window's begin may precede the origin (worst-wait's padding): the file covers it from the origin on.
        const auto b = us_to_ns(w->value("begin_us", json())), e = us_to_ns(w->value("end_us", json()));
        if (!b || !e || *e < *b || *e < 0)
          fail("{}: not a lockvisor trace: metadata.window {}..{} is no range in microseconds", name_,
               shown(w->value("begin_us", json())), shown(w->value("end_us", json())));
        t_.begin_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(*b, 0));
        t_.end_ns = static_cast<std::uint64_t>(*e);
        t_.windowed = true;
      } else if (!w->contains("note")) {
        fail("{}: not a lockvisor trace: metadata.window {} has neither begin_us/end_us nor a note", name_, shown(*w));
      }
    }
    check_overlaps();
    check_run_metadata(metadata);
    check_lock_counts(metadata);
    t_.metadata = std::move(metadata);
    t_.file = name_;
    return std::move(t_);
  }

 private:
  template <class... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> what, Args&&... args) {
    fail("{}: not a lockvisor trace: traceEvents[{}]: {}", name_, index_,
         fmt::format(what, std::forward<Args>(args)...));
  }
  template <class... Args>
  [[noreturn]] void bad_metadata(fmt::format_string<Args...> what, Args&&... args) {
    fail("{}: not a lockvisor trace: metadata.{}", name_, fmt::format(what, std::forward<Args>(args)...));
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
  void lock_slice(unsigned vcpu, const std::string& name, const json& name_value, const Span& span, const json& args) {
    if (name == "acquisitions") {
      // --trace-merge-short: its acquisitions counted by path.
      const auto paths = args.find("paths");
      if (paths == args.end() || !paths->is_object()) bad("merged acquisitions without args.paths");
      for (const auto& [path, count] : paths->items()) {
        const auto code = path_code(path);
        if (!code) bad("args.paths names {}, no acquisition path ({})", shown(json(path)), path_names());
        if (!count.is_number_unsigned() || count.get<std::uint64_t>() > (std::uint64_t{1} << 48))
          bad("args.paths.{} {} is no count", path, shown(count));
        merged_paths_[path_slot(*code)] += count.get<std::uint64_t>();
      }
      ++t_.merged_slices;
      return;
    }
    if (name != "wait" && name != "hold") bad("a slice named {} on vCPU {}'s lock lane", shown(name_value), vcpu);
    const auto lock = args.find("lock");
    if (lock == args.end() || !lock->is_number_unsigned() || lock->get<std::uint64_t>() > 0xffffffffu)
      bad("args.lock {} is no lock slot", shown(args.value("lock", json())));
    const auto slot = static_cast<std::uint32_t>(lock->get<std::uint64_t>());
    const auto path_it = args.find("path");
    if (path_it == args.end() || !path_it->is_string())
      bad("args.path {} is no acquisition path ({})", shown(args.value("path", json())), path_names());
    const auto code = path_code(path_it->get_ref<const std::string&>());
    if (!code) bad("args.path {} is no acquisition path ({})", shown(*path_it), path_names());
    const std::uint8_t path = *code;
    std::optional<std::size_t>& open = pending_[vcpu];
    if (name == "wait") {
      open = t_.acquisitions.size();
      t_.acquisitions.push_back({vcpu, slot, span.begin_ns, span.end_ns, std::nullopt, path});
      event_of_.push_back(index_);
      return;
    }
    if (open) {
      TracedAcquisition& a = t_.acquisitions[*open];
      if (a.lock == slot && a.acquired_ns == span.begin_ns && a.path == path) {
        a.released_ns = span.end_ns;
        open.reset();
        return;
      }
    }
    open.reset();
    t_.acquisitions.push_back({vcpu, slot, std::nullopt, span.begin_ns, span.end_ns, path});
    event_of_.push_back(index_);
  }

  // The run's metadata that the checks read, each value as the run wrote
  // it: the run's arguments with the ranges the run itself accepts
  // (pvbounded_tuning.h, the lock registry), and the totals the events must
  // agree with.
  void check_run_metadata(const json& m) {
    if (const auto args = m.find("args"); args != m.end()) {
      if (!args->is_string()) bad_metadata("args {} is not a string", shown(*args));
      check_run_args(m);
    }
    for (const char* key : {"backend", "program"})
      if (const auto it = m.find(key); it != m.end() && (!it->is_string() || it->get_ref<const std::string&>().empty()))
        bad_metadata("{} {} is no name", key, shown(*it));
    if (const auto khz = m.find("tsc_khz");
        khz != m.end() && (!khz->is_number_unsigned() || khz->get<std::uint64_t>() == 0))
      bad_metadata("tsc_khz {} is no TSC rate (a positive number of kHz)", shown(*khz));
    if (const auto dropped = m.find("dropped_events"); dropped != m.end()) {
      if (!dropped->is_number_unsigned()) bad_metadata("dropped_events {} is no count", shown(*dropped));
      // Every lane that dropped events ends with an instant saying how many, whatever the window.
      if (dropped->get<std::uint64_t>() != dropped_)
        bad_metadata("dropped_events {} but the lanes' \"dropped N events\" instants count {}", shown(*dropped),
                     dropped_);
    }
    if (const auto cpus = m.find("vcpu_host_cpus"); cpus != m.end()) {
      if (!cpus->is_array() || cpus->size() != t_.vcpus)
        bad_metadata("vcpu_host_cpus {} is not a list of {} vCPUs' host CPUs", shown(*cpus), t_.vcpus);
      for (std::size_t i = 0; i < cpus->size(); ++i) {
        const json& set = (*cpus)[i];
        bool ok = set.is_null() || (set.is_array() && !set.empty());
        if (set.is_array())
          for (const json& cpu : set) ok = ok && cpu.is_number_unsigned() && cpu.get<std::uint64_t>() < CPU_SETSIZE;
        if (!ok) bad_metadata("vcpu_host_cpus[{}] {} is no set of host CPUs (null or CPU numbers below {})", i,
                              shown(set), CPU_SETSIZE);
      }
    }
    if (const auto nodes = m.find("vcpu_node"); nodes != m.end()) {
      if (!nodes->is_array() || nodes->size() != t_.vcpus)
        bad_metadata("vcpu_node {} is not a list of {} vCPUs' nodes", shown(*nodes), t_.vcpus);
      // Every node holds a vCPU (--vnuma), so there are no more nodes than vCPUs.
      for (std::size_t i = 0; i < nodes->size(); ++i)
        if (!(*nodes)[i].is_number_unsigned() || (*nodes)[i].get<std::uint64_t>() >= t_.vcpus)
          bad_metadata("vcpu_node[{}] {} is no node of a {}-vCPU run", i, shown((*nodes)[i]), t_.vcpus);
    }
    if (const auto tsc = m.find("guest_tsc"); tsc != m.end()) {
      if (!tsc->is_object()) bad_metadata("guest_tsc {} is not an object", shown(*tsc));
      if (const auto error = tsc->find("error_ns");
          error != tsc->end() && !error->is_null() &&
          (!error->is_number() || !std::isfinite(error->get<double>()) || error->get<double>() < 0))
        bad_metadata("guest_tsc.error_ns {} is no error in nanoseconds", shown(*error));
    }
    if (const auto host = m.find("host_preemptions"); host != m.end()) {
      if (!host->is_object()) bad_metadata("host_preemptions {} is not an object", shown(*host));
      if (const auto source = host->find("source"); source != host->end() && !source->is_string())
        bad_metadata("host_preemptions.source {} is not a string", shown(*source));
      if (const auto unseen = host->find("switches_unseen"); unseen != host->end() && !unseen->is_number_unsigned())
        bad_metadata("host_preemptions.switches_unseen {} is no count", shown(*unseen));
    }
  }

  // metadata.args: the guest's "key=value ..." words (run_args). A lock
  // parameter must hold a value the run accepts (it refuses any other before
  // it boots, and the guest again), and `lock` must name a lock of the
  // registry: the checks take the bound and the rules from them.
  void check_run_args(const json& m) {
    for (const auto& [key, value] : run_args(m)) {
      if (key == "lock" && locks::find_lock(value.c_str()) == nullptr)
        bad_metadata("args: lock={} is no lock of this lockvisor", clipped(value));
      const locks::pvb::TuningKey* k = locks::pvb::find_tuning_key(key.data(), key.size());
      if (k == nullptr) continue;
      std::uint64_t n = 0;
      switch (locks::pvb::check_tuning_value(*k, value.c_str(), &n)) {
        case locks::pvb::TuningCheck::kNotAValue: {
          char accepted[160];
          locks::pvb::describe_accepted(*k, accepted, sizeof accepted);
          bad_metadata("args: {}={} is not a valid value ({})", key, clipped(value), accepted);
        }
        case locks::pvb::TuningCheck::kOutOfRange:
          bad_metadata("args: {}={} is out of range {}..{}", key, n, k->min, k->max);
        case locks::pvb::TuningCheck::kValid: break;
      }
    }
  }

  // metadata.locks counts the guest's lock records by path as the run read
  // them; the file holds each as a lock slice (merged ones counted in their
  // args.paths). A file that holds all of them (no window, no lock lane
  // full) must hold exactly those counts, any other no more: a path renamed
  // or a lock lane emptied shows here. A path the VMM did not know is
  // written "invalid" and is accepted only as often as metadata counted one.
  void check_lock_counts(const json& m) {
    PathCounts in_file{};
    for (const TracedAcquisition& a : t_.acquisitions)
      // In a merged trace a hold may be cut from its wait by a merge; the
      // acquisition is counted once, at its wait.
      if (t_.merged_slices == 0 || a.arrive_ns) ++in_file[path_slot(a.path)];
    for (unsigned p = 0; p < in_file.size(); ++p) in_file[p] += merged_paths_[p];
    std::uint64_t total = 0;
    for (std::uint64_t n : in_file) total += n;
    const bool whole = !t_.windowed && !lock_lane_dropped_;
    const auto check = [&](const std::string& key, std::optional<std::uint64_t> said, std::uint64_t held,
                           const std::string& what) {
      const std::string says = said ? fmt::format("is {}", *said) : std::string("is absent (none)");
      if (whole && held != said.value_or(0))
        bad_metadata("{} {} but the file, which holds the whole run, has {} {}", key, says, held, what);
      if (!whole && held > said.value_or(0))
        bad_metadata("{} {} but the file has {} {}, more than the run recorded", key, says, held, what);
    };
    const auto count = [&](const json& object, const char* key, const std::string& full_key) {
      const auto it = object.find(key);
      if (it == object.end()) return std::optional<std::uint64_t>();
      if (!it->is_number_unsigned()) bad_metadata("{} {} is no count", full_key, shown(*it));
      return std::optional<std::uint64_t>(it->get<std::uint64_t>());
    };
    const std::string invalid = fmt::format("acquisitions with path \"{}\"", kInvalidPathName);
    const auto locks = m.find("locks");
    if (locks == m.end()) {
      check("locks.invalid_path", std::nullopt, in_file[locks::kAcqPathCount], invalid);
      return;
    }
    if (!locks->is_object()) bad_metadata("locks {} is not an object", shown(*locks));
    for (const char* key : {"records_per_vcpu", "dropped_in_guest", "rejected", "clamped"})
      (void)count(*locks, key, fmt::format("locks.{}", key));
    check("locks.invalid_path", count(*locks, "invalid_path", "locks.invalid_path"), in_file[locks::kAcqPathCount],
          invalid);
    if (const auto records = count(*locks, "records", "locks.records"))
      check("locks.records", records, total, "acquisitions");
    const auto by_path = locks->find("by_path");
    if (by_path == locks->end()) return;
    if (!by_path->is_object()) bad_metadata("locks.by_path {} is not an object", shown(*by_path));
    for (const auto& item : by_path->items())
      if (const auto code = path_code(item.key()); !code || *code == kInvalidPath)
        bad_metadata("locks.by_path names {}, no acquisition path", shown(json(item.key())));
    for (unsigned p = 0; p < locks::kAcqPathCount; ++p) {
      const std::string key = fmt::format("locks.by_path.{}", locks::kAcqPathNames[p]);
      check(key, count(*by_path, locks::kAcqPathNames[p], key).value_or(0), in_file[p],
            fmt::format("{} acquisitions", locks::kAcqPathNames[p]));
    }
  }

  // One vCPU thread is in one KVM_RUN at a time, and takes a lock once at a
  // time (waiting for a lock it holds would never end): on one vCPU no two
  // guest slices overlap, nor two acquisitions of one lock (arrival to
  // release). A file where they do (an event written twice, say) is not the
  // writer's. Slices that only touch (a clamped record's zero-length ones)
  // do not overlap.
  void check_overlaps() const {
    const auto& a = t_.acquisitions;
    const auto first = [](const TracedAcquisition& x) { return x.arrive_ns.value_or(x.acquired_ns); };
    const auto last = [](const TracedAcquisition& x) { return x.released_ns.value_or(x.acquired_ns); };
    std::vector<std::size_t> order(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return std::tuple(a[x].vcpu, a[x].lock, first(a[x])) < std::tuple(a[y].vcpu, a[y].lock, first(a[y]));
    });
    for (std::size_t i = 1; i < order.size(); ++i) {
      const TracedAcquisition &p = a[order[i - 1]], &q = a[order[i]];
      if (p.vcpu == q.vcpu && p.lock == q.lock && first(q) < last(p))
        fail("{}: not a lockvisor trace: traceEvents[{}] and traceEvents[{}]: vCPU {} waits for or holds lock {} "
             "twice at once ({}..{} us and {}..{} us; a vCPU takes a lock once at a time)",
             name_, std::min(event_of_[order[i - 1]], event_of_[order[i]]),
             std::max(event_of_[order[i - 1]], event_of_[order[i]]), p.vcpu, p.lock, as_us(first(p)), as_us(last(p)),
             as_us(first(q)), as_us(last(q)));
    }
    for (unsigned v = 0; v < t_.vcpus; ++v) {
      const std::vector<Span>& guest = t_.vcpu[v].guest;
      std::uint64_t reach = 0;
      for (std::size_t i = 0; i < guest.size(); ++i) {
        if (i != 0 && guest[i].begin_ns < reach)
          fail("{}: not a lockvisor trace: vCPU {}'s guest slices overlap at ts {} us (one KVM_RUN at a time)", name_,
               v, as_us(guest[i].begin_ns));
        reach = std::max(reach, guest[i].end_ns);
      }
    }
  }

  std::string name_;
  std::size_t events_ = 0, index_ = 0;
  TraceTimeline t_;
  std::vector<std::optional<std::size_t>> pending_;
  std::vector<std::size_t> event_of_;  // per acquisition: the traceEvents index of its first slice
  PathCounts merged_paths_{};
  std::uint64_t dropped_ = 0;  // the lanes' "dropped N events", summed
  bool lock_lane_dropped_ = false;
  std::uint64_t end_ = 0;
};

}  // namespace

TraceTimeline read_trace_json(std::istream& in, const std::string& name) {
  Reader reader(name);
  std::string key;
  std::set<std::string> keys;
  bool in_events = false;
  json doc;
  try {
    // traceEvents' elements are read one at a time and dropped: the file
    // never has to fit in memory as a JSON tree. An element that is no
    // object (a number, an array) comes as a value or an array's end.
    doc = json::parse(in, [&](int depth, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::key && depth == 1) {
        key = parsed.get<std::string>();
        // The parser would keep the last of two, the callback read both.
        if (!keys.insert(key).second) fail("{}: not a lockvisor trace: \"{}\" twice", name, clipped(key));
      }
      if (depth == 1 && key == "traceEvents") {
        if (ev == json::parse_event_t::array_start) in_events = true;
        if (ev == json::parse_event_t::array_end) in_events = false;
      }
      if (in_events && depth == 2 &&
          (ev == json::parse_event_t::object_end || ev == json::parse_event_t::array_end ||
           ev == json::parse_event_t::value)) {
        reader.event(parsed);
        return false;
      }
      return true;
    });
  } catch (const json::exception& e) {
    fail("{}: not a lockvisor trace: {}", name, parser_message(e.what()));
  }
  if (!doc.is_object() || !doc.contains("traceEvents")) fail("{}: not a lockvisor trace: no traceEvents", name);
  return reader.finish(doc.value("metadata", json()), doc["traceEvents"]);
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
