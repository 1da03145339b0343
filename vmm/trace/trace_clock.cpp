#include "vmm/trace/trace_clock.h"

#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <time.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <spdlog/spdlog.h>
#include <limits>

namespace lockvisor::trace {
namespace {
constexpr std::uint32_t kMsrIa32Tsc = 0x10;
constexpr int kTries = 32;

// KVM_GET_MSRS with room for one entry: kvm_msrs (nmsrs, pad) followed by
// its flexible array of entries, spelled out. Not <linux/kvm.h>'s kvm_msrs:
// compiled as C++ its __DECLARE_FLEX_ARRAY wrapper puts the entries at
// offset 16, while the kernel (C) reads them at offset 8.
struct OneMsr {
  std::uint32_t nmsrs;
  std::uint32_t pad;
  kvm_msr_entry entry;
};
static_assert(offsetof(OneMsr, entry) == 8);
// The ioctl number encodes the argument's size, which must be the C one (8),
// not sizeof(kvm_msrs) as C++ sees it (16): KVM answers EINVAL to the latter.
struct KvmMsrsHeader {
  std::uint32_t nmsrs;
  std::uint32_t pad;
};
constexpr unsigned long kKvmGetMsrs = _IOWR(KVMIO, 0x88, KvmMsrsHeader);
}  // namespace

std::uint64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

ClockPair sample_clock_pair() {
  ClockPair best;
  best.bracket_cycles = std::numeric_limits<std::uint64_t>::max();
  for (int i = 0; i < kTries; ++i) {
    const std::uint64_t before = __builtin_ia32_rdtsc();
    const std::uint64_t ns = now_ns();
    const std::uint64_t after = __builtin_ia32_rdtsc();
    if (after - before < best.bracket_cycles) best = {before + (after - before) / 2, ns, after - before};
  }
  return best;
}

std::optional<TscOffset> measure_tsc_offset(int vcpu_fd) {
  std::optional<TscOffset> best;
  for (int i = 0; i < kTries; ++i) {
    OneMsr msrs{};
    msrs.nmsrs = 1;
    msrs.entry.index = kMsrIa32Tsc;
    const std::uint64_t before = __builtin_ia32_rdtsc();
    const int rc = ::ioctl(vcpu_fd, kKvmGetMsrs, &msrs);
    const std::uint64_t after = __builtin_ia32_rdtsc();
    if (rc != 1) {
      spdlog::debug("KVM_GET_MSRS(IA32_TSC) on vCPU fd {}: rc {}, {}", vcpu_fd, rc, std::strerror(errno));
      return best;
    }
    const std::uint64_t mid = before + (after - before) / 2;
    const TscOffset sample{static_cast<std::int64_t>(msrs.entry.data - mid), after - before};
    if (!best || sample.bracket_cycles < best->bracket_cycles) best = sample;
  }
  return best;
}

std::optional<std::int64_t> read_tsc_offset_attr(int vcpu_fd) {
  std::uint64_t offset = 0;
  kvm_device_attr attr{};
  attr.group = KVM_VCPU_TSC_CTRL;
  attr.attr = KVM_VCPU_TSC_OFFSET;
  attr.addr = reinterpret_cast<std::uint64_t>(&offset);
  if (::ioctl(vcpu_fd, KVM_GET_DEVICE_ATTR, &attr) != 0) return std::nullopt;
  return static_cast<std::int64_t>(offset);
}

GuestClock::GuestClock(ClockPair start, ClockPair end, std::int64_t offset, std::uint64_t tsc_khz)
    : start_(start), offset_(offset) {
  if (end.tsc > start.tsc && end.ns > start.ns) {
    ns_per_cycle_ = static_cast<double>(end.ns - start.ns) / static_cast<double>(end.tsc - start.tsc);
  } else if (tsc_khz != 0) {
    ns_per_cycle_ = 1e6 / static_cast<double>(tsc_khz);
  }
}

std::int64_t GuestClock::to_ns(std::uint64_t guest_tsc) const {
  // Differences in signed 64 bits: the host TSC of a guest value may lie
  // before the start pair. Wrapping subtraction, then reinterpretation.
  const auto cycles = static_cast<std::int64_t>(guest_tsc - static_cast<std::uint64_t>(offset_) - start_.tsc);
  return static_cast<std::int64_t>(start_.ns) + static_cast<std::int64_t>(static_cast<double>(cycles) * ns_per_cycle_);
}

}  // namespace lockvisor::trace
