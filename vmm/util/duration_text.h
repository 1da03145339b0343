// Durations on command lines are an integer with a unit: 500us, 2ms, 1s
// (--inject, --trace-window, --trace-merge-short). This splits one into its
// digits and the unit's scale; each option checks the number and its range
// with its own message.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace lockvisor {

struct DurationText {
  std::string_view digits;  // what precedes the unit (a digit at least at its end; may still be bad)
  std::uint64_t ns_per_unit;
};

// nullopt when `text` does not end in ns, us, ms or s after a digit.
inline std::optional<DurationText> split_duration_unit(std::string_view text) {
  static constexpr std::pair<std::string_view, std::uint64_t> kUnits[] = {
      {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
  for (const auto& [unit, scale] : kUnits) {
    if (text.size() <= unit.size() || !text.ends_with(unit)) continue;
    const std::string_view digits = text.substr(0, text.size() - unit.size());
    if (digits.back() < '0' || digits.back() > '9') continue;  // "5ms" must not match "s"
    return DurationText{digits, scale};
  }
  return std::nullopt;
}

}  // namespace lockvisor
