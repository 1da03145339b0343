#include "guest/linux/parameters.h"

#include <array>
#include <charconv>
#include <optional>

#include "guest/linux/console_protocol.h"

namespace lockvisor::linux_init {
namespace {

// A decimal integer in [min, max], nothing else (no sign, no blanks).
std::optional<std::uint64_t> parse_integer(std::string_view text, std::uint64_t min, std::uint64_t max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) return std::nullopt;
  return value;
}

// Decimal seconds with at most three fraction digits, as milliseconds.
std::optional<std::uint64_t> parse_seconds_as_ms(std::string_view text) {
  const std::size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (dot != std::string_view::npos && (fraction.empty() || fraction.size() > 3)) return std::nullopt;
  const auto seconds = parse_integer(whole, 0, kMaxDurationMs / 1000);
  if (!seconds) return std::nullopt;
  std::uint64_t ms = *seconds * 1000;
  if (!fraction.empty()) {
    const auto digits = parse_integer(fraction, 0, 999);
    if (!digits) return std::nullopt;
    std::uint64_t scaled = *digits;
    for (std::size_t i = fraction.size(); i < 3; ++i) scaled *= 10;
    ms += scaled;
  }
  if (ms == 0 || ms > kMaxDurationMs) return std::nullopt;
  return ms;
}

struct Key {
  std::string_view name;  // canonical spelling, with '_'
  std::string_view help;
  // Stores the value; false when it does not parse or is out of range.
  bool (*set)(Parameters&, std::string_view);
};

constexpr std::array kKeys = {
    Key{"workload", "hello, idle, futex-hash, lockref, pipe or spawn (default hello)",
        [](Parameters& p, std::string_view v) {
          if (v.empty() || v.size() > 32) return false;
          p.workload = std::string(v);
          return true;
        }},
    Key{"duration", "seconds to run, decimal, 0 < S <= 3600 (default 1)",
        [](Parameters& p, std::string_view v) {
          const auto ms = parse_seconds_as_ms(v);
          if (ms) p.duration_ms = *ms;
          return ms.has_value();
        }},
    Key{"threads", "workers, 0 = one per online CPU (default 0, at most 256)",
        [](Parameters& p, std::string_view v) {
          const auto n = parse_integer(v, 0, kMaxThreads);
          if (n) p.threads = static_cast<unsigned>(*n);
          return n.has_value();
        }},
    Key{"seed", "seed of the workers' pseudo-random choices (default 1)",
        [](Parameters& p, std::string_view v) {
          const auto n = parse_integer(v, 0, UINT64_MAX);
          if (n) p.seed = *n;
          return n.has_value();
        }},
    Key{"sample_every", "time every Nth operation, 1..1048576 (default 64)",
        [](Parameters& p, std::string_view v) {
          const auto n = parse_integer(v, 1, 1u << 20);
          if (n) p.sample_every = static_cast<unsigned>(*n);
          return n.has_value();
        }},
    Key{"futexes", "futex-hash: futex words shared by the workers, 1..65536 (default 1024)",
        [](Parameters& p, std::string_view v) {
          const auto n = parse_integer(v, 1, 65536);
          if (n) p.futexes = static_cast<unsigned>(*n);
          return n.has_value();
        }},
};

// '-' and '_' are interchangeable in key names.
bool same_key(std::string_view given, std::string_view canonical) {
  if (given.size() != canonical.size()) return false;
  for (std::size_t i = 0; i < given.size(); ++i) {
    const char c = given[i] == '-' ? '_' : given[i];
    if (c != canonical[i]) return false;
  }
  return true;
}

// For error messages: at most 64 bytes of what the user gave, printable.
std::string shown(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 64)) out += (c >= ' ' && c <= '~') ? c : '?';
  if (text.size() > 64) out += "...";
  return out;
}

void apply(ParsedParameters& parsed, std::string_view spelled, std::string_view key, std::string_view value) {
  for (const Key& k : kKeys) {
    if (!same_key(key, k.name)) continue;
    if (!k.set(parsed.parameters, value))
      parsed.errors.push_back("bad value for " + shown(spelled) + ": '" + shown(value) + "' (" + std::string(k.help) + ")");
    return;
  }
  parsed.errors.push_back("unknown parameter " + shown(spelled));
}

}  // namespace

ParsedParameters parse_kernel_command_line(std::string_view cmdline) {
  ParsedParameters parsed;
  std::size_t i = 0;
  while (i < cmdline.size()) {
    while (i < cmdline.size() && (cmdline[i] == ' ' || cmdline[i] == '\t' || cmdline[i] == '\n')) ++i;
    if (i >= cmdline.size()) break;
    // A word ends at a blank outside double quotes; the quotes are dropped
    // (the kernel's own parser accepts key="a b").
    std::string word;
    bool quoted = false;
    for (; i < cmdline.size(); ++i) {
      const char c = cmdline[i];
      if (c == '"') {
        quoted = !quoted;
        continue;
      }
      if (!quoted && (c == ' ' || c == '\t' || c == '\n')) break;
      word += c;
    }
    if (!std::string_view(word).starts_with(kCmdlineKeyPrefix)) continue;
    const std::string_view rest = std::string_view(word).substr(kCmdlineKeyPrefix.size());
    const std::size_t eq = rest.find('=');
    if (eq == std::string_view::npos) {
      parsed.errors.push_back("parameter " + shown(word) + " has no value");
      continue;
    }
    apply(parsed, std::string_view(word).substr(0, kCmdlineKeyPrefix.size() + eq), rest.substr(0, eq), rest.substr(eq + 1));
  }
  return parsed;
}

ParsedParameters parse_program_options(const std::vector<std::string_view>& args) {
  ParsedParameters parsed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      continue;
    }
    if (!arg.starts_with("--") || arg.size() == 2) {
      parsed.errors.push_back("unexpected argument " + shown(arg));
      continue;
    }
    const std::string_view body = arg.substr(2);
    const std::size_t eq = body.find('=');
    if (eq != std::string_view::npos) {
      apply(parsed, arg.substr(0, 2 + eq), body.substr(0, eq), body.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      apply(parsed, arg, body, args[++i]);
    } else {
      parsed.errors.push_back("option " + shown(arg) + " needs a value");
    }
  }
  return parsed;
}

std::string parameters_help() {
  std::string text;
  for (const Key& k : kKeys) {
    std::string option = "--" + std::string(k.name);
    for (char& c : option)
      if (c == '_') c = '-';
    text += "  " + option + std::string(option.size() < 16 ? 16 - option.size() : 1, ' ') + std::string(k.help) +
            "\n      (kernel command line: " + std::string(kCmdlineKeyPrefix) + std::string(k.name) + "=...)\n";
  }
  return text;
}

}  // namespace lockvisor::linux_init
