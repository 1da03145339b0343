// The few KVM uapi structures whose <linux/kvm.h> definition is wrong in
// C++: __DECLARE_FLEX_ARRAY wraps the flexible array in a struct holding an
// empty struct, which is 1 byte in C++ (0 in C), so the entries land 4 bytes
// late and the ioctl numbers encode the wrong size. These mirror the C
// layout exactly; the static_asserts pin it.
#pragma once
#include <linux/kvm.h>

#include <cstdint>

namespace lockvisor::kvm::uapi {

// CPUID is x86's: RISC-V's <linux/kvm.h> has no kvm_cpuid_entry2, and the
// binary statistics below are all a riscv64 build compiles from here.
#if defined(__x86_64__)
// struct kvm_cpuid2 without its flexible array: entries follow at offset 8.
struct Cpuid2Header {
  std::uint32_t nent;
  std::uint32_t padding;
};
static_assert(sizeof(Cpuid2Header) == 8);

inline constexpr unsigned long kGetSupportedCpuid = _IOWR(KVMIO, 0x05, Cpuid2Header);
inline constexpr unsigned long kSetCpuid2 = _IOW(KVMIO, 0x90, Cpuid2Header);
static_assert(sizeof(kvm_cpuid_entry2) == 40);
#endif

// struct kvm_stats_desc without its flexible name: name follows at offset 16.
struct StatsDesc {
  std::uint32_t flags;
  std::int16_t exponent;
  std::uint16_t size;
  std::uint32_t offset;
  std::uint32_t bucket_size;
};
static_assert(sizeof(StatsDesc) == 16);

}  // namespace lockvisor::kvm::uapi
