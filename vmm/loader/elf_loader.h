// Loading the guest's ELF64 image into guest-physical memory.
//
// The guest is a statically linked, non-PIE executable (ET_EXEC) for the
// target's machine: x86-64, or riscv64 for the RISC-V VMM. The guest runs
// identity-mapped (or with paging off), so every PT_LOAD segment must have
// p_vaddr == p_paddr, and that address is a guest-physical address: an offset
// from the target's memory base into the VMM's guest-memory mapping.
//
// The loader treats the file as hostile input: every offset and size is bounds
// checked with overflow-safe arithmetic before use, and all validation happens
// before the first byte is written, so a rejected image leaves guest memory
// untouched. Every failure is a lockvisor::Error with a one-line message that
// starts with "guest image: ".
#pragma once
#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lockvisor/abi/guest_layout.h"

namespace lockvisor::vmm {

// An image larger than this is certainly not our guest; refusing it early keeps
// a wrong path (say, a disk image) from being slurped into memory.
inline constexpr std::size_t kMaxImageFileBytes = 64ull << 20;

// A real guest has a handful of program headers; the cap bounds the work a
// malformed header can make the loader do.
inline constexpr std::size_t kMaxProgramHeaders = 64;

// The machine an image must be built for (e_machine, named in the error),
// and the guest-physical address guest_memory[0] stands for: x86's guest
// memory starts at GPA 0, RISC-V's RAM at abi::kRiscvRamBase (riscv_boot.h).
struct ElfTarget {
  uint16_t machine = EM_X86_64;
  const char* name = "x86-64";
  const char* machine_constant = "EM_X86_64";
  uint64_t memory_base = 0;
};

struct LoadedImage {
  uint64_t entry;       // e_entry; inside the file-backed part of an executable PT_LOAD
  uint64_t lowest_gpa;  // lowest guest-physical address of any loaded segment
  uint64_t end_gpa;     // one past the highest byte loaded (including bss)
};

// Validates `file` and copies every non-empty PT_LOAD segment into
// `guest_memory` (guest-physical address target.memory_base is
// guest_memory[0]; min_gpa and max_gpa are guest-physical too), zero-filling
// [p_filesz, p_memsz) of each. Each segment must lie entirely inside
// [min_gpa, max_gpa) and inside guest_memory; PT_LOAD segments must not
// overlap; there must be at least one; the entry point must lie in the
// file-backed bytes of an executable (PF_X) PT_LOAD segment. Other program
// header types (PT_NOTE, PT_GNU_STACK, ...) are ignored, as are section headers.
// Throws lockvisor::Error, and then has not written to guest_memory.
// kAlreadyZero: guest_memory is fresh anonymous memory, which reads as zero,
// so the bss is left alone (writing zeros there would only fault in pages
// the guest may never touch: ~400 of them for the built-in guest).
enum class Bss { kZeroFill, kAlreadyZero };
// Maps `length` bytes of the image file from `file_offset` (an offset into
// `file`) over guest memory at `gpa`, all three multiples of the host page
// size, as private copy-on-write pages; false when it cannot, and the loader
// copies those bytes instead. Given one, the loader offers it, for each
// segment whose file offset and address agree modulo the page size, the run
// of pages its file-backed bytes lie in, as Linux maps an ELF segment: a
// partial page at either end belongs to the run only when the bytes it adds
// lie in the file and the window and in no other segment, and at the end only
// when no bss follows. What is not mapped is copied. The pages the guest never
// touches are then never faulted in (the built-in guest: one page copied
// instead of 37).
using MapImagePages = std::function<bool(uint64_t gpa, uint64_t length, uint64_t file_offset)>;
LoadedImage load_elf_image(std::span<const std::byte> file, std::span<std::byte> guest_memory,
                           uint64_t min_gpa = abi::kImageBase, uint64_t max_gpa = abi::kImageLimit,
                           Bss bss = Bss::kZeroFill, const MapImagePages& map_pages = {},
                           const ElfTarget& target = {});

// Every check load_elf_image makes, for guest memory of `memory_bytes`,
// without writing anything: what the load would return, or the Error it
// would throw.
LoadedImage check_elf_image(std::span<const std::byte> file, uint64_t memory_bytes,
                            uint64_t min_gpa = abi::kImageBase, uint64_t max_gpa = abi::kImageLimit,
                            const ElfTarget& target = {});

// Reads the whole file at `path`. Throws lockvisor::Error ("guest image: ...")
// if it is missing or unreadable, a directory, empty, or larger than
// kMaxImageFileBytes. Non-regular files (pipes, process substitution) work;
// they are read until EOF, never past the size limit.
std::vector<std::byte> read_image_file(const std::string& path);

}  // namespace lockvisor::vmm
