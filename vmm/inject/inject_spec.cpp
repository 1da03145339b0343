#include "vmm/inject/inject_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "vmm/util/duration_text.h"
#include "vmm/util/error.h"

namespace lockvisor::inject {
namespace {

using std::chrono::nanoseconds;

constexpr nanoseconds kMinDuration{1000};          // 1 us: shorter parks are below the exit's own cost
constexpr nanoseconds kMaxDuration{1000000000};    // 1 s
constexpr nanoseconds kMinInterval{10000};         // 10 us
constexpr nanoseconds kMaxInterval{10000000000};   // 10 s
constexpr double kMaxRateHz = 100000;
constexpr std::uint64_t kMaxEveryEvents = 1000000000;
constexpr std::uint64_t kMaxCount = 1000000000;

std::string format_duration(nanoseconds d) {
  const auto n = static_cast<std::uint64_t>(d.count());
  if (n != 0 && n % 1000000000 == 0) return fmt::format("{}s", n / 1000000000);
  if (n != 0 && n % 1000000 == 0) return fmt::format("{}ms", n / 1000000);
  if (n != 0 && n % 1000 == 0) return fmt::format("{}us", n / 1000);
  return fmt::format("{}ns", n);
}

struct Parser {
  std::string_view spec;

  [[noreturn]] void bad(const std::string& why) const { fail("--inject '{}': {}", spec, why); }

  std::uint64_t number(std::string_view key, std::string_view text, std::uint64_t min, std::uint64_t max) const {
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
      bad(fmt::format("{}={} is not a non-negative integer", key, text));
    if (ec == std::errc::result_out_of_range || value < min || value > max)
      bad(fmt::format("{}={} is out of range {}..{}", key, text, min, max));
    return value;
  }

  double real(std::string_view key, std::string_view text, double min_exclusive, double max) const {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
      bad(fmt::format("{}={} is not a number", key, text));
    if (value <= min_exclusive || value > max) bad(fmt::format("{}={} is out of range ({}, {}]", key, text, min_exclusive, max));
    return value;
  }

  nanoseconds duration(std::string_view key, std::string_view text, nanoseconds min, nanoseconds max) const {
    const auto split = split_duration_unit(text);
    if (!split) bad(fmt::format("{}={}: expected an integer with a unit (ns, us, ms, s), e.g. 500us", key, text));
    // The range is the duration's, in its own units: a count too large even
    // for 64 bits is out of that range too, not of a bound in nanoseconds.
    const auto out_of_range = [&] {
      bad(fmt::format("{}={} is out of range {}..{}", key, text, format_duration(min), format_duration(max)));
    };
    std::uint64_t n = 0;
    const char* last = split->digits.data() + split->digits.size();
    const auto [end, error] = std::from_chars(split->digits.data(), last, n);
    if (error == std::errc::result_out_of_range) out_of_range();
    if (error != std::errc() || end != last)
      bad(fmt::format("{}={}: expected an integer with a unit (ns, us, ms, s), e.g. 500us", key, text));
    if (n > static_cast<std::uint64_t>(max.count()) / split->ns_per_unit) out_of_range();
    const nanoseconds d{static_cast<std::int64_t>(n * split->ns_per_unit)};
    if (d < min || d > max) out_of_range();
    return d;
  }

