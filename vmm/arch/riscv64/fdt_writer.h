// The flattened device tree lockvisor's RISC-V VMM hands its guest in a1
// (the SBI boot protocol; riscv_boot.h): the RAM, the harts with the
// timebase the `time` CSR counts at, and /chosen's BootInfo address.
//
// A pure function from the machine's description to the blob (devicetree
// specification v0.4, "Flattened Devicetree (DTB) Format": version 17, every
// cell big-endian), so that it is unit-tested and checked with dtc without
// /dev/kvm. Only what the guest reads and what the specification requires is
// there: no interrupt controller beyond each hart's local one, no devices (the
// console and power-off are SBI calls).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockvisor::arch::riscv64 {

struct FdtMachine {
  std::uint64_t ram_base = 0;
  std::uint64_t ram_bytes = 0;
  std::uint32_t harts = 1;             // cpu@0 .. cpu@harts-1
  std::uint32_t timebase_hz = 0;       // /cpus/timebase-frequency: KVM's timer frequency register
  std::string isa = "rv64imac";        // each cpu's riscv,isa
  std::uint64_t boot_info_gpa = 0;     // /chosen/lockvisor,boot-info; 0: no such property
};

// Throws lockvisor::Error when `machine` has no hart or no RAM, or when the
// blob would not fit in abi::kRiscvFdtMaxBytes.
std::vector<std::byte> build_fdt(const FdtMachine& machine);

}  // namespace lockvisor::arch::riscv64
