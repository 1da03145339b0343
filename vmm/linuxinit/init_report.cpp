// The parser of the /init's console report (init_report.h). One file (over
// 500 lines) because every record's reader shares the frame check, the field
// limits and the problem list that keep untrusted console input bounded.
#include "vmm/linuxinit/init_report.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "guest/linux/console_protocol.h"
#include "vmm/util/guest_text.h"
#include "vmm/metrics/fairness_json.h"
#include "vmm/metrics/summary.h"

namespace lockvisor::linux_guest {
namespace {

namespace proto = lockvisor::linux_init;

// Bounds of values that the protocol does not bound itself.
constexpr std::uint64_t kMaxErrno = 4095;
constexpr std::uint64_t kMaxCpus = 65536;
constexpr std::uint64_t kMaxSampleEvery = 1u << 20;
constexpr std::uint64_t kMaxExitStatus = 255;
constexpr std::size_t kMaxWorkloadNameBytes = 32;
constexpr std::size_t kMaxSourceBytes = 16;
// The workload's elapsed time: its duration, plus however long the workers
// took to notice the stop (generous: a spawn under heavy overcommit).
constexpr std::uint64_t kMaxElapsedNs = (proto::kMaxDurationMs + 600'000) * 1'000'000;

bool is_name(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  for (const char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::optional<std::uint32_t> parse_crc(std::string_view hex) {
  if (hex.size() != 8) return std::nullopt;
  std::uint32_t value = 0;
  for (const char c : hex) {
    unsigned digit;
    if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
    else return std::nullopt;
    value = value << 4 | digit;
  }
  return value;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// For problem messages: a bounded, printable excerpt of guest text.
std::string excerpt(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 48)) out += (c >= ' ' && c <= '~') ? c : '?';
  if (text.size() > 48) out += "...";
  return out;
}

// The fields of one line, and the first reason it must be refused.
class Fields {
 public:
  // key=value tokens, each key once.
  bool parse(std::string_view body) {
    while (!body.empty()) {
      const std::size_t space = body.find(' ');
      const std::string_view token = body.substr(0, space);
      body.remove_prefix(space == std::string_view::npos ? body.size() : space + 1);
      if (space != std::string_view::npos && body.empty()) return fail("a trailing blank");
      const std::size_t eq = token.find('=');
      if (eq == std::string_view::npos) return fail(fmt::format("'{}' is not key=value", excerpt(token)));
      const std::string_view key = token.substr(0, eq);
      if (!is_name(key)) return fail(fmt::format("'{}' is not a field name", excerpt(key)));
      for (const auto& f : fields_)
        if (f.first == key) return fail(fmt::format("field '{}' given twice", key));
      if (fields_.size() == proto::kMaxFieldsPerLine) return fail("too many fields");
      fields_.emplace_back(key, token.substr(eq + 1));
    }
    return true;
  }

  std::optional<std::uint64_t> number(std::string_view key, std::uint64_t min = 0,
                                      std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    const auto raw = find(key);
    if (!raw) {
      fail(fmt::format("no field '{}'", key));
      return std::nullopt;
    }
    return parse_number(key, *raw, min, max);
  }

  // A number that may be absent (nullopt without a failure when absent).
  std::optional<std::uint64_t> optional_number(std::string_view key, std::uint64_t max) {
    const auto raw = find(key);
    if (!raw) return std::nullopt;
    return parse_number(key, *raw, 0, max);
  }

  std::optional<std::string> text(std::string_view key, std::size_t max_bytes = proto::kMaxTextBytes) {
    const auto raw = find(key);
    if (!raw) {
      fail(fmt::format("no field '{}'", key));
      return std::nullopt;
    }
    std::string out;
    for (std::size_t i = 0; i < raw->size(); ++i) {
      const char c = (*raw)[i];
      if (c != '%') {
        out += c;
      } else {
        if (i + 2 >= raw->size()) {
          fail(fmt::format("field '{}' has a cut escape", key));
          return std::nullopt;
        }
        const int high = hex_digit((*raw)[i + 1]);
        const int low = hex_digit((*raw)[i + 2]);
        if (high < 0 || low < 0) {
          fail(fmt::format("field '{}' has a bad escape", key));
          return std::nullopt;
        }
        out += static_cast<char>(high << 4 | low);
        i += 2;
      }
      if (out.size() > max_bytes) {
        fail(fmt::format("field '{}' is longer than {} bytes", key, max_bytes));
        return std::nullopt;
      }
    }
    return out;
  }

  const std::optional<std::string>& failure() const { return failure_; }

 private:
  std::optional<std::string_view> find(std::string_view key) const {
    for (const auto& f : fields_)
      if (f.first == key) return f.second;
    return std::nullopt;
  }

  std::optional<std::uint64_t> parse_number(std::string_view key, std::string_view raw, std::uint64_t min,
                                            std::uint64_t max) {
    std::uint64_t value = 0;
    const char* end = raw.data() + raw.size();
    // from_chars accepts no sign, blank or '+' for unsigned types, but does
    // accept leading zeros: that is harmless, and bounded by the digit count.
    const auto [ptr, ec] = std::from_chars(raw.data(), end, value);
    if (raw.empty() || raw.size() > 20 || ec != std::errc() || ptr != end) {
      fail(fmt::format("field '{}' is not a number: '{}'", key, excerpt(raw)));
      return std::nullopt;
    }
    if (value < min || value > max) {
      fail(fmt::format("field '{}' = {} is outside [{}, {}]", key, value, min, max));
      return std::nullopt;
    }
    return value;
  }

  bool fail(std::string reason) {
    if (!failure_) failure_ = std::move(reason);
    return false;
  }

  std::vector<std::pair<std::string_view, std::string_view>> fields_;
  std::optional<std::string> failure_;
};

// Why a line is refused; nothing when it is taken.
using Refusal = std::optional<std::string>;

// A line that carries the protocol prefix (`line` starts with it): within
// the length bound and with a checksum that matches, its `body` is the text
// between the prefix and the checksum.
Refusal unframe(std::string_view line, std::string_view& body) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.size() > proto::kMaxLineBytes)
    return fmt::format("a line of {} bytes (at most {})", line.size(), proto::kMaxLineBytes);
  const std::string crc_marker = fmt::format(" {}=", proto::kCrcKey);
  const std::size_t crc_at = line.rfind(crc_marker);
  if (crc_at == std::string_view::npos) return "a line without checksum";
  // The marker's blank can be the prefix's own: then the line has no body.
  if (crc_at < proto::kLinePrefix.size()) return "a line with a checksum and nothing else";
  const std::string_view checked = line.substr(0, crc_at);
  const auto crc = parse_crc(line.substr(crc_at + crc_marker.size()));
  body = checked.substr(proto::kLinePrefix.size());
  if (!crc || *crc != proto::crc32(checked)) return fmt::format("a line with a wrong checksum: '{}'", excerpt(body));
  return std::nullopt;
}

// The record name at the front of `body`; `body` keeps the fields after it.
Refusal split_record(std::string_view& body, std::string_view& record) {
  const std::size_t space = body.find(' ');
  record = body.substr(0, space);
  body.remove_prefix(space == std::string_view::npos ? body.size() : space + 1);
  if (!is_name(record)) return fmt::format("'{}' is not a record name", excerpt(record));
  return std::nullopt;
}

// One reader per record: each checks its fields and what the report holds
// so far, and only then adds the record to it. A start line of another
// protocol version is the exception: it is kept (and refused), so that the
// parser can refuse every line after it.
Refusal read_start(Fields& f, InitReport& r, bool& unsupported_version) {
  if (r.started) return "a second start line";
  const auto version = f.number("version");
  if (version && *version != proto::kProtocolVersion) {
    r.started = true;
    r.protocol_version = *version;
    unsupported_version = true;
    return fmt::format("protocol version {} (this lockvisor reads version {})", *version, proto::kProtocolVersion);
  }
  const auto workload = f.text("workload", kMaxWorkloadNameBytes);
  const auto duration = f.number("duration_ms", 0, proto::kMaxDurationMs);
  const auto threads = f.number("threads", 0, proto::kMaxThreads);
  const auto seed = f.number("seed");
  const auto every = f.number("sample_every", 1, kMaxSampleEvery);
  const auto pid1 = f.number("pid1", 0, 1);
  if (f.failure()) return *f.failure();
  r.started = true;
  r.protocol_version = *version;
  r.workload = *workload;
  r.duration_ms = *duration;
  r.threads_requested = *threads;
  r.seed = *seed;
  r.sample_every = *every;
  r.pid1 = *pid1 == 1;
  return std::nullopt;
}

Refusal read_mount(Fields& f, InitReport& r) {
  const auto target = f.text("target");
  const auto error = f.number("errno", 0, kMaxErrno);
  if (f.failure()) return *f.failure();
  if (r.mounts.size() >= proto::kMaxMountLines) return "too many mount lines";
  r.mounts.push_back({*target, *error});
  return std::nullopt;
}

Refusal read_spinlock_log(Fields& f, InitReport& r) {
  if (r.spinlock_log_source) return "a second spinlock_log line";
  const auto source = f.text("source", kMaxSourceBytes);
  const auto error = f.number("errno", 0, kMaxErrno);
  const auto lines = f.number("lines", 0, proto::kMaxSpinlockLines);
  if (f.failure()) return *f.failure();
  r.spinlock_log_source = *source;
  r.spinlock_log_error = *error;
  r.spinlock_log_lines_announced = *lines;
  return std::nullopt;
}

Refusal read_spinlock(Fields& f, InitReport& r) {
  const auto text = f.text("text");
  if (f.failure()) return *f.failure();
  if (r.spinlock_log.size() >= proto::kMaxSpinlockLines) return "too many spinlock lines";
  r.spinlock_log.push_back(*text);
  return std::nullopt;
}

Refusal read_cpus(Fields& f, InitReport& r) {
  if (r.cpus) return "a second cpus line";
  const auto sysconf = f.number("sysconf", 0, kMaxCpus);
  const auto sysfs = f.optional_number("sysfs", kMaxCpus);
  const auto list = f.text("list");
  if (f.failure()) return *f.failure();
  r.cpus = InitCpus{*sysconf, sysfs, *list};
  return std::nullopt;
}

Refusal read_thread(Fields& f, InitReport& r) {
  const auto index = f.number("index", 0, proto::kMaxThreads - 1);
  const auto ops = f.number("ops");
  if (f.failure()) return *f.failure();
  if (r.result) return "after the result line";
  if (!r.thread_ops.emplace(*index, *ops).second) return fmt::format("worker {} given twice", *index);
  return std::nullopt;
}

Refusal read_result(Fields& f, InitReport& r) {
  if (r.result) return "a second result line";
  const auto threads = f.number("threads", 1, proto::kMaxThreads);
  const auto ops = f.number("ops");
  const auto elapsed = f.number("elapsed_ns", 1, kMaxElapsedNs);
  if (f.failure()) return *f.failure();
  r.result = InitResult{*threads, *ops, *elapsed};
  return std::nullopt;
}

Refusal read_latency(Fields& f, InitReport& r) {
  if (r.latency) return "a second latency line";
  const auto every = f.number("every", 1, kMaxSampleEvery);
  const auto samples = f.number("samples", 1);
  const auto p50 = f.number("p50_ns");
  const auto p90 = f.number("p90_ns");
  const auto p99 = f.number("p99_ns");
  const auto p999 = f.number("p999_ns");
  const auto max = f.number("max_ns");
  const auto mean = f.number("mean_ns");
  if (f.failure()) return *f.failure();
  if (!(*p50 <= *p90 && *p90 <= *p99 && *p99 <= *p999 && *p999 <= *max && *mean <= *max))
    return "percentiles out of order";
  r.latency = InitLatency{*every, *samples, *p50, *p90, *p99, *p999, *max, *mean};
  return std::nullopt;
}

// Error lines past the bound are counted, not refused: the init wrote them.
Refusal read_error(Fields& f, InitReport& r) {
  const auto text = f.text("text");
  if (f.failure()) return *f.failure();
  if (r.errors.size() >= proto::kMaxErrorLines) ++r.errors_dropped;
  else r.errors.push_back(*text);
  return std::nullopt;
}

Refusal read_exit(Fields& f, InitReport& r) {
  const auto status = f.number("status", 0, kMaxExitStatus);
  if (f.failure()) return *f.failure();
  r.exit_status = *status;
  return std::nullopt;
}

// A record in its place (after start, before exit) goes to its reader.
Refusal read_record(std::string_view record, Fields& f, InitReport& r, bool& unsupported_version) {
  if (r.exit_status) return "after the exit line";
  if (record != proto::record::kStart && !r.started) return "before the start line";
  if (record == proto::record::kStart) return read_start(f, r, unsupported_version);
  if (record == proto::record::kMount) return read_mount(f, r);
  if (record == proto::record::kSpinlockLog) return read_spinlock_log(f, r);
  if (record == proto::record::kSpinlock) return read_spinlock(f, r);
  if (record == proto::record::kCpus) return read_cpus(f, r);
  if (record == proto::record::kThread) return read_thread(f, r);
  if (record == proto::record::kResult) return read_result(f, r);
  if (record == proto::record::kLatency) return read_latency(f, r);
  if (record == proto::record::kError) return read_error(f, r);
  if (record == proto::record::kExit) return read_exit(f, r);
  return "an unknown record";
}

}  // namespace

std::optional<std::vector<std::uint64_t>> InitReport::per_thread_ops() const {
  if (!result || result->threads == 0 || thread_ops.size() != result->threads) return std::nullopt;
  std::vector<std::uint64_t> ops;
  for (std::uint64_t i = 0; i < result->threads; ++i) {
    const auto it = thread_ops.find(i);
    if (it == thread_ops.end()) return std::nullopt;
    ops.push_back(it->second);
  }
  return ops;
}

void InitReportParser::problem(std::string reason) {
  if (report_.problems.size() < kMaxProblems) report_.problems.push_back(std::move(reason));
  else ++report_.problems_dropped;
}

void InitReportParser::reject(std::string reason) {
  ++report_.lines_rejected;
  problem(std::move(reason));
}

// A line goes through four steps: the protocol prefix (lines without it are
// the kernel's, only counted), the frame (length and checksum), the record
// name, the fields; then the record's reader. Every refusal is counted and
// said once.
void InitReportParser::feed_line(std::string_view line) {
  ++report_.lines_seen;
  const std::size_t at = line.find(proto::kLinePrefix);
  if (at == std::string_view::npos) {
    ++report_.lines_ignored;
    return;
  }
  std::string_view body;
  if (const Refusal refused = unframe(line.substr(at), body)) return reject(*refused);
  std::string_view record;
  if (const Refusal refused = split_record(body, record)) return reject(*refused);
  if (unsupported_version_) {
    ++report_.lines_rejected;  // the reason was given once, at the start line
    return;
  }
  Fields fields;
  if (!fields.parse(body)) return reject(fmt::format("{} line: {}", record, *fields.failure()));
  if (const Refusal refused = read_record(record, fields, report_, unsupported_version_))
    reject(fmt::format("{} line: {}", record, *refused));
}

InitReport InitReportParser::finish() {
  InitReport& r = report_;
  bool consistent = true;
  const auto inconsistent = [&](std::string why) {
    consistent = false;
    problem(std::move(why));
  };
  if (!r.started) inconsistent("no start line: the init did not run, or its output was lost");
  if (!r.exit_status) inconsistent("no exit line: the init did not finish, or its output was lost");
  if (r.spinlock_log_source && r.spinlock_log.size() != r.spinlock_log_lines_announced)
    inconsistent(fmt::format("{} spinlock lines announced, {} received", r.spinlock_log_lines_announced,
                             r.spinlock_log.size()));
  if (r.result) {
    const auto ops = r.per_thread_ops();
    if (!ops) {
      inconsistent(fmt::format("{} workers, thread lines for {} (indices must be 0..{})", r.result->threads,
                               r.thread_ops.size(), r.result->threads - 1));
    } else {
      std::uint64_t sum = 0;
      bool overflow = false;
      for (const std::uint64_t n : *ops) overflow |= __builtin_add_overflow(sum, n, &sum);
      if (overflow || sum != r.result->ops)
        inconsistent(fmt::format("the workers' operations do not add up to the total {}", r.result->ops));
    }
  } else if (!r.thread_ops.empty()) {
    inconsistent("thread lines without a result line");
  }
  if (r.cpus && r.cpus->sysfs && *r.cpus->sysfs != r.cpus->sysconf)
    problem(fmt::format("sysconf counts {} CPUs online, sysfs {}", r.cpus->sysconf, *r.cpus->sysfs));
  r.complete = consistent && !unsupported_version_;
  return r;
}

InitReport parse_init_report(std::string_view text) {
  InitReportParser parser;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    parser.feed_line(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return parser.finish();
}

nlohmann::json init_report_json(const InitReport& r) {
  using nlohmann::json;
  const auto text = [](const std::string& s) { return lockvisor::valid_utf8(s); };
  const auto optional_json = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json j;
  j["workload"] = text(r.workload);
  j["workload_exit_status"] = optional_json(r.exit_status);
  if (r.cpus) j["guest_cpus_online"] = r.cpus->sysfs ? *r.cpus->sysfs : r.cpus->sysconf;
  else j["guest_cpus_online"] = nullptr;
  json log = json::array();
  for (const std::string& line : r.spinlock_log) log.push_back(text(line));
  j["guest_spinlock_log"] = log;

  const auto per_thread = r.per_thread_ops();
  if (r.result) {
    const double seconds = static_cast<double>(r.result->elapsed_ns) * 1e-9;
    j["threads"] = r.result->threads;
    j["ops_total"] = r.result->ops;
    j["duration_s"] = seconds;
    j["ops_per_sec"] = static_cast<double>(r.result->ops) / seconds;
  } else {
    j["threads"] = j["ops_total"] = j["duration_s"] = j["ops_per_sec"] = nullptr;
  }
  j["per_thread_ops"] = per_thread ? json(*per_thread) : json(nullptr);
  const auto fairness = per_thread ? metrics::compute_fairness(*per_thread) : std::nullopt;
  if (fairness) {
    j["fairness"] = {{"over", "per_thread_ops"},
                     {"jain", fairness->jain},
                     {"cv", fairness->cv},
                     {"max_min_ratio", optional_json(fairness->max_min_ratio)}};
    metrics::add_fairness_factors(j["fairness"], fairness->factors);
  } else
    j["fairness"] = nullptr;
  if (r.latency) {
    const InitLatency& l = *r.latency;
    j["latency_ns"] = {{"p50", l.p50_ns}, {"p90", l.p90_ns}, {"p99", l.p99_ns}, {"p999", l.p999_ns},
                       {"max", l.max_ns}, {"mean", l.mean_ns}, {"count", l.samples}, {"every", l.every}};
  } else {
    j["latency_ns"] = nullptr;
  }

  json init;
  init["protocol_version"] = r.protocol_version;
  init["pid1"] = r.pid1;
  init["duration_ms"] = r.duration_ms;
  init["threads_requested"] = r.threads_requested;
  init["seed"] = r.seed;
  init["sample_every"] = r.sample_every;
  json mounts = json::array();
  for (const InitMount& m : r.mounts) mounts.push_back({{"target", text(m.target)}, {"errno", m.error}});
  init["mounts"] = mounts;
  init["spinlock_log_source"] = r.spinlock_log_source ? json(text(*r.spinlock_log_source)) : json(nullptr);
  init["spinlock_log_errno"] = r.spinlock_log_error;
  if (r.cpus)
    init["cpus"] = {{"sysconf", r.cpus->sysconf}, {"sysfs", optional_json(r.cpus->sysfs)}, {"list", text(r.cpus->list)}};
  else
    init["cpus"] = nullptr;
  json errors = json::array();
  for (const std::string& e : r.errors) errors.push_back(text(e));
  init["errors"] = errors;
  init["errors_dropped"] = r.errors_dropped;
  init["complete"] = r.complete;
  init["lines_seen"] = r.lines_seen;
  init["lines_ignored"] = r.lines_ignored;
  init["lines_rejected"] = r.lines_rejected;
  init["problems"] = r.problems;
  init["problems_dropped"] = r.problems_dropped;
  j["guest_init"] = init;
  return j;
}

}  // namespace lockvisor::linux_guest
