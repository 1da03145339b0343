#include "vmm/loader/elf_loader.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

#include "vmm/util/error.h"

namespace lockvisor::vmm {
namespace {

// The ELF fields are read by copying the raw structures, which is only right
// when the host byte order matches the (little-endian) image.
static_assert(std::endian::native == std::endian::little, "the ELF loader assumes a little-endian host");

// A PT_LOAD segment that passed validation and will be copied.
struct Segment {
  std::size_t index;  // program header index, as `readelf -l` numbers them
  uint64_t gpa;       // first guest-physical byte
  uint64_t end;       // one past the last byte (gpa + p_memsz, known not to overflow)
  uint64_t offset;    // file offset of the file-backed bytes
  uint64_t filesz;    // file-backed bytes; the rest up to `end` is zero-filled
  bool executable;
};

// Copies a T out of the file. The caller has checked that
// [offset, offset + sizeof(T)) lies inside the file; memcpy (not a cast)
// because the file bytes carry no alignment guarantee.
template <typename T>
T read_struct(std::span<const std::byte> file, uint64_t offset) {
  T value;
  std::memcpy(&value, file.subspan(offset, sizeof value).data(), sizeof value);
  return value;
}

Elf64_Ehdr read_and_check_header(std::span<const std::byte> file, const ElfTarget& target) {
  // Magic first, so that a short text file is reported as "not an ELF file"
  // rather than as a truncated ELF.
  if (file.size() >= SELFMAG && std::memcmp(file.data(), ELFMAG, SELFMAG) != 0) {
    fail("guest image: not an ELF file (bad magic)");
  }
  if (file.size() < sizeof(Elf64_Ehdr)) {
    fail("guest image: file is {} bytes, too small for an ELF64 header ({} bytes)", file.size(),
         sizeof(Elf64_Ehdr));
  }
  const auto eh = read_struct<Elf64_Ehdr>(file, 0);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
    fail("guest image: not a 64-bit ELF file (EI_CLASS = {}, expected ELFCLASS64)", eh.e_ident[EI_CLASS]);
  }
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    fail("guest image: not a little-endian ELF file (EI_DATA = {}, expected ELFDATA2LSB)",
         eh.e_ident[EI_DATA]);
  }
  if (eh.e_ident[EI_VERSION] != EV_CURRENT || eh.e_version != EV_CURRENT) {
    fail("guest image: unsupported ELF version {}/{} (expected {})", eh.e_ident[EI_VERSION], eh.e_version,
         EV_CURRENT);
  }
  if (eh.e_type != ET_EXEC) {
    fail("guest image: not an executable (e_type = {}, expected ET_EXEC: link statically, without -pie)",
         eh.e_type);
  }
  if (eh.e_machine != target.machine) {
    fail("guest image: built for machine {}, not {} ({} = {})", eh.e_machine, target.name, target.machine_constant,
         target.machine);
  }
  if (eh.e_ehsize != sizeof(Elf64_Ehdr)) {
    fail("guest image: bad ELF header size e_ehsize = {} (expected {})", eh.e_ehsize, sizeof(Elf64_Ehdr));
  }
  // Checked even when e_phnum == 0: a wrong entry size means a broken writer.
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) {
    fail("guest image: bad program header entry size e_phentsize = {} (expected {})", eh.e_phentsize,
         sizeof(Elf64_Phdr));
  }
  // e_phnum == PN_XNUM (0xffff) would mean "the real count is in section 0";
  // it is far above the cap, so it is rejected here too.
  if (eh.e_phnum > kMaxProgramHeaders) {
    fail("guest image: too many program headers ({}, at most {})", eh.e_phnum, kMaxProgramHeaders);
  }
  // e_phnum <= 64 and e_phentsize == 56, so the product cannot overflow; the
  // sum with the file-controlled e_phoff can.
  const uint64_t table_bytes = uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  uint64_t table_end = 0;
  if (__builtin_add_overflow(eh.e_phoff, table_bytes, &table_end) || table_end > file.size()) {
    fail("guest image: program header table at offset {:#x} ({} bytes) lies outside the {}-byte file",
         eh.e_phoff, table_bytes, file.size());
  }
  return eh;
}

