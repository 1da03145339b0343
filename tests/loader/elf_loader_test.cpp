// Tests for the guest ELF loader: a valid image, one test per rejection, a
// fuzz-style robustness test, and read_image_file's error paths. Images are
// built in memory by ElfBuilder below. One file (over 500 lines) because
// every case shares that builder: one rejection per test, side by side.
#include "vmm/loader/elf_loader.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lockvisor/abi/guest_layout.h"
#include "tests/support/elf_header.h"
#include "vmm/util/error.h"

namespace lockvisor::vmm {
namespace {

using Bytes = std::vector<std::byte>;

// --- Building images ---------------------------------------------------------

struct SegmentSpec {
  uint32_t type = PT_LOAD;
  uint32_t flags = PF_R;
  uint64_t addr = 0;     // p_vaddr == p_paddr
  Bytes data;            // file-backed bytes (p_filesz = data.size())
  uint64_t memsz = 0;    // 0 means data.size()
};

Bytes pattern(std::size_t n, uint8_t seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = std::byte(static_cast<uint8_t>(seed + i * 7));
  return b;
}

// Lays out: ELF header at 0, program headers right after it, then each
// segment's data back to back. Fields can be corrupted afterwards with
// patch_ehdr / patch_phdr.
class ElfBuilder {
 public:
  ElfBuilder& entry(uint64_t e) {
    entry_ = e;
    return *this;
  }
  ElfBuilder& segment(SegmentSpec s) {
    segments_.push_back(std::move(s));
    return *this;
  }
  // Pads the file so that each segment's data starts at a file offset equal
  // to its address modulo 4 KiB, as a linker lays out a mappable image.
  ElfBuilder& page_congruent() {
    page_congruent_ = true;
    return *this;
  }

  Bytes build() const {
    const Elf64_Ehdr eh = test::executable_header(EM_X86_64, entry_, static_cast<uint16_t>(segments_.size()));

    Bytes out(sizeof eh + segments_.size() * sizeof(Elf64_Phdr));
    std::memcpy(out.data(), &eh, sizeof eh);
    for (std::size_t i = 0; i < segments_.size(); ++i) {
      const SegmentSpec& s = segments_[i];
      Elf64_Phdr ph{};
      ph.p_type = s.type;
      ph.p_flags = s.flags;
      if (page_congruent_) out.resize(out.size() + (s.addr - out.size()) % 0x1000);
      ph.p_offset = out.size();
      ph.p_vaddr = ph.p_paddr = s.addr;
      ph.p_filesz = s.data.size();
      ph.p_memsz = s.memsz ? s.memsz : s.data.size();
      ph.p_align = 0x1000;
      std::memcpy(out.data() + sizeof eh + i * sizeof ph, &ph, sizeof ph);
      out.insert(out.end(), s.data.begin(), s.data.end());
    }
    return out;
  }

 private:
  uint64_t entry_ = 0;
  std::vector<SegmentSpec> segments_;
  bool page_congruent_ = false;
};

void patch_ehdr(Bytes& image, const std::function<void(Elf64_Ehdr&)>& edit) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof eh);
  edit(eh);
  std::memcpy(image.data(), &eh, sizeof eh);
}

void patch_phdr(Bytes& image, std::size_t index, const std::function<void(Elf64_Phdr&)>& edit) {
  const std::size_t at = sizeof(Elf64_Ehdr) + index * sizeof(Elf64_Phdr);
  Elf64_Phdr ph;
  std::memcpy(&ph, image.data() + at, sizeof ph);
  edit(ph);
  std::memcpy(image.data() + at, &ph, sizeof ph);
}

constexpr uint64_t kText = 0x100000;
constexpr uint64_t kData = 0x200000;
constexpr uint64_t kEntry = kText + 0x10;
constexpr std::size_t kTextBytes = 0x40;
constexpr std::size_t kDataFileBytes = 0x18;
constexpr uint64_t kDataMemBytes = 0x1000;  // the rest is bss
constexpr auto kPoison = std::byte{0xAA};

