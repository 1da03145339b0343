// The CPU state and the tables in memory that the 64-bit Linux boot protocol
// asks for at the kernel's 64-bit entry point.
//
// Source: Documentation/arch/x86/boot.rst, "64-bit boot protocol": the CPU in
// 64-bit mode with paging on; the kernel, boot_params and the command line
// identity-mapped; a GDT with __BOOT_CS (0x10, flat execute/read) and
// __BOOT_DS (0x18, flat read/write), CS = __BOOT_CS and DS/ES/SS =
// __BOOT_DS; interrupts disabled; RSI = the address of boot_params; entry at
// the load address + 0x200. Descriptor and page-table formats: Intel SDM
// vol. 3A, 3.4.5 (segment descriptors) and 4.5 (4-level paging).
//
// The state is given as plain values; vmm/linuxboot/kvm_entry.h copies it into
// kvm_sregs/kvm_regs.
#pragma once
#include <cstdint>
#include <vector>

namespace lockvisor::linuxboot {

inline constexpr std::uint16_t kBootCs = 0x10;
inline constexpr std::uint16_t kBootDs = 0x18;
inline constexpr std::uint64_t kEntryOffset = 0x200;  // 64-bit entry = load address + 0x200

// GDT: null, unused, __BOOT_CS, __BOOT_DS.
inline constexpr std::uint64_t kGdtCode64 = 0x00AF9B000000FFFFull;  // G, L, P, DPL0, code exec/read accessed
inline constexpr std::uint64_t kGdtData = 0x00CF93000000FFFFull;    // G, D/B, P, DPL0, data read/write accessed
inline constexpr unsigned kGdtEntries = 4;

// Identity map of the first 4 GiB with 2 MiB pages (PML4 -> PDPT -> 4 page
// directories): all of RAM (at most 3 GiB) and the MMIO hole. 2 MiB pages
// need no CPUID feature (1 GiB pages would need PDPE1GB, which a VMM's CPU
// model may hide).
inline constexpr std::uint64_t kIdentityMappedBytes = 4ull << 30;
inline constexpr unsigned kPageDirectories = 4;

// Control-register values: CR0 = PE | MP | ET | NE | WP | AM | PG (what the
// project's own guest boots with on every KVM flavour), CR4 = PAE | OSFXSR |
// OSXMMEXCPT, EFER = LME | LMA. RFLAGS = 0x2 (bit 1 is reserved-one; IF = 0).
inline constexpr std::uint64_t kCr0 = 0x80050033;
inline constexpr std::uint64_t kCr4 = 0x620;
inline constexpr std::uint64_t kEfer = 0x500;
inline constexpr std::uint64_t kRflags = 0x2;

struct SegmentState {
  std::uint64_t base = 0;
  std::uint32_t limit = 0;   // in bytes, as KVM wants it (0xFFFFFFFF for a flat segment)
  std::uint16_t selector = 0;
  std::uint8_t type = 0;     // descriptor type field (0xB code exec/read accessed, 0x3 data r/w accessed)
  std::uint8_t present = 0, dpl = 0, db = 0, s = 0, l = 0, g = 0;
};

struct EntryState {
  std::uint64_t rip = 0, rsi = 0, rsp = 0, rflags = kRflags;
  std::uint64_t cr0 = kCr0, cr3 = 0, cr4 = kCr4, efer = kEfer;
  std::uint64_t gdt_base = 0;
  std::uint16_t gdt_limit = 0;
  SegmentState cs;    // __BOOT_CS
  SegmentState data;  // __BOOT_DS, for DS, ES, SS, FS and GS
};

// The GDT's bytes (kGdtEntries descriptors).
std::vector<std::uint8_t> boot_gdt();

// PML4, PDPT and page directories as one block of (2 + kPageDirectories) *
// 4 KiB for address `base`: PML4 at base, PDPT at base + 4 KiB, then the PDs.
std::vector<std::uint8_t> identity_page_tables(std::uint64_t base);

// The BSP's state at the 64-bit entry of a kernel loaded at `kernel_addr`.
EntryState boot_entry_state(std::uint64_t kernel_addr, std::uint64_t boot_params_addr, std::uint64_t page_tables_addr,
                            std::uint64_t gdt_addr, std::uint64_t stack_top);

}  // namespace lockvisor::linuxboot