// Validates program header `index` as a PT_LOAD segment against the file and
// the permitted window [lo, hi) of guest-physical addresses.
Segment check_load_segment(std::span<const std::byte> file, std::size_t index, const Elf64_Phdr& ph,
                           uint64_t lo, uint64_t hi) {
  if (ph.p_filesz > ph.p_memsz) {
    fail("guest image: segment {} has p_filesz {:#x} larger than p_memsz {:#x}", index, ph.p_filesz,
         ph.p_memsz);
  }
  uint64_t file_end = 0;
  if (__builtin_add_overflow(ph.p_offset, ph.p_filesz, &file_end) || file_end > file.size()) {
    fail("guest image: segment {} file bytes at offset {:#x} ({:#x} bytes) lie outside the {}-byte file "
         "(truncated image?)",
         index, ph.p_offset, ph.p_filesz, file.size());
  }
  // An empty PT_LOAD occupies no memory, so where it claims to be does not
  // matter; the caller drops it.
  if (ph.p_memsz == 0) return Segment{index, 0, 0, ph.p_offset, 0, false};
  // The guest runs identity-mapped, so code linked at p_vaddr only works if
  // it is loaded at the same physical address.
  if (ph.p_vaddr != ph.p_paddr) {
    fail("guest image: segment {} has p_vaddr {:#x} != p_paddr {:#x} (the guest is identity-mapped)", index,
         ph.p_vaddr, ph.p_paddr);
  }
  uint64_t end = 0;
  if (__builtin_add_overflow(ph.p_paddr, ph.p_memsz, &end)) {
    fail("guest image: segment {} at {:#x} with size {:#x} wraps around the address space", index, ph.p_paddr,
         ph.p_memsz);
  }
  if (ph.p_paddr < lo || end > hi) {
    fail("guest image: segment {} [{:#x}, {:#x}) lies outside guest memory [{:#x}, {:#x})", index, ph.p_paddr,
         end, lo, hi);
  }
  return Segment{index, ph.p_paddr, end, ph.p_offset, ph.p_filesz, (ph.p_flags & PF_X) != 0};
}

// Closes the descriptor on every path out of read_image_file.
class UniqueFd {
 public:
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

std::string errno_message(int err) { return std::system_category().message(err); }

}  // namespace