// A valid image: R+X text, then RW data with bss, entry inside text.
ElfBuilder valid_builder() {
  ElfBuilder b;
  b.entry(kEntry)
      .segment({.type = PT_LOAD, .flags = PF_R | PF_X, .addr = kText, .data = pattern(kTextBytes, 1)})
      .segment({.type = PT_LOAD,
                .flags = PF_R | PF_W,
                .addr = kData,
                .data = pattern(kDataFileBytes, 100),
                .memsz = kDataMemBytes});
  return b;
}

// Guest memory of 4 MiB filled with a poison byte, so writes are visible.
Bytes guest_memory(std::size_t bytes = 4 << 20) { return Bytes(bytes, kPoison); }

// Loads `image` expecting a lockvisor::Error whose one-line message starts
// with "guest image: " and contains `needle`; also checks that the failed
// load left guest memory untouched.
::testing::AssertionResult rejects(const Bytes& image, const std::string& needle, uint64_t min_gpa = abi::kImageBase,
                                   uint64_t max_gpa = abi::kImageLimit, std::size_t memory_bytes = 4 << 20) {
  Bytes memory = guest_memory(memory_bytes);
  try {
    load_elf_image(image, memory, min_gpa, max_gpa);
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind("guest image: ", 0) != 0) {
      return ::testing::AssertionFailure() << "message lacks the prefix: " << message;
    }
    if (message.find('\n') != std::string::npos) {
      return ::testing::AssertionFailure() << "message is not one line: " << message;
    }
    if (message.find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << message << "\" does not mention \"" << needle << '"';
    }
    if (memory != guest_memory(memory_bytes)) {
      return ::testing::AssertionFailure() << "a rejected image wrote to guest memory";
    }
    return ::testing::AssertionSuccess() << message;
  }
  return ::testing::AssertionFailure() << "the image was accepted; expected an error mentioning \"" << needle << '"';
}

// --- The valid image -----------------------------------------------------------

TEST(ElfLoader, LoadsTwoSegmentImageWithZeroedBss) {
  const Bytes image = valid_builder().build();
  Bytes memory = guest_memory();
  const LoadedImage loaded = load_elf_image(image, memory, abi::kImageBase, abi::kImageLimit);

  EXPECT_EQ(loaded.entry, kEntry);
  EXPECT_EQ(loaded.lowest_gpa, kText);
  EXPECT_EQ(loaded.end_gpa, kData + kDataMemBytes);

  const Bytes text = pattern(kTextBytes, 1);
  const Bytes data = pattern(kDataFileBytes, 100);
  EXPECT_TRUE(std::equal(text.begin(), text.end(), memory.begin() + kText));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), memory.begin() + kData));
  // bss zeroed, exactly up to p_memsz.
  EXPECT_TRUE(std::all_of(memory.begin() + kData + kDataFileBytes, memory.begin() + kData + kDataMemBytes,
                          [](std::byte b) { return b == std::byte{0}; }));
  // Nothing else touched.
  EXPECT_EQ(memory[kText - 1], kPoison);
  EXPECT_EQ(memory[kText + kTextBytes], kPoison);
  EXPECT_EQ(memory[kData - 1], kPoison);
  EXPECT_EQ(memory[kData + kDataMemBytes], kPoison);
  const auto written = static_cast<std::size_t>(
      std::ranges::count_if(memory, [](std::byte b) { return b != kPoison; }));
  EXPECT_LE(written, kTextBytes + kDataMemBytes);
}