  std::optional<unsigned> index_or_all(std::string_view key, std::string_view text, std::string_view all,
                                       unsigned limit) const {
    if (text == all) return std::nullopt;
    return static_cast<unsigned>(number(key, text, 0, limit - 1));
  }
};


}  // namespace

const char* inject_kind_name(InjectKind kind) {
  switch (kind) {
    case InjectKind::kPeriodic: return "periodic";
    case InjectKind::kRandom: return "random";
    case InjectKind::kHolder: return "holder";
    case InjectKind::kWaiter: return "waiter";
  }
  return "?";
}

InjectSpec parse_inject_spec(std::string_view text) {
  const Parser p{text};
  const auto colon = text.find(':');
  if (colon == std::string_view::npos)
    p.bad("expected KIND:key=value,... with KIND periodic, random, holder or waiter");
  const std::string_view kind = text.substr(0, colon);
  InjectSpec s;
  if (kind == "periodic") s.kind = InjectKind::kPeriodic;
  else if (kind == "random") s.kind = InjectKind::kRandom;
  else if (kind == "holder") s.kind = InjectKind::kHolder;
  else if (kind == "waiter") s.kind = InjectKind::kWaiter;
  else p.bad(fmt::format("unknown kind '{}' (periodic, random, holder or waiter)", kind));

  std::map<std::string, std::string, std::less<>> kv;
  std::string_view rest = text.substr(colon + 1);
  for (bool more = true; more;) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) rest = rest.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) p.bad(fmt::format("'{}' is not key=value", item));
    if (!kv.emplace(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1))).second)
      p.bad(fmt::format("'{}' given twice", item.substr(0, eq)));
  }
  const auto take = [&kv](std::string_view key) -> std::optional<std::string> {
    const auto it = kv.find(key);
    if (it == kv.end()) return std::nullopt;
    std::string value = it->second;
    kv.erase(it);
    return value;
  };
  const auto need = [&](std::string_view key) {
    auto v = take(key);
    if (!v) p.bad(fmt::format("{} needs {}=", kind, key));
    return *v;
  };

  s.duration = p.duration("for", need("for"), kMinDuration, kMaxDuration);
  if (auto seed = take("seed")) s.seed = p.number("seed", *seed, 0, ~std::uint64_t{0});
  if (!s.targeted()) {
    s.vcpu = p.index_or_all("vcpu", need("vcpu"), "all", abi::kMaxVcpus);
    if (auto count = take("count")) s.count = p.number("count", *count, 1, kMaxCount);
  }
  switch (s.kind) {
    case InjectKind::kPeriodic:
      s.interval = p.duration("every", need("every"), kMinInterval, kMaxInterval);
      if (auto phase = take("phase")) s.phase = p.duration("phase", *phase, nanoseconds{0}, kMaxInterval);
      if (s.duration >= s.interval)
        p.bad(fmt::format("for={} must be shorter than every={} (the vCPU would never run)",
                          format_duration(s.duration), format_duration(s.interval)));
      break;
    case InjectKind::kRandom:
      s.rate_hz = p.real("rate", need("rate"), 0, kMaxRateHz);
      break;
    case InjectKind::kHolder:
    case InjectKind::kWaiter: {
      s.lock = p.index_or_all("lock", need("lock"), "any", abi::kLockProbeSlots);
      auto every = take("every");
      auto prob = take("p");
      if (every.has_value() == prob.has_value()) p.bad(fmt::format("{} needs exactly one of every=N or p=P", kind));
      if (every) s.every_events = p.number("every", *every, 1, kMaxEveryEvents);
      if (prob) s.probability = p.real("p", *prob, 0, 1);
      break;
    }
  }
  if (!kv.empty()) p.bad(fmt::format("unknown key '{}' for {}", kv.begin()->first, kind));
  return s;
}

std::vector<InjectSpec> parse_inject_specs(std::string_view text) {
  std::vector<InjectSpec> specs;
  while (true) {
    const auto semi = text.find(';');
    specs.push_back(parse_inject_spec(text.substr(0, semi)));
    if (semi == std::string_view::npos) break;
    text = text.substr(semi + 1);
  }
  return specs;
}

std::string format_inject_spec(const InjectSpec& s) {
  std::string out = inject_kind_name(s.kind);
  out += ':';
  if (s.targeted()) {
    out += s.lock ? fmt::format("lock={}", *s.lock) : "lock=any";
    out += s.every_events != 0 ? fmt::format(",every={}", s.every_events) : fmt::format(",p={}", s.probability);
  } else {
    out += s.vcpu ? fmt::format("vcpu={}", *s.vcpu) : "vcpu=all";
    if (s.kind == InjectKind::kPeriodic) out += ",every=" + format_duration(s.interval);
    if (s.kind == InjectKind::kRandom) out += fmt::format(",rate={}", s.rate_hz);
  }
  out += ",for=" + format_duration(s.duration);
  if (s.kind == InjectKind::kPeriodic && s.phase.count() != 0) out += ",phase=" + format_duration(s.phase);
  if (s.count) out += fmt::format(",count={}", *s.count);
  if (s.seed) out += fmt::format(",seed={}", *s.seed);
  return out;
}

void validate_inject_specs(const std::vector<InjectSpec>& specs, unsigned vcpus) {
  bool seen[kInjectKinds] = {};
  for (const auto& s : specs) {
    if (s.vcpu && *s.vcpu >= vcpus)
      fail("--inject '{}': vcpu={} but the VM has {} vCPUs", format_inject_spec(s), *s.vcpu, vcpus);
    if (s.targeted() && std::exchange(seen[static_cast<unsigned>(s.kind)], true))
      fail("--inject: more than one {} schedule (one per targeted kind)", inject_kind_name(s.kind));
  }
}

std::optional<abi::LockProbeConfig> lock_probe_config(const std::vector<InjectSpec>& specs, std::uint64_t run_seed) {
  std::optional<abi::LockProbeConfig> config;
  for (const auto& s : specs) {
    if (!s.targeted()) continue;
    if (!config) config = abi::LockProbeConfig{run_seed, {}};
    // One seed for the probe: a targeted spec's seed= replaces the run's.
    if (s.seed) config->seed = *s.seed;
    abi::PreemptTarget& t =
        config->targets[static_cast<unsigned>(s.kind == InjectKind::kHolder ? abi::PreemptKind::kHolder
                                                                            : abi::PreemptKind::kWaiter)];
    t.every = static_cast<abi::u32>(s.every_events);
    t.lock = s.lock ? *s.lock : abi::kProbeAnyLock;
    // p in (0, 1] -> (0, 2^32]; never 0 (that would mean "off").
    t.chance_q32 = s.every_events != 0 ? 0 : std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ldexp(s.probability, 32)));
    t.duration_ns = static_cast<abi::u64>(s.duration.count());
  }
  return config;
}

}  // namespace lockvisor::inject
