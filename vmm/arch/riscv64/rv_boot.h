// Booting the RV64 guest under RISC-V KVM (riscv_boot.h is the contract):
// the image loaded at its link address in RAM, BootInfo at
// kRiscvBootInfoGpa, the device tree at kRiscvFdtGpa, and hart 0's entry
// registers. RISC-V KVM creates every vCPU but the first powered off, and
// SBI HSM hart_start (answered in the kernel) starts them at the guest's
// request, so only hart 0 gets registers here.
//
// A pure function over the RAM mapping: unit-tested without /dev/kvm.
#pragma once
#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "lockvisor/abi/riscv_boot.h"
#include "lockvisor/abi/workload.h"
#include "vmm/loader/elf_loader.h"

namespace lockvisor::arch::riscv64 {

// What the loader requires of the image: riscv64, linked in RAM.
inline constexpr vmm::ElfTarget kRv64Image{EM_RISCV, "riscv64", "EM_RISCV", abi::kRiscvRamBase};

struct RvBootSettings {
  unsigned harts = 1;
  std::uint32_t timebase_hz = 0;  // KVM's timer frequency register
  std::string isa = "rv64imac";
  std::uint32_t flags = 0;        // abi::kBootFlag*
  std::uint32_t sbi_experimental_eid = 0;
  std::uint64_t seed = 0;
  std::string program;            // BootInfo::program
  std::string args;               // BootInfo::args
  std::optional<abi::WorkloadParams> workload;  // kBootFlagWorkload when set
};

// Hart 0's registers at entry (the SBI boot protocol).
struct RvEntry {
  std::uint64_t pc = 0;
  std::uint64_t a0 = 0;  // hart id
  std::uint64_t a1 = 0;  // the device tree
};

// `ram` is guest RAM from abi::kRiscvRamBase, fresh (reads as zero). Throws
// lockvisor::Error (one line) for an image that does not fit, a program name
// or arguments too long, or more harts than the guest has stacks for.
RvEntry prepare_rv_boot(std::span<std::byte> ram, std::span<const std::byte> image, const RvBootSettings& settings);

}  // namespace lockvisor::arch::riscv64