// A RISC-V image: guest_memory[0] is the RAM base, the segments and the
// window are guest-physical addresses above it.
TEST(ElfLoader, RiscvTargetLoadsRelativeToItsMemoryBase) {
  constexpr uint64_t kBase = 0x80000000;
  constexpr ElfTarget kRiscv{EM_RISCV, "riscv64", "EM_RISCV", kBase};
  ElfBuilder b;
  b.entry(kBase + kEntry)
      .segment({.type = PT_LOAD, .flags = PF_R | PF_X, .addr = kBase + kText, .data = pattern(kTextBytes, 1)})
      .segment({.type = PT_LOAD, .flags = PF_R | PF_W, .addr = kBase + kData, .data = pattern(kDataFileBytes, 100),
                .memsz = kDataMemBytes});
  Bytes image = b.build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_machine = EM_RISCV; });
  Bytes memory = guest_memory();
  const LoadedImage loaded =
      load_elf_image(image, memory, kBase + kText, kBase + memory.size(), Bss::kZeroFill, {}, kRiscv);
  EXPECT_EQ(loaded.entry, kBase + kEntry);
  EXPECT_EQ(loaded.lowest_gpa, kBase + kText);
  EXPECT_EQ(loaded.end_gpa, kBase + kData + kDataMemBytes);
  const Bytes text = pattern(kTextBytes, 1);
  EXPECT_TRUE(std::equal(text.begin(), text.end(), memory.begin() + kText));
  EXPECT_EQ(memory[kData + kDataFileBytes], std::byte{0});
  EXPECT_EQ(memory[kText - 1], kPoison);
  EXPECT_EQ(check_elf_image(image, memory.size(), kBase, UINT64_MAX, kRiscv).end_gpa, loaded.end_gpa);
  // Past the end of RAM, and an x86 image, are refused.
  EXPECT_THROW(check_elf_image(image, kData, kBase, UINT64_MAX, kRiscv), Error);
  try {
    check_elf_image(valid_builder().build(), memory.size(), kBase, UINT64_MAX, kRiscv);
    ADD_FAILURE() << "an x86-64 image was accepted for riscv64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not riscv64 (EM_RISCV = 243)"), std::string::npos) << e.what();
  }
}

TEST(ElfLoader, DefaultWindowIsTheAbiImageArea) {
  const Bytes image = valid_builder().build();
  Bytes memory = guest_memory();
  EXPECT_EQ(load_elf_image(image, memory).entry, kEntry);

  Bytes low = ElfBuilder()
                  .entry(abi::kImageBase - 0x1000)
                  .segment({.flags = PF_R | PF_X, .addr = abi::kImageBase - 0x1000, .data = pattern(16, 0)})
                  .build();
  Bytes mem2 = guest_memory();
  EXPECT_THROW(load_elf_image(low, mem2), Error);
}

TEST(ElfLoader, IgnoresNonLoadAndEmptyLoadSegments) {
  // A PT_NOTE and a PT_GNU_STACK at absurd addresses, and an empty PT_LOAD
  // outside the window: none of them is loaded or checked against memory.
  const Bytes image = valid_builder()
                          .segment({.type = PT_NOTE, .addr = 0xdead00000000, .data = pattern(8, 3), .memsz = 0})
                          .segment({.type = PT_GNU_STACK, .flags = PF_R | PF_W, .addr = 0, .data = {}, .memsz = 0})
                          .segment({.type = PT_LOAD, .addr = 0x7000000000, .data = {}, .memsz = 0})
                          .build();
  Bytes memory = guest_memory();
  const LoadedImage loaded = load_elf_image(image, memory);
  EXPECT_EQ(loaded.lowest_gpa, kText);
  EXPECT_EQ(loaded.end_gpa, kData + kDataMemBytes);
}

TEST(ElfLoader, AdjacentSegmentsDoNotOverlap) {
  const Bytes image = ElfBuilder()
                          .entry(kText)
                          .segment({.flags = PF_R | PF_X, .addr = kText, .data = pattern(0x1000, 0)})
                          .segment({.flags = PF_R | PF_W, .addr = kText + 0x1000, .data = pattern(0x10, 9)})
                          .build();
  Bytes memory = guest_memory();
  EXPECT_EQ(load_elf_image(image, memory).end_gpa, kText + 0x1010);
}

// --- Mapping whole pages instead of copying them ----------------------------------

// One offer the loader made to its MapImagePages.
struct Offer {
  uint64_t gpa, length, file_offset;
  bool operator==(const Offer&) const = default;
};

