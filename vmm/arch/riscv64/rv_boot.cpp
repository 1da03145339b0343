#include "vmm/arch/riscv64/rv_boot.h"

#include <cstring>

#include "lockvisor/abi/boot_info.h"
#include "vmm/arch/riscv64/fdt_writer.h"
#include "vmm/util/error.h"

namespace lockvisor::arch::riscv64 {

namespace {

constexpr std::uint64_t kTwoMiB = 2ull << 20;

std::byte* at(std::span<std::byte> ram, std::uint64_t gpa) { return ram.data() + (gpa - abi::kRiscvRamBase); }

}  // namespace

RvEntry prepare_rv_boot(std::span<std::byte> ram, std::span<const std::byte> image, const RvBootSettings& settings) {
  if (settings.harts == 0 || settings.harts > abi::kRiscvMaxHarts)
    fail("--vcpus {}: the RV64 guest runs 1 to {} harts", settings.harts, abi::kRiscvMaxHarts);
  if (settings.program.size() >= abi::kProgramNameBytes)
    fail("program name '{}' is longer than {} bytes", settings.program, abi::kProgramNameBytes - 1);
  if (settings.args.size() >= abi::kProgramArgsBytes)
    fail("program arguments are longer than {} bytes", abi::kProgramArgsBytes - 1);
  const std::uint64_t ram_end = abi::kRiscvRamBase + ram.size();
  // The device tree and BootInfo lie below the image (riscv_boot.h checks
  // they do not overlap); the image may use RAM from its base to the end.
  const auto loaded = vmm::load_elf_image(image, ram, abi::kRiscvImageBase, ram_end, vmm::Bss::kAlreadyZero, {},
                                          kRv64Image);
  const std::uint64_t free_start = (loaded.end_gpa + kTwoMiB - 1) / kTwoMiB * kTwoMiB;
  if (free_start >= ram_end)
    fail("--memory {} MiB is too small for this image (it ends at {:#x})", ram.size() >> 20, loaded.end_gpa);

  auto* boot = reinterpret_cast<abi::BootInfo*>(at(ram, abi::kRiscvBootInfoGpa));
  boot->magic = abi::kBootInfoMagic;
  boot->version = abi::kBootInfoVersion;
  boot->size = sizeof(abi::BootInfo);
  boot->vcpu_count = settings.harts;
  boot->flags = settings.flags;
  // The guest's lock clock is the `time` CSR, counting at the timebase; the
  // report keeps x86's name for its rate (docs/riscv.md, "The primitives").
  boot->tsc_khz = settings.timebase_hz / 1000;
  boot->memory_bytes = ram.size();
  boot->free_start = free_start;
  boot->free_end = ram_end;
  boot->seed = settings.seed;
  boot->sbi_experimental_eid = settings.sbi_experimental_eid;
  std::memcpy(boot->program, settings.program.c_str(), settings.program.size() + 1);
  std::memcpy(boot->args, settings.args.c_str(), settings.args.size() + 1);
  boot->numa_nodes = 1;
  if (settings.workload) {
    boot->workload = *settings.workload;
    abi::stamp_header(boot->workload);
    boot->workload.lock[abi::kLockNameBytes - 1] = '\0';
    boot->flags |= abi::kBootFlagWorkload;
  }

  const auto fdt = build_fdt({.ram_base = abi::kRiscvRamBase,
                              .ram_bytes = ram.size(),
                              .harts = settings.harts,
                              .timebase_hz = settings.timebase_hz,
                              .isa = settings.isa,
                              .boot_info_gpa = abi::kRiscvBootInfoGpa});
  std::memcpy(at(ram, abi::kRiscvFdtGpa), fdt.data(), fdt.size());
  return {.pc = loaded.entry, .a0 = 0, .a1 = abi::kRiscvFdtGpa};
}

}  // namespace lockvisor::arch::riscv64
