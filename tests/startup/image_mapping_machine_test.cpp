// The built-in guest image in a real run: its pages are private mappings of
// the executable while the VM lives (executable_bytes.h), gone with it, and
// the guest runs on them; an image that is not the executable's bytes is
// copied and runs the same.
//
// Label "kvm" (boots guests).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/kvm_required.h"
#include "vmm/guest_image.h"
#include "vmm/machine/machine.h"
#include "vmm/util/executable_bytes.h"

namespace lockvisor::machine {
namespace {

constexpr std::uint64_t kPage = 4096;

// Bytes of the executable's file range [begin, end) that the process maps
// privately and writably (as guest RAM is mapped), from /proc/self/maps.
std::uint64_t writable_bytes_mapping(std::uint64_t begin, std::uint64_t end) {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::ifstream maps("/proc/self/maps");
  std::uint64_t total = 0;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset_hex, dev, inode, path;
    in >> range >> perms >> offset_hex >> dev >> inode;
    std::getline(in >> std::ws, path);
    if (perms != "rw-p" || path != exe) continue;
    const auto dash = range.find('-');
    const std::uint64_t length =
        std::stoull(range.substr(dash + 1), nullptr, 16) - std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uint64_t offset = std::stoull(offset_hex, nullptr, 16);
    if (offset >= begin && offset + length <= end) total += length;
  }
  return total;
}

MachineConfig empty_config() {
  MachineConfig config;
  config.vcpus = 2;
  config.program = "empty";
  config.echo_guest_prints = false;
  config.timeout_s = 60;
  return config;
}

TEST(ImageMappingMachine, TheBuiltInImageIsMappedFromTheExecutableWhileTheVmLives) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto image = embedded_guest_image();
  const auto range = executable_range(image);
  ASSERT_TRUE(range) << "the built-in image is in this executable's read-only pages";
  const std::uint64_t begin = range->offset, end = range->offset + image.size();
  ASSERT_EQ(writable_bytes_mapping(begin, end), 0u) << "nothing maps the image before a VM does";
  {
    Machine vm(*kvm, empty_config(), image);
    // The guest's code alone is over 100 KiB: most of the image is mapped.
    EXPECT_GE(writable_bytes_mapping(begin, end), 16 * kPage);
    const RunResult r = vm.run();
    EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.reason;
  }
  EXPECT_EQ(writable_bytes_mapping(begin, end), 0u) << "the VM's end unmaps its image";
}

TEST(ImageMappingMachine, AnImageThatIsNotTheExecutablesBytesIsCopiedAndRuns) {
  LOCKVISOR_REQUIRE_KVM(kvm);
  const auto embedded = embedded_guest_image();
  const std::vector<std::byte> copy(embedded.begin(), embedded.end());
  const auto range = executable_range(embedded);
  ASSERT_TRUE(range);
  Machine vm(*kvm, empty_config(), copy);
  EXPECT_EQ(writable_bytes_mapping(range->offset, range->offset + embedded.size()), 0u);
  const RunResult r = vm.run();
  EXPECT_EQ(r.outcome, Outcome::kCompleted) << r.reason;
}

}  // namespace
}  // namespace lockvisor::machine