// A text segment starting mid-page and ending mid-page, alone on its pages,
// and a data segment smaller than a page followed by bss, laid out as a
// linker would so that the pages are mappable.
Bytes mappable_image() {
  return ElfBuilder()
      .page_congruent()
      .entry(kText + 0x800)
      .segment({.flags = PF_R | PF_X, .addr = kText + 0x800, .data = pattern(0x2900, 5)})
      .segment({.flags = PF_R | PF_W, .addr = kData, .data = pattern(0x18, 60), .memsz = 0x3000})
      .build();
}

uint64_t segment_offset(const Bytes& image, std::size_t index) {
  Elf64_Phdr ph;
  std::memcpy(&ph, image.data() + sizeof(Elf64_Ehdr) + index * sizeof ph, sizeof ph);
  return ph.p_offset;
}

// The "mapping" marks its pages, so that a copy over them would show.
constexpr auto kMapped = std::byte{0x55};

struct MappedLoad {
  Bytes memory = guest_memory();
  std::vector<Offer> offers;
  LoadedImage loaded{};
};

MappedLoad load_marking_offers(const Bytes& image) {
  MappedLoad out;
  out.loaded = load_elf_image(image, out.memory, abi::kImageBase, abi::kImageLimit, Bss::kZeroFill,
                              [&out](uint64_t gpa, uint64_t length, uint64_t file_offset) {
                                out.offers.push_back({gpa, length, file_offset});
                                std::fill_n(out.memory.begin() + static_cast<std::ptrdiff_t>(gpa), length, kMapped);
                                return true;
                              });
  return out;
}

TEST(ElfLoaderMapping, OffersEveryPageASegmentsFileBytesLieInWhenNoOtherSegmentSharesIt) {
  const Bytes image = mappable_image();
  Bytes copied = guest_memory();
  load_elf_image(image, copied);
  const MappedLoad mapped = load_marking_offers(image);
  EXPECT_EQ(mapped.loaded.entry, kText + 0x800);
  // Text [kText+0x800, kText+0x3100) lies in the pages [kText, kText+0x4000),
  // from 0x800 before its file offset. The data segment's only page holds
  // bss too, so it is copied.
  ASSERT_EQ(mapped.offers.size(), 1u);
  EXPECT_EQ(mapped.offers[0], (Offer{kText, 0x4000, segment_offset(image, 0) - 0x800}));
  EXPECT_TRUE(std::all_of(mapped.memory.begin() + kText, mapped.memory.begin() + kText + 0x4000,
                          [](std::byte b) { return b == kMapped; }));
  EXPECT_TRUE(std::equal(mapped.memory.begin() + kData, mapped.memory.begin() + kData + 0x4000, copied.begin() + kData));
}

TEST(ElfLoaderMapping, APageTwoSegmentsShareIsCopied) {
  // Text ends in the page where rodata begins: that page is copied, and each
  // segment's own pages are offered.
  const Bytes image = ElfBuilder()
                          .page_congruent()
                          .entry(kText)
                          .segment({.flags = PF_R | PF_X, .addr = kText, .data = pattern(0x3100, 7)})
                          .segment({.flags = PF_R, .addr = kText + 0x3200, .data = pattern(0x1e00, 90)})
                          .build();
  Bytes copied = guest_memory();
  load_elf_image(image, copied);
  const MappedLoad mapped = load_marking_offers(image);
  ASSERT_EQ(mapped.offers.size(), 2u);
  EXPECT_EQ(mapped.offers[0], (Offer{kText, 0x3000, segment_offset(image, 0)}));
  EXPECT_EQ(mapped.offers[1], (Offer{kText + 0x4000, 0x1000, segment_offset(image, 1) + 0xe00}));
  for (uint64_t a = kText + 0x3000; a < kText + 0x4000; ++a) ASSERT_EQ(mapped.memory[a], copied[a]) << std::hex << a;
}

