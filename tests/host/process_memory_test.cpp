// This process's memory from /proc: the "Key: N kB" lines, and figures that
// follow what the process does (pages it touches become resident and raise
// the peak; a reset brings the peak back down).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <filesystem>

#include "vmm/host/process_memory.h"
#include "vmm/util/mapping.h"

namespace lockvisor::host {
namespace {

TEST(ProcessMemory, KibFieldReadsTheNamedLine) {
  const char* status = "Name:\tlockvisor\nVmHWM:\t    9000 kB\nVmRSS:\t    8000 kB\nRssAnon:\t     512 kB\n";
  EXPECT_EQ(kib_field(status, "VmHWM"), 9000u);
  EXPECT_EQ(kib_field(status, "RssAnon"), 512u);
  EXPECT_EQ(kib_field("Rss:                 123 kB\nPss:                  45 kB", "Pss"), 45u);
  EXPECT_FALSE(kib_field(status, "Rss").has_value());  // only whole keys: not RssAnon
  EXPECT_FALSE(kib_field(status, "Name").has_value());  // not in kB
  EXPECT_FALSE(kib_field("MemFree: 12 MB\n", "MemFree").has_value());
  EXPECT_FALSE(kib_field("", "MemFree").has_value());
}

TEST(ProcessMemory, TouchedPagesAreResidentAndRaiseThePeak) {
  constexpr std::size_t kBytes = 16 << 20;
  reset_peak_rss();
  const ProcessMemory before = read_process_memory();
  EXPECT_GT(before.rss_kib, 0u);
  EXPECT_GT(before.pss_kib, 0u);
  EXPECT_GE(before.peak_rss_kib, before.rss_kib);
  {
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    const Mapping mapping(p, kBytes);
    std::memset(p, 1, kBytes);
    const ProcessMemory touched = read_process_memory();
    EXPECT_GE(touched.rss_kib, before.rss_kib + kBytes / 1024 / 2) << "16 MiB touched";
    EXPECT_GE(touched.anon_kib, before.anon_kib + kBytes / 1024 / 2);
  }
  const ProcessMemory after = read_process_memory();
  EXPECT_GE(after.peak_rss_kib, before.rss_kib + kBytes / 1024 / 2) << "the peak keeps the 16 MiB";
  reset_peak_rss();
  EXPECT_LT(read_process_memory().peak_rss_kib, after.peak_rss_kib) << "the mapping is gone; so is its peak";
}

TEST(ProcessMemory, TheHostHasFreeMemory) {
  const auto free = host_free_kib();
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0u);
}

TEST(ProcessMemory, TransparentHugePagesIsOneOfTheKernelsModes) {
  const auto mode = transparent_hugepages();
  if (!mode) {  // only a kernel without them has no mode to tell
    EXPECT_FALSE(std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"));
    return;
  }
  EXPECT_TRUE(*mode == "always" || *mode == "madvise" || *mode == "never") << *mode;
}

}  // namespace
}  // namespace lockvisor::host
