// Guest-physical memory layout and CPU state the VMM establishes before the
// first instruction. The guest is identity-mapped (virtual = physical) with
// 2 MiB pages, U/S = 1 at every level so CPL3 code can touch all of memory.
//
//   0x0000_1000  GDT (null, kernel code/data, user data/code, one TSS per vCPU)
//   0x0000_8000  BootInfo (boot_info.h), kBootInfoBytes
//   0x0001_0000  page tables: PML4, PDPT, one PD per GiB of RAM, then the PD
//                and PT that map the run-state pages (kRunStatePdAddr/PtAddr)
//   0x0001_8000  IDT, 256 gates; the VMM loads IDTR, each vCPU fills the gates
//   0x0003_0000  steal-time records (MSR_KVM_STEAL_TIME), kStealTimeStride bytes
//                per vCPU, written by the host once the guest enables them
//   0x0004_0000  the lock probe (lock_probe.h), one record per vCPU
//   0x0006_0000  TSS array, kTssStride bytes per vCPU: the 104-byte TSS (RSP0 =
//                kernel stack) followed by its I/O permission bitmap
//   0x0010_0000  the guest ELF image (PT_LOAD segments must stay in
//                [kImageBase, kImageLimit))
//   ...          free memory for the guest (BootInfo::free_start..free_end)
//   top          per-vCPU stacks (kernel then user), vCPU 0 highest
//
//   0x1_0000_0000  the vCPU run-state pages (vcpu_runstate.h, docs/runstate.md):
//                one read-only memslot of kRunStateBytes at kRunStateGpa, just above the
//                largest possible RAM (kMaxMemoryBytes), so it can never
//                collide with guest memory. Mapped by 4 KiB PTEs, present,
//                U/S = 1, read-only (R/W = 0); the rest of that GiB is unmapped.
#pragma once
#include "lockvisor/abi/types.h"
#include "lockvisor/abi/vcpu_runstate.h"

