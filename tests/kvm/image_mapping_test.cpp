// Mapping the built-in guest image from the executable instead of copying
// it: finding its file range (executable_bytes.h) and GuestMemory::map_file,
// which must show the file's pages, keep the guest's writes private, and
// leave plain RAM where it refuses.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vmm/guest_image.h"
#include "vmm/kvm/guest_memory.h"
#include "vmm/util/executable_bytes.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor {
namespace {

constexpr std::uint64_t kPage = 4096;

std::vector<std::byte> pread_all(int fd, std::uint64_t offset, std::size_t length) {
  std::vector<std::byte> out(length);
  std::size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

TEST(ExecutableRange, FindsTheBuiltInImageInTheExecutablePageAligned) {
  const auto image = embedded_guest_image();
  const auto range = executable_range(image);
  ASSERT_TRUE(range) << "the built-in image is in the test executable's .rodata";
  EXPECT_EQ(range->offset % kPage, 0u) << "the blob is page-aligned (guest_image_blob.S)";
  const auto bytes = pread_all(range->file.get(), range->offset, image.size());
  ASSERT_EQ(bytes.size(), image.size());
  EXPECT_TRUE(std::ranges::equal(bytes, image));
}

std::array<std::byte, 256> writable_bytes{std::byte{0x7f}, std::byte{'E'}};

TEST(ExecutableRange, RefusesBytesThatAreNotTheExecutablesReadOnlyPages) {
  const auto image = embedded_guest_image();
  const std::vector<std::byte> heap(image.begin(), image.begin() + 4096);
  EXPECT_FALSE(executable_range(heap)) << "a heap copy";
  EXPECT_FALSE(executable_range(writable_bytes)) << "a writable global may differ from the file";
  EXPECT_FALSE(executable_range({})) << "no bytes";
  // A span running past the end of the read-only segment's file bytes.
  EXPECT_FALSE(executable_range({image.data(), image.size() + (std::size_t{64} << 20)}));
}

// A temporary file of `pages` pages, page i filled with the byte 0x10 + i.
class PagesFile {
 public:
  explicit PagesFile(unsigned pages) {
    std::string path = (std::filesystem::temp_directory_path() / "lockvisor-map-test-XXXXXX").string();
    fd_ = UniqueFd(::mkstemp(path.data()));
    if (!fd_.valid()) throw std::runtime_error("mkstemp failed");
    ::unlink(path.c_str());
    for (unsigned i = 0; i < pages; ++i) {
      const std::vector<std::byte> page(kPage, std::byte(0x10 + i));
      if (::write(fd_.get(), page.data(), page.size()) != static_cast<ssize_t>(page.size()))
        throw std::runtime_error("write failed");
    }
  }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
};

bool all_are(std::span<const std::byte> bytes, std::byte value) {
  return std::ranges::all_of(bytes, [value](std::byte b) { return b == value; });
}

TEST(GuestMemoryMapFile, ShowsTheFilesPagesAndKeepsTheGuestsWritesPrivate) {
  PagesFile file(3);
  kvm::GuestMemory memory(1 << 20);
  ASSERT_TRUE(memory.map_file(4 * kPage, 2 * kPage, file.fd(), kPage));
  const auto all = memory.all();
  EXPECT_TRUE(all_are(all.subspan(4 * kPage, kPage), std::byte{0x11}));
  EXPECT_TRUE(all_are(all.subspan(5 * kPage, kPage), std::byte{0x12}));
  EXPECT_TRUE(all_are(all.subspan(3 * kPage, kPage), std::byte{0})) << "RAM before the mapping";
  EXPECT_TRUE(all_are(all.subspan(6 * kPage, kPage), std::byte{0})) << "RAM after it";

  all[4 * kPage] = std::byte{0xee};  // a guest write: copy-on-write
  EXPECT_EQ(pread_all(file.fd(), kPage, 1).at(0), std::byte{0x11}) << "the file is unchanged";
  EXPECT_EQ(all[4 * kPage], std::byte{0xee});
}

TEST(GuestMemoryMapFile, RefusesWhatItCannotMapAndLeavesRam) {
  PagesFile file(1);
  kvm::GuestMemory memory(1 << 20);
  EXPECT_FALSE(memory.map_file(kPage + 1, kPage, file.fd(), 0)) << "an address inside a page";
  EXPECT_FALSE(memory.map_file(kPage, kPage + 1, file.fd(), 0)) << "a partial page";
  EXPECT_FALSE(memory.map_file(kPage, kPage, file.fd(), 1)) << "a file offset inside a page";
  EXPECT_FALSE(memory.map_file((1 << 20) - kPage, 2 * kPage, file.fd(), 0)) << "past the end of RAM";
  EXPECT_FALSE(memory.map_file(kPage, 0, file.fd(), 0)) << "nothing";
  EXPECT_FALSE(memory.map_file(2 * kPage, kPage, -1, 0)) << "no file";
  const UniqueFd write_only(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  EXPECT_FALSE(memory.map_file(2 * kPage, kPage, write_only.get(), 0)) << "a file not open for reading";
  // Each refused range is zero-filled, writable RAM, as before.
  const auto all = memory.all();
  EXPECT_TRUE(all_are(all.first(4 * kPage), std::byte{0}));
  std::ranges::fill(all.first(4 * kPage), std::byte{0x33});
  EXPECT_TRUE(all_are(all.first(4 * kPage), std::byte{0x33}));
}

}  // namespace
}  // namespace lockvisor