namespace {

// Faults the pages under `bytes` in with one call rather than one fault per
// page as the copy touches them (fresh guest memory, the image's file pages):
// 35-55 us instead of 50-90 us for the built-in image on the PVM host of
// docs/runstate.md. Only a hint: on a kernel before 5.14 (no
// MADV_POPULATE_*) or memory that refuses it, the copy faults them as before.
void prefault(std::span<const std::byte> bytes, int advice) {
  if (bytes.empty()) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size();
  ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

struct CheckedImage {
  std::uint64_t entry = 0;
  std::vector<Segment> segments;  // sorted by address, non-empty, not overlapping
};

// One past the highest guest-physical address of guest memory.
uint64_t memory_end(uint64_t memory_bytes, const ElfTarget& target) {
  uint64_t end = 0;
  return __builtin_add_overflow(target.memory_base, memory_bytes, &end) ? UINT64_MAX : end;
}

CheckedImage check_image(std::span<const std::byte> file, uint64_t memory_bytes, uint64_t min_gpa, uint64_t max_gpa,
                         const ElfTarget& target) {
  // The effective window is the caller's window clipped to guest memory; it
  // is what the error messages report, since that is what a segment must fit.
  const uint64_t lo = std::max(min_gpa, target.memory_base);
  const uint64_t hi = std::max(lo, std::min<uint64_t>(max_gpa, memory_end(memory_bytes, target)));

  const Elf64_Ehdr eh = read_and_check_header(file, target);

  std::vector<Segment> segments;
  segments.reserve(eh.e_phnum);
  for (std::size_t i = 0; i < eh.e_phnum; ++i) {
    const auto ph = read_struct<Elf64_Phdr>(file, eh.e_phoff + i * sizeof(Elf64_Phdr));
    if (ph.p_type != PT_LOAD) continue;
    const Segment seg = check_load_segment(file, i, ph, lo, hi);
    // An empty PT_LOAD can neither overlap nor hold the entry point.
    if (seg.gpa != seg.end) segments.push_back(seg);
  }
  if (segments.empty()) fail("guest image: no PT_LOAD segments");

  // Sorted by address, overlaps can only occur between neighbours.
  std::ranges::sort(segments, {}, &Segment::gpa);
  for (std::size_t i = 1; i < segments.size(); ++i) {
    const Segment& a = segments[i - 1];
    const Segment& b = segments[i];
    if (b.gpa < a.end) {
      fail("guest image: segments {} [{:#x}, {:#x}) and {} [{:#x}, {:#x}) overlap", a.index, a.gpa, a.end,
           b.index, b.gpa, b.end);
    }
  }

  // Identity mapping makes the (virtual) entry point a physical address. It
  // must be in file-backed bytes: jumping into bss would execute zeros.
  const bool entry_ok = std::ranges::any_of(segments, [&](const Segment& s) {
    return s.executable && eh.e_entry >= s.gpa && eh.e_entry - s.gpa < s.filesz;
  });
  if (!entry_ok) {
    fail("guest image: entry point {:#x} is not inside an executable PT_LOAD segment", eh.e_entry);
  }

  return CheckedImage{eh.e_entry, std::move(segments)};
}

// Copies [from, to) of a segment's file-backed bytes (offsets from its
// start) into guest memory, faulting the pages in with one call each side.
void copy_part(std::span<const std::byte> file, std::span<std::byte> guest_memory, uint64_t memory_base,
               const Segment& s, uint64_t from, uint64_t to) {
  if (from >= to) return;
  const auto src = file.subspan(s.offset + from, to - from);
  const auto dst = guest_memory.subspan(s.gpa - memory_base + from, to - from);
  prefault(src, MADV_POPULATE_READ);
  prefault(dst, MADV_POPULATE_WRITE);
  // memcpy, not std::ranges::copy: GCC 12 made that a byte loop over span
  // iterators, 50 us instead of 9 for the built-in image's 90 KiB.
  std::memcpy(dst.data(), src.data(), src.size());
}

// The pages to map for segment i of `segments` (sorted), as guest
// addresses [begin, end); none is the empty run at the segment's start. Its
// file offset and address must agree modulo the page size. The whole pages
// of its file-backed bytes, and the partial page at either end too, as Linux
// maps an ELF segment, when the bytes that page adds lie in the image file and in the
// loader's window [lo, hi) and in no other segment, and, at the end, when no
// bss follows (the bss must read as zero; those bytes are copied).
struct PageRun {
  uint64_t begin = 0;
  uint64_t end = 0;
};
PageRun mappable_pages(const std::vector<Segment>& segments, std::size_t i, uint64_t page, uint64_t file_size,
                       uint64_t lo, uint64_t hi) {
  const Segment& s = segments[i];
  const PageRun none{s.gpa, s.gpa};
  if (s.filesz == 0 || (s.gpa - s.offset) % page != 0) return none;
  const uint64_t file_end = s.gpa + s.filesz;
  uint64_t begin = (s.gpa + page - 1) / page * page;
  uint64_t end = file_end / page * page;
  const uint64_t head = s.gpa / page * page;
  if (head < begin && head >= lo && s.offset >= s.gpa - head && (i == 0 || segments[i - 1].end <= head)) begin = head;
  const uint64_t tail = end + page;
  if (end < file_end && s.end == file_end && tail <= hi && s.offset + (tail - s.gpa) <= file_size &&
      (i + 1 == segments.size() || segments[i + 1].gpa >= tail))
    end = tail;
  return end > begin ? PageRun{begin, end} : none;
}

}  // namespace

LoadedImage check_elf_image(std::span<const std::byte> file, uint64_t memory_bytes, uint64_t min_gpa,
                            uint64_t max_gpa, const ElfTarget& target) {
  const CheckedImage image = check_image(file, memory_bytes, min_gpa, max_gpa, target);
  return LoadedImage{image.entry, image.segments.front().gpa, image.segments.back().end};
}

LoadedImage load_elf_image(std::span<const std::byte> file, std::span<std::byte> guest_memory, uint64_t min_gpa,
                           uint64_t max_gpa, Bss bss, const MapImagePages& map_pages, const ElfTarget& target) {
  // Pass 1: validate everything, write nothing.
  const CheckedImage image = check_image(file, guest_memory.size(), min_gpa, max_gpa, target);
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t lo = std::max(min_gpa, target.memory_base);
  const uint64_t hi = std::min<uint64_t>(max_gpa, memory_end(guest_memory.size(), target));
  const uint64_t base = target.memory_base;
  // Pass 2: map or copy. Every range below was checked against the file and memory.
  for (std::size_t i = 0; i < image.segments.size(); ++i) {
    const Segment& s = image.segments[i];
    const PageRun none{s.gpa, s.gpa};
    PageRun run = map_pages ? mappable_pages(image.segments, i, page, file.size(), lo, hi) : none;
    // A page before the segment's first byte maps from before its offset.
    if (run.end > run.begin && !map_pages(run.begin, run.end - run.begin, s.offset + run.begin - s.gpa)) run = none;
    // What is not mapped is copied: the bytes before the run and after it
    // (with nothing mapped, the whole segment).
    if (run.begin > s.gpa) copy_part(file, guest_memory, base, s, 0, run.begin - s.gpa);
    copy_part(file, guest_memory, base, s, run.end - s.gpa, s.filesz);
    // No mapped page reaches into a bss: the bss is RAM.
    if (bss == Bss::kZeroFill) {
      const auto tail = guest_memory.subspan(s.gpa - base + s.filesz, s.end - s.gpa - s.filesz);
      prefault(tail, MADV_POPULATE_WRITE);
      std::ranges::fill(tail, std::byte{0});
    }
  }
  return LoadedImage{image.entry, image.segments.front().gpa, image.segments.back().end};
}

std::vector<std::byte> read_image_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO that has no writer (or a tty, a device)
  // would otherwise block forever. A FIFO opened so reads EOF at once while
  // it has no writer, so after clearing the flag a pipe is read as before.
  int raw = -1;
  do {
    raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) fail("guest image: cannot open '{}': {}", path, errno_message(errno));
  const UniqueFd fd(raw);

  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("guest image: cannot stat '{}': {}", path, errno_message(errno));
  if (S_ISDIR(st.st_mode)) fail("guest image: '{}' is a directory", path);
  // Devices and sockets are no image files, and reading one may never end.
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    fail("guest image: '{}' is not a regular file or a pipe", path);
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
    fail_host("guest image: cannot read '{}': {}", path, errno_message(errno));
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxImageFileBytes) {
    fail("guest image: '{}' is {} bytes, larger than the {} MiB limit", path, st.st_size,
         kMaxImageFileBytes >> 20);
  }

  // Read until EOF rather than trusting st_size: that also handles pipes and
  // files that change under us, and the limit check bounds memory either way.
  std::vector<std::byte> data;
  if (S_ISREG(st.st_mode)) data.reserve(static_cast<std::size_t>(st.st_size));
  std::vector<std::byte> chunk(64 * 1024);
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("guest image: cannot read '{}': {}", path, errno_message(errno));
    }
    if (n == 0) break;
    const auto got = static_cast<std::size_t>(n);
    if (got > kMaxImageFileBytes - data.size()) {
      fail("guest image: '{}' is larger than the {} MiB limit", path, kMaxImageFileBytes >> 20);
    }
    data.insert(data.end(), chunk.begin(), chunk.begin() + n);
  }
  if (data.empty()) fail("guest image: '{}' is empty", path);
  return data;
}

}  // namespace lockvisor::vmm
