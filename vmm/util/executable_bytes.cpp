#include "vmm/util/executable_bytes.h"

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace lockvisor {
namespace {

struct Search {
  std::uintptr_t begin = 0;  // the span, as addresses
  std::uintptr_t end = 0;
  std::optional<std::uint64_t> offset;  // found: its file offset
};

// dl_iterate_phdr visits the main program first; only it is /proc/self/exe.
int find_in_main_program(dl_phdr_info* info, std::size_t, void* data) {
  auto& search = *static_cast<Search*>(data);
  for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    // Read-only segments only: a writable one may have been relocated or
    // written since it was loaded, and then its memory is not its file.
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0) continue;
    const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (search.begin >= start && search.end <= start + ph.p_filesz) {
      search.offset = ph.p_offset + (search.begin - start);
      break;
    }
  }
  return 1;  // stop after the main program
}

}  // namespace

std::optional<ExecutableRange> executable_range(std::span<const std::byte> bytes) {
  if (bytes.empty()) return std::nullopt;
  Search search;
  search.begin = reinterpret_cast<std::uintptr_t>(bytes.data());
  search.end = search.begin + bytes.size();
  dl_iterate_phdr(find_in_main_program, &search);
  if (!search.offset) return std::nullopt;

  int raw = -1;
  do raw = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  while (raw < 0 && errno == EINTR);
  if (raw < 0) return std::nullopt;
  ExecutableRange range{UniqueFd(raw), *search.offset};

  struct stat st {};
  if (::fstat(range.file.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) < range.offset + bytes.size())
    return std::nullopt;
  std::array<std::byte, 64> head{};
  const std::size_t compared = std::min(head.size(), bytes.size());
  if (::pread(range.file.get(), head.data(), compared, static_cast<off_t>(range.offset)) !=
          static_cast<ssize_t>(compared) ||
      std::memcmp(head.data(), bytes.data(), compared) != 0)
    return std::nullopt;
  return range;
}

}  // namespace lockvisor
