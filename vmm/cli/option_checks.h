// Range checks for the numeric options, applied to the option's text before
// CLI11 converts it. CLI11's own conversion is not enough: it reads unsigned
// options with strtoull, which turns "-5" into 2^64 - 5 and "010" into 8, and
// it accepts "nan", "inf" and 1e300 for floating-point ones. Each range is
// shown in --help after the option's type. Also the one check every
// command's options get after parsing: no value may be empty.
#pragma once
#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "vmm/util/error.h"

namespace lockvisor::cli {

inline constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// An unsigned integer in [min, max], decimal or 0x-hexadecimal. Use with
// Option::transform: the text is rewritten in decimal for CLI11.
inline CLI::Validator unsigned_in(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
        const char* first = text.data() + (hex ? 2 : 0);
        const char* last = text.data() + text.size();
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(first, last, value, hex ? 16 : 10);
        if (first == last || error == std::errc::invalid_argument || end != last)
          return fmt::format("'{}' is not a non-negative integer", text);
        if (error == std::errc::result_out_of_range || value < min || value > max)
          return fmt::format("{} is out of range {}..{}", text, min, max);
        text = std::to_string(value);
        return {};
      },
      max == kU64Max ? fmt::format("{}..2^64-1", min) : fmt::format("{}..{}", min, max));
}

// A finite number of seconds in [min, max]; with zero_allowed also exactly 0
// (which the option's help text gives a meaning). Refuses nan, inf, 1e300
// and 1e-300 alike: none is a usable length of time.
inline CLI::Validator seconds_in(double min, double max, bool zero_allowed = false) {
  return CLI::Validator(
      [=](const std::string& text) -> std::string {
        char* end = nullptr;
        const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
        // strtod also reads " 2" and hexadecimal (0x10 = 16 s, 0x1p-3): a
        // duration is written in decimal, so those are typos, not durations.
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) ||
            std::isspace(static_cast<unsigned char>(text.front())) || text.find_first_of("xX") != std::string::npos)
          return fmt::format("'{}' is not a finite decimal number of seconds", text);
        if ((value < min || value > max) && !(zero_allowed && value == 0))
          return fmt::format("{} is out of range {}{}..{} seconds", text, zero_allowed ? "0 or " : "", min, max);
        return {};
      },
      fmt::format("{}{}..{} s", zero_allowed ? "0 or " : "", min, max));
}

// Refuses an option or positional given an empty value, in `app` and the
// subcommands parsed under it (a usage lockvisor::Error naming it). No
// option has a meaning for "": it is what `--json "$OUT"` passes when OUT is
// unset, and taken as given it would mean "write nothing" or "the default"
// without a word. Flags take no value and are not looked at.
inline void refuse_empty_values(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_type_size_max() == 0 || option->count() == 0) continue;
    for (const auto& value : option->results())
      if (value.empty())
        fail("{}: the value is empty (an unset shell variable?); give one", option->get_name());
  }
  for (const CLI::App* command : app.get_subcommands()) refuse_empty_values(*command);
}

}  // namespace lockvisor::cli