namespace lockvisor::abi {

// The most vCPUs the freestanding guest's layout holds; below it, the host
// KVM's own limit (KVM_CAP_MAX_VCPUS) is checked at start. 1024 because that
// is x86 KVM's KVM_MAX_VCPUS on current kernels (older ones had 288; the
// nested test machine's 6.1 reports 1024), so on every x86 host we know the
// host's limit is the one that binds. What it costs:
// - every per-vCPU area below 1 MiB is sized for it (the static_asserts
//   below and in lock_probe.h and boot_info.h keep them apart);
// - the guest's per-CPU arrays grow its image (the image's PT_LOAD segments
//   must end below kImageLimit; tests/machine/x86_boot_test.cpp checks the
//   built image);
// - each vCPU's 128 KiB stack block comes out of --memory, and the VMM
//   refuses a --memory too small for the vCPU count before anything runs;
// - APIC ids past 255 (kMaxXapicVcpus): see there.
inline constexpr u32 kMaxVcpus = 1024;

// The most vCPUs whose kicks reach exactly one vCPU with every LAPIC in
// xAPIC mode: APIC id == vCPU index, and the guest takes its id from
// CPUID.1 EBX[31:24], one byte. KVM's KICK_CPU (kvm_pv_kick_cpu_op) is a
// physical-destination message with no source APIC, which KVM matches in
// kvm_apic_match_physical_addr: an xAPIC-mode LAPIC takes id 255 as the
// broadcast, and a destination below 256 also matches every xAPIC-mode vCPU
// whose id has the same low byte (vCPU 300 answers a kick to 44). With more
// vCPUs than this the VMM sets kBootFlagX2apic (boot_info.h) and enables
// KVM_CAP_X2APIC_API with 32-bit ids and without the broadcast quirk: every
// vCPU's entry code switches its LAPIC to x2APIC mode, where a LAPIC matches
// only its own 32-bit x2APIC id (= the vCPU index, CPUID leaf 0xB EDX) and
// only 0xFFFFFFFF broadcasts, so a kick to vCPU 300 wakes vCPU 300 alone.
// Up to this many, nothing changes: the LAPIC stays in xAPIC mode (PVM hosts
// included) unless --pv-wake ipi|nmi asks for x2APIC anyway.
inline constexpr u32 kMaxXapicVcpus = 255;
static_assert(kRunStateMaxVcpus >= kMaxVcpus, "the run-state pages describe every vCPU");

inline constexpr u64 kGdtAddr = 0x1000;
inline constexpr u64 kBootInfoAddr = 0x8000;
inline constexpr u64 kBootInfoBytes = 0x8000;
inline constexpr u64 kPageTableAddr = 0x10000;
inline constexpr u64 kPageTableBytes = 0x8000;  // PML4, PDPT, 4 PDs (kMaxMemoryBytes), run-state PD + PT
inline constexpr u64 kIdtAddr = 0x18000;
inline constexpr u64 kIdtEntries = 256;

// Each vCPU's TSS: the 104-byte 64-bit TSS, then (at kTssIoMapOffset, the
// value of its I/O map base field) an I/O permission bitmap of one bit per
// port for ports [0, kIoBitmapPorts), then the 0xFF byte the CPU requires
// after it. The TSS limit ends at that byte, so every higher port is denied.
inline constexpr u64 kTssAddr = 0x60000;
inline constexpr u64 kTssBytes = 104;
inline constexpr u64 kTssIoMapOffset = kTssBytes;
inline constexpr u64 kIoBitmapPorts = 0x400;  // COM1 (0x3F8) is the highest port the ABI uses
inline constexpr u64 kTssLimit = kTssIoMapOffset + kIoBitmapPorts / 8;  // the 0xFF byte
inline constexpr u64 kTssStride = 256;
static_assert(kTssLimit < kTssStride, "TSS and bitmap outgrew their stride");
// Steal-time records: vCPU i's at kStealTimeAddr + i * kStealTimeStride
// (64-byte aligned, as KVM requires), enabled by the guest's CPL0 entry.
inline constexpr u64 kStealTimeAddr = 0x30000;
inline constexpr u64 kStealTimeStride = 64;
inline constexpr u64 kImageBase = 0x100000;
inline constexpr u64 kImageLimit = 0x1000000;  // 16 MiB
inline constexpr u64 kMaxMemoryBytes = 4ull << 30;

// The vCPU run-state page: guest-physical (= virtual, identity-mapped)
// address, outside RAM. PDPT entry 4 points at kRunStatePdAddr, whose entry 0
// points at kRunStatePtAddr, whose entries 0..kRunStatePages-1 map the pages
// read-only (kRunStateBytes, vcpu_runstate.h).
inline constexpr u64 kRunStateGpa = kMaxMemoryBytes;
inline constexpr u64 kRunStatePdAddr = kPageTableAddr + 0x6000;
inline constexpr u64 kRunStatePtAddr = kPageTableAddr + 0x7000;
static_assert(kRunStateGpa % (1ull << 30) == 0, "the run-state page starts its own GiB (its own PD)");

// Per-vCPU stack block, counted down from the top of memory: vCPU i owns
// [top - (i+1)*kVcpuStackBlockBytes, top - i*kVcpuStackBlockBytes), user stack
// in the lower part, kernel stack above it. Because the block is a power of
// two, CPL3 code finds its own vCPU index from RSP with no privileged state:
//   index = (memory_bytes - rsp) >> kVcpuStackBlockShift.
inline constexpr u64 kVcpuStackBlockShift = 17;
inline constexpr u64 kVcpuStackBlockBytes = 1ull << kVcpuStackBlockShift;  // 128 KiB
inline constexpr u64 kKernelStackBytes = 16 * 1024;
inline constexpr u64 kUserStackBytes = kVcpuStackBlockBytes - kKernelStackBytes;

// GDT selectors.
inline constexpr u16 kSelKernelCode = 0x08;
inline constexpr u16 kSelKernelData = 0x10;
inline constexpr u16 kSelUserData = 0x18 | 3;
inline constexpr u16 kSelUserCode = 0x20 | 3;
inline constexpr u16 kSelFirstTss = 0x28;  // vCPU i: kSelFirstTss + 16 * i
// The GDT's bytes: the five flat descriptors, then one 16-byte TSS
// descriptor per vCPU. Its limit (GDTR, 16 bits) is kGdtBytes - 1.
inline constexpr u64 kGdtBytes = kSelFirstTss + 16 * kMaxVcpus;
static_assert(kGdtBytes - 1 <= 0xFFFF, "the GDT limit is 16 bits");
static_assert(kGdtAddr + kGdtBytes <= kBootInfoAddr, "GDT overlaps BootInfo");
static_assert(kBootInfoAddr + kBootInfoBytes <= kPageTableAddr, "BootInfo overlaps the page tables");
static_assert(kPageTableAddr + kPageTableBytes <= kIdtAddr, "page tables overlap the IDT");
static_assert(kIdtAddr + kIdtEntries * 16 <= kStealTimeAddr, "IDT overlaps the steal-time records");
static_assert(kStealTimeAddr + kStealTimeStride * kMaxVcpus <= kImageBase, "steal-time records overlap the image");
static_assert(kTssAddr + kTssStride * kMaxVcpus <= kImageBase, "TSS array overlaps the image");

// Entry state of every vCPU: 64-bit mode, CPL0, interrupts off, RIP = ELF
// entry, RSP = this vCPU's kernel stack top, RDI = kBootInfoAddr, RSI = vCPU
// index, RDX = this vCPU's user stack top. The guest enters CPL3 itself
// (iretq) with RFLAGS.IOPL = 0: its doorbells work from CPL3 because the TSS
// I/O bitmap grants their ports (doorbell.h), the one mechanism PVM honours.
inline constexpr u64 kRflagsIoplMask = 3ull << 12;

}  // namespace lockvisor::abi
