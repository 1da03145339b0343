// The ELF header of a statically linked executable, as the tests that build
// guest images in memory start them: 64-bit, little-endian, ET_EXEC, with
// `phnum` program headers right after the header.
#pragma once
#include <elf.h>

#include <cstdint>
#include <cstring>

namespace lockvisor::test {

inline Elf64_Ehdr executable_header(std::uint16_t machine, std::uint64_t entry, std::uint16_t phnum) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_entry = entry;
  eh.e_phoff = sizeof eh;
  eh.e_ehsize = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = phnum;
  return eh;
}

}  // namespace lockvisor::test
