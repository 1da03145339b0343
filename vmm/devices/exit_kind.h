// How lockvisor classifies the exits of a vCPU: each exit is counted under
// one kind, reported by name (JSON "exits", the control socket's stats, the
// trace's exit lanes). One row per kind: the enum and the names are
// generated from the same list, so they cannot disagree.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace lockvisor::devices {

#define LOCKVISOR_EXIT_KINDS(X)                                                   \
  X(kSignal, "signal")       /* KVM_RUN returned EINTR/EAGAIN: a kick or a park */ \
  X(kHlt, "hlt")             /* KVM_EXIT_HLT: a halt the VMM handles */            \
  X(kMmio, "mmio")           /* KVM_EXIT_MMIO nothing claimed */                   \
  X(kIntr, "intr")           /* KVM_EXIT_INTR */                                   \
  X(kHypercall, "hypercall") /* the KVM hypercall doorbell */                      \
  X(kSbi, "sbi")             /* the SBI doorbell */                                \
  X(kUcall, "ucall")         /* the report channel */                              \
  X(kNop, "nop")             /* the bare-exit port (benchmarks) */                 \
  X(kSerial, "serial")       /* the COM1 UART */                                   \
  X(kOtherIo, "other_io")    /* port I/O nothing claimed */                        \
  X(kFault, "fault")         /* the freestanding guest's exception report */       \
  X(kDevice, "device")       /* another emulated device (power, reset) */          \
  X(kSystemEvent, "system_event") /* KVM_EXIT_SYSTEM_EVENT, KVM_EXIT_SHUTDOWN */

enum class ExitKind : unsigned {
#define LOCKVISOR_EXIT_KIND_ENUM(name, text) name,
  LOCKVISOR_EXIT_KINDS(LOCKVISOR_EXIT_KIND_ENUM)
#undef LOCKVISOR_EXIT_KIND_ENUM
      kCount
};

inline constexpr std::size_t kExitKindCount = static_cast<std::size_t>(ExitKind::kCount);

inline constexpr std::array<const char*, kExitKindCount> kExitKindNames = {
#define LOCKVISOR_EXIT_KIND_NAME(name, text) text,
    LOCKVISOR_EXIT_KINDS(LOCKVISOR_EXIT_KIND_NAME)
#undef LOCKVISOR_EXIT_KIND_NAME
};

using ExitCounts = std::array<std::uint64_t, kExitKindCount>;

// Every exit of every kind: how often KVM_RUN returned.
inline std::uint64_t exit_total(const ExitCounts& counts) {
  std::uint64_t total = 0;
  for (const auto n : counts) total += n;
  return total;
}

}  // namespace lockvisor::devices
