// Vocabulary shared by the PV-lock backend interface and its implementations:
// no implementation detail (latch words, futexes) lives here.
#pragma once
#include <optional>
#include <string_view>

namespace lockvisor::pvlock {

// --kick: sticky (KVM's pv_unhalted) or lossy (kicks to a running vCPU are lost).
enum class KickMode { kSticky, kLossy };
inline const char* kick_mode_name(KickMode mode) { return mode == KickMode::kLossy ? "lossy" : "sticky"; }
// "sticky" / "lossy"; nullopt for anything else.
inline std::optional<KickMode> parse_kick_mode(std::string_view name) {
  if (name == "sticky") return KickMode::kSticky;
  if (name == "lossy") return KickMode::kLossy;
  return std::nullopt;
}

enum class HaltOutcome {
  kImmediate,  // a pending kick was consumed without blocking
  kPolled,     // the kick arrived while polling, before sleeping
  kWoken,      // slept and was woken by a kick
  kExpired,    // a halt with a time limit reached it with no kick
  kStopped,    // the VMM is stopping
};

}  // namespace lockvisor::pvlock
