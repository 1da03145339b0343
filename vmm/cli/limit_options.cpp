#include "vmm/cli/limit_options.h"

#include <string>

#include <fmt/format.h>

namespace lockvisor::cli {
namespace {

// CLI11 would wrap "-1" around to 2^64 - 1 for an unsigned option.
std::string not_negative(const std::string& text) {
  return text.find('-') == std::string::npos ? std::string() : "must not be negative";
}

}  // namespace

void add_limit_options(CLI::App& command, machine::GuestLimits& limits) {
  const machine::GuestLimits defaults;
  command
      .add_option("--max-report-bytes", limits.report_bytes,
                  fmt::format("Guest limit: report-channel bytes the VMM keeps per VM (prints, results, case names; "
                              "suffixes KiB, MiB, GiB; default {} MiB)",
                              defaults.report_bytes >> 20))
      ->check(CLI::Validator(not_negative, "BYTES"))
      ->transform(CLI::AsSizeValue(false));
  command
      .add_option("--max-report-messages", limits.report_messages,
                  fmt::format("Guest limit: report-channel messages per VM (default {})", defaults.report_messages))
      ->check(CLI::Validator(not_negative, "N"))
      ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
  command
      .add_option("--max-open-cases", limits.open_cases,
                  fmt::format("Guest limit: cases open at once per vCPU (default {})", defaults.open_cases))
      ->check(CLI::Validator(not_negative, "N"));
  command
      .add_option("--max-serial-bytes", limits.serial_bytes,
                  fmt::format("Guest limit: COM1 output bytes per VM (suffixes KiB, MiB, GiB; default {} MiB)",
                              defaults.serial_bytes >> 20))
      ->check(CLI::Validator(not_negative, "BYTES"))
      ->transform(CLI::AsSizeValue(false));
}

}  // namespace lockvisor::cli
