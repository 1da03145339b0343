// Where bytes of the running program come from: the file range of the
// executable that holds them, so that a caller can map those pages instead of
// copying them (the built-in guest image, embedded in lockvisor's .rodata).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "vmm/util/unique_fd.h"

namespace lockvisor {

// The executable open for reading, and the offset in it of the first byte of
// the span.
struct ExecutableRange {
  UniqueFd file;
  std::uint64_t offset = 0;
};

// The running executable's file range holding exactly `bytes`, or nullopt
// when the bytes are not wholly inside one of its read-only loaded segments
// (heap data, a shared library, a writable segment that may differ from the
// file) or the file cannot be opened or does not hold them.
//
// Why mapping the range is safe for the life of the process: the kernel
// refuses to open a running executable for writing (ETXTBSY), and a rebuild
// replaces the file rather than rewriting it, so the pages stay what the
// process was started from. The ELF header at `offset` is compared with the
// span's first bytes as a check that the file is the one mapped.
std::optional<ExecutableRange> executable_range(std::span<const std::byte> bytes);

}  // namespace lockvisor