// Loads `image` with a MapImagePages that counts its offers and answers
// each with `answer` without mapping anything; what guest memory then holds
// must be what a plain copy gives.
::testing::AssertionResult loads_as_copied(const Bytes& image, bool answer, int expected_offers) {
  Bytes copied = guest_memory();
  load_elf_image(image, copied);
  int offers = 0;
  Bytes memory = guest_memory();
  load_elf_image(image, memory, abi::kImageBase, abi::kImageLimit, Bss::kZeroFill, [&](uint64_t, uint64_t, uint64_t) {
    ++offers;
    return answer;
  });
  if (offers != expected_offers)
    return ::testing::AssertionFailure() << offers << " offers, expected " << expected_offers;
  if (memory != copied) return ::testing::AssertionFailure() << "guest memory differs from a plain copy";
  return ::testing::AssertionSuccess();
}

TEST(ElfLoaderMapping, ARefusedOfferIsCopied) { EXPECT_TRUE(loads_as_copied(mappable_image(), false, 1)); }

TEST(ElfLoaderMapping, SegmentsWhoseOffsetAndAddressDisagreeAreCopiedWithoutAnOffer) {
  // Without page_congruent() the data follows the headers: offset 0xb0 for
  // an address at a page boundary, so no page of it can be mapped.
  const Bytes image = ElfBuilder()
                          .entry(kText)
                          .segment({.flags = PF_R | PF_X, .addr = kText, .data = pattern(0x3000, 2)})
                          .build();
  EXPECT_TRUE(loads_as_copied(image, true, 0));
}

TEST(ElfLoaderMapping, ARejectedImageOffersNothing) {
  Bytes image = mappable_image();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_entry = kData; });  // not executable
  int offers = 0;
  Bytes memory = guest_memory();
  EXPECT_THROW(load_elf_image(image, memory, abi::kImageBase, abi::kImageLimit, Bss::kZeroFill,
                              [&](uint64_t, uint64_t, uint64_t) {
                                ++offers;
                                return true;
                              }),
               Error);
  EXPECT_EQ(offers, 0);
  EXPECT_EQ(memory, guest_memory());
}

// --- One test per rejection ------------------------------------------------------

TEST(ElfLoaderRejects, FileTooSmallForHeader) {
  Bytes image = valid_builder().build();
  image.resize(40);
  EXPECT_TRUE(rejects(image, "too small for an ELF64 header"));
  EXPECT_TRUE(rejects(Bytes{}, "too small for an ELF64 header"));
}

TEST(ElfLoaderRejects, BadMagic) {
  Bytes image = valid_builder().build();
  image[1] = std::byte{'X'};
  EXPECT_TRUE(rejects(image, "not an ELF file"));
  const std::string text = "#!/bin/sh\necho hello\n";
  Bytes script(text.size());
  std::memcpy(script.data(), text.data(), text.size());
  EXPECT_TRUE(rejects(script, "not an ELF file"));
}

TEST(ElfLoaderRejects, NotElfClass64) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_ident[EI_CLASS] = ELFCLASS32; });
  EXPECT_TRUE(rejects(image, "not a 64-bit ELF"));
}

TEST(ElfLoaderRejects, NotLittleEndian) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_ident[EI_DATA] = ELFDATA2MSB; });
  EXPECT_TRUE(rejects(image, "not a little-endian ELF"));
}

TEST(ElfLoaderRejects, UnsupportedVersion) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_version = 2; });
  EXPECT_TRUE(rejects(image, "unsupported ELF version"));
}

TEST(ElfLoaderRejects, NotAnExecutable) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_type = ET_DYN; });  // a PIE
  EXPECT_TRUE(rejects(image, "not an executable"));
}

TEST(ElfLoaderRejects, WrongMachine) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_machine = EM_AARCH64; });
  EXPECT_TRUE(rejects(image, "not x86-64"));
}

TEST(ElfLoaderRejects, BadHeaderSize) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_ehsize = 52; });
  EXPECT_TRUE(rejects(image, "e_ehsize"));
}

TEST(ElfLoaderRejects, BadProgramHeaderEntrySize) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_phentsize = 32; });
  EXPECT_TRUE(rejects(image, "e_phentsize"));
}

