// Vocabulary shared by the PV-lock backend interface and its implementations:
// no implementation detail (latch words, futexes) lives here.
#pragma once

namespace lockvisor::pvlock {

// --kick: sticky (KVM's pv_unhalted) or lossy (kicks to a running vCPU are lost).
enum class KickMode { kSticky, kLossy };

enum class HaltOutcome {
  kImmediate,  // a pending kick was consumed without blocking
  kPolled,     // the kick arrived while polling, before sleeping
  kWoken,      // slept and was woken by a kick
  kStopped,    // the VMM is stopping
};

}  // namespace lockvisor::pvlock
