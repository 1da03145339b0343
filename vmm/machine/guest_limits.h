// Per-VM limits on everything a guest can make the VMM keep or do. A guest
// is untrusted (docs/design.md, "Guests are untrusted"): without these, a
// guest that floods the report channel or the serial port grows the VMM
// without bound until an allocation fails. Every limit is checked BEFORE the
// VMM allocates; exceeding one ends the run as a guest fault (exit code 3)
// with a one-line reason that names the limit and its flag.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "lockvisor/abi/ucall.h"

namespace lockvisor::machine {

struct GuestLimits {
  // Bytes of guest reports the VMM keeps for one VM: PRINT lines, result
  // keys and values (8 bytes each), case names, each item counted with a
  // fixed overhead (kKeptItemOverhead) so that empty strings are not free.
  std::uint64_t report_bytes = 64ull << 20;  // --max-report-bytes
  // Report-channel messages (any type) per VM.
  std::uint64_t report_messages = 1'000'000;  // --max-report-messages
  // Cases begun and not yet ended, per vCPU.
  std::uint64_t open_cases = 256;  // --max-open-cases
  // Bytes written to COM1 per VM (stdout, --serial FILE or the capture).
  std::uint64_t serial_bytes = 16ull << 20;  // --max-serial-bytes
  // Values in one RESULT_ARRAY: the ABI's own bound (no flag).
  std::uint64_t array_values = abi::kUcallMaxArrayLength;

  // What one kept item costs besides its string and value bytes.
  static constexpr std::uint64_t kKeptItemOverhead = 64;
};

// The VM-wide counters the limits apply to, shared by every vCPU thread.
// Each charge is checked before anything is allocated for it: a charge that
// would cross its limit is refused (and not applied), and the caller ends
// the run with the returned reason.
class GuestBudget {
 public:
  explicit GuestBudget(const GuestLimits& limits) : limits_(limits) {}
  const GuestLimits& limits() const { return limits_; }

  // nullopt on success, else the one-line reason.
  std::optional<std::string> charge_message() {
    if (messages_.fetch_add(1, std::memory_order_relaxed) >= limits_.report_messages)
      return fmt::format("report channel: more than {} messages from this VM (limit --max-report-messages)",
                         limits_.report_messages);
    return std::nullopt;
  }
  std::optional<std::string> charge_report_bytes(std::uint64_t bytes) {
    if (!charge(report_bytes_, bytes, limits_.report_bytes))
      return fmt::format("report channel: the guest's reports exceed {} bytes kept for this VM "
                         "(limit --max-report-bytes)",
                         limits_.report_bytes);
    return std::nullopt;
  }
  std::optional<std::string> charge_serial_bytes(std::uint64_t bytes) {
    if (!charge(serial_bytes_, bytes, limits_.serial_bytes))
      return fmt::format("serial: more than {} bytes of COM1 output from this VM (limit --max-serial-bytes)",
                         limits_.serial_bytes);
    return std::nullopt;
  }

  std::uint64_t messages() const { return messages_.load(std::memory_order_relaxed); }
  std::uint64_t report_bytes() const { return report_bytes_.load(std::memory_order_relaxed); }
  std::uint64_t serial_bytes() const { return serial_bytes_.load(std::memory_order_relaxed); }

 private:
  // Adds `amount` to `counter` unless the sum would exceed `limit` (or wrap).
  static bool charge(std::atomic<std::uint64_t>& counter, std::uint64_t amount, std::uint64_t limit) {
    std::uint64_t current = counter.load(std::memory_order_relaxed);
    do {
      if (amount > limit || current > limit - amount) return false;
    } while (!counter.compare_exchange_weak(current, current + amount, std::memory_order_relaxed));
    return true;
  }

  GuestLimits limits_;
  std::atomic<std::uint64_t> messages_{0};
  std::atomic<std::uint64_t> report_bytes_{0};
  std::atomic<std::uint64_t> serial_bytes_{0};
};

}  // namespace lockvisor::machine