TEST(ElfLoaderRejects, ProgramHeaderTableOutsideFile) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [&](Elf64_Ehdr& eh) { eh.e_phoff = image.size() - sizeof(Elf64_Phdr); });
  EXPECT_TRUE(rejects(image, "program header table"));
  // An offset that makes e_phoff + size wrap around.
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_phoff = UINT64_MAX - 8; });
  EXPECT_TRUE(rejects(image, "program header table"));
}

TEST(ElfLoaderRejects, TooManyProgramHeaders) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_phnum = kMaxProgramHeaders + 1; });
  EXPECT_TRUE(rejects(image, "too many program headers"));
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_phnum = PN_XNUM; });
  EXPECT_TRUE(rejects(image, "too many program headers"));
}

TEST(ElfLoaderRejects, FileSizeLargerThanMemSize) {
  Bytes image = valid_builder().build();
  patch_phdr(image, 1, [](Elf64_Phdr& ph) { ph.p_memsz = ph.p_filesz - 1; });
  EXPECT_TRUE(rejects(image, "segment 1 has p_filesz 0x18 larger than p_memsz 0x17"));
}

TEST(ElfLoaderRejects, SegmentDataOutsideFile) {
  Bytes image = valid_builder().build();
  image.resize(image.size() - 1);  // the last segment's data is one byte short
  EXPECT_TRUE(rejects(image, "truncated image"));

  Bytes wraps = valid_builder().build();
  patch_phdr(wraps, 0, [](Elf64_Phdr& ph) { ph.p_offset = UINT64_MAX - 4; });
  EXPECT_TRUE(rejects(wraps, "segment 0 file bytes"));
}

TEST(ElfLoaderRejects, VirtualAndPhysicalAddressesDiffer) {
  Bytes image = valid_builder().build();
  patch_phdr(image, 1, [](Elf64_Phdr& ph) { ph.p_vaddr = 0xffffffff80000000; });
  EXPECT_TRUE(rejects(image, "identity-mapped"));
}

TEST(ElfLoaderRejects, SegmentOutsideTheImageWindow) {
  Bytes image = valid_builder().build();
  patch_phdr(image, 1, [](Elf64_Phdr& ph) { ph.p_vaddr = ph.p_paddr = 0x2000000; });
  EXPECT_TRUE(rejects(image, "segment 1 [0x2000000, 0x2001000) lies outside guest memory [0x100000, 0x1000000)",
                      abi::kImageBase, abi::kImageLimit, 32 << 20));

  Bytes below = valid_builder().build();
  patch_phdr(below, 0, [](Elf64_Phdr& ph) { ph.p_vaddr = ph.p_paddr = 0xff000; });
  EXPECT_TRUE(rejects(below, "segment 0 [0xff000, 0xff040) lies outside guest memory"));

  // Straddling the upper limit.
  Bytes straddles = valid_builder().build();
  patch_phdr(straddles, 1, [](Elf64_Phdr& ph) { ph.p_vaddr = ph.p_paddr = abi::kImageLimit - 0x800; });
  EXPECT_TRUE(rejects(straddles, "lies outside guest memory", abi::kImageBase, abi::kImageLimit, 32 << 20));
}

TEST(ElfLoaderRejects, SegmentBeyondGuestMemory) {
  // Inside the ABI window but past the end of 4 MiB of RAM: the reported
  // window is clipped to the memory size.
  Bytes image = valid_builder().build();
  patch_phdr(image, 1, [](Elf64_Phdr& ph) { ph.p_vaddr = ph.p_paddr = 0x3fff000; });
  EXPECT_TRUE(rejects(image, "segment 1 [0x3fff000, 0x4000000) lies outside guest memory [0x100000, 0x400000)"));
}

TEST(ElfLoaderRejects, SegmentAddressWrapsAround) {
  Bytes image = valid_builder().build();
  patch_phdr(image, 1, [](Elf64_Phdr& ph) { ph.p_memsz = UINT64_MAX - kData + 2; });
  EXPECT_TRUE(rejects(image, "wraps around"));
}

TEST(ElfLoaderRejects, OverlappingSegments) {
  const Bytes image = ElfBuilder()
                          .entry(kText)
                          .segment({.flags = PF_R | PF_X, .addr = kText, .data = pattern(0x100, 0)})
                          .segment({.flags = PF_R | PF_W, .addr = kText + 0xff, .data = pattern(0x10, 9)})
                          .build();
  EXPECT_TRUE(rejects(image, "segments 0 [0x100000, 0x100100) and 1 [0x1000ff, 0x10010f) overlap"));

  // Listed out of address order, and overlapping through bss only.
  const Bytes unordered = ElfBuilder()
                              .entry(kText)
                              .segment({.flags = PF_R | PF_W, .addr = kText + 0x1000, .data = pattern(8, 9)})
                              .segment({.flags = PF_R | PF_X, .addr = kText, .data = pattern(8, 0), .memsz = 0x2000})
                              .build();
  EXPECT_TRUE(rejects(unordered, "overlap"));
}

TEST(ElfLoaderRejects, NoLoadSegments) {
  Bytes image = ElfBuilder().entry(kText).segment({.type = PT_NOTE, .addr = kText, .data = pattern(8, 0)}).build();
  EXPECT_TRUE(rejects(image, "no PT_LOAD"));
  Bytes none = ElfBuilder().entry(kText).build();
  EXPECT_TRUE(rejects(none, "no PT_LOAD"));
}

TEST(ElfLoaderRejects, EntryOutsideAnySegment) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_entry = 0x180000; });
  EXPECT_TRUE(rejects(image, "entry point 0x180000 is not inside an executable PT_LOAD segment"));
}

TEST(ElfLoaderRejects, EntryInNonExecutableSegment) {
  Bytes image = valid_builder().build();
  patch_ehdr(image, [](Elf64_Ehdr& eh) { eh.e_entry = kData; });
  EXPECT_TRUE(rejects(image, "entry point"));
}

TEST(ElfLoaderRejects, EntryInBss) {
  Bytes image = ElfBuilder()
                    .entry(kText + 0x20)
                    .segment({.flags = PF_R | PF_X, .addr = kText, .data = pattern(0x20, 0), .memsz = 0x100})
                    .build();
  EXPECT_TRUE(rejects(image, "entry point"));
}

// --- Robustness ----------------------------------------------------------------

// Every outcome must be success or a lockvisor::Error; anything else (another
// exception, or an out-of-bounds access that ASan/UBSan would report) fails.
// `memory` is reused across calls: allocating megabytes per iteration makes
// the sanitizer build crawl, and stale contents do not affect validation.
void load_or_reject(const Bytes& image, Bytes& memory, int& accepted, int& rejected) {
  try {
    const LoadedImage loaded = load_elf_image(image, memory, abi::kImageBase, abi::kImageLimit);
    EXPECT_LE(loaded.end_gpa, memory.size());
    EXPECT_GE(loaded.lowest_gpa, abi::kImageBase);
    ++accepted;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("guest image: ", 0), 0u) << e.what();
    ++rejected;
  }
}

TEST(ElfLoaderFuzz, TruncationAtEveryLength) {
  const Bytes image = valid_builder().build();
  Bytes memory(3 << 20);
  int accepted = 0, rejected = 0;
  for (std::size_t len = 0; len <= image.size(); ++len) {
    // A fresh, exactly sized heap buffer, so that reading past `len` is an
    // ASan heap-buffer-overflow rather than a silent read of the rest.
    const Bytes prefix(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(len));
    load_or_reject(prefix, memory, accepted, rejected);
  }
  EXPECT_EQ(accepted, 1);  // only the complete image
  EXPECT_EQ(rejected, static_cast<int>(image.size()));
}

TEST(ElfLoaderFuzz, RandomByteFlips) {
  const Bytes image = valid_builder().build();
  const std::size_t headers = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr);
  std::mt19937_64 rng(0x10c4715014);
  Bytes memory(3 << 20);
  int accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    Bytes mutated = image;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly hit the headers: flips in the payload are always harmless.
      const std::size_t span = rng() % 8 != 0 ? headers : mutated.size();
      const std::size_t at = rng() % span;
      // Half the time flip one bit (near-valid values), else a random byte.
      const auto bits = static_cast<uint8_t>(rng() % 2 ? 1u << (rng() % 8) : rng() & 0xff);
      mutated[at] ^= std::byte{bits};
    }
    if (rng() % 16 == 0) mutated.resize(rng() % mutated.size());
    load_or_reject(mutated, memory, accepted, rejected);
  }
  // The mix should exercise both outcomes substantially.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 1000);
}

// --- read_image_file ---------------------------------------------------------

// A fresh directory under the temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "lockvisor-elf-test-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::string read_error(const std::string& path) {
  try {
    read_image_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReadImageFile, ReadsWholeFile) {
  TempDir dir;
  const Bytes image = valid_builder().build();
  write_file(dir / "guest.elf", image);
  EXPECT_EQ(read_image_file((dir / "guest.elf").string()), image);
}

TEST(ReadImageFile, ReadsMoreThanOneChunk) {
  TempDir dir;
  const Bytes big = pattern(200 * 1024 + 3, 5);
  write_file(dir / "big", big);
  EXPECT_EQ(read_image_file((dir / "big").string()), big);
}

TEST(ReadImageFile, MissingFile) {
  TempDir dir;
  const std::string path = (dir / "nope.elf").string();
  const std::string message = read_error(path);
  EXPECT_NE(message.find("guest image: cannot open '" + path + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
}

TEST(ReadImageFile, EmptyFile) {
  TempDir dir;
  write_file(dir / "empty", {});
  const std::string message = read_error((dir / "empty").string());
  EXPECT_NE(message.find("is empty"), std::string::npos) << message;
}

TEST(ReadImageFile, Directory) {
  TempDir dir;
  const std::string message = read_error(dir.path().string());
  EXPECT_NE(message.find("is a directory"), std::string::npos) << message;
}

TEST(ReadImageFile, TooLarge) {
  TempDir dir;
  const auto path = dir / "huge";
  write_file(path, {});
  std::filesystem::resize_file(path, kMaxImageFileBytes + 1);  // sparse: costs no disk
  const std::string message = read_error(path.string());
  EXPECT_NE(message.find("larger than the 64 MiB limit"), std::string::npos) << message;
}

// Opening a FIFO nobody writes to used to block forever;
// now it reads as empty at once.
TEST(ReadImageFile, FifoWithoutWriterDoesNotBlock) {
  TempDir dir;
  const auto fifo = dir / "guest.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string message = read_error(fifo.string());
  EXPECT_NE(message.find("is empty"), std::string::npos) << message;
}

// A pipe is still read to the end, as before (process substitution,
// `--image <(...)`, gives lockvisor a /dev/fd path to a pipe like this one).
TEST(ReadImageFile, PipeIsRead) {
  int ends[2];
  ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
  const Bytes image = valid_builder().build();
  ASSERT_LT(image.size(), 4096u);  // fits in the pipe buffer: no writer thread needed
  ASSERT_EQ(::write(ends[1], image.data(), image.size()), static_cast<ssize_t>(image.size()));
  ::close(ends[1]);
  EXPECT_EQ(read_image_file("/proc/self/fd/" + std::to_string(ends[0])), image);
  ::close(ends[0]);
}

TEST(ReadImageFile, DevicesAreRefused) {
  for (const char* device : {"/dev/zero", "/dev/null", "/dev/tty"}) {
    if (::access(device, F_OK) != 0) continue;
    const std::string message = read_error(device);
    EXPECT_TRUE(message.find("not a regular file") != std::string::npos ||
                message.find("cannot open") != std::string::npos)  // /dev/tty without a terminal: ENXIO
        << device << ": " << message;
  }
}

}  // namespace
}  // namespace lockvisor::vmm
