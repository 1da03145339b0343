// Where the tests find Debian 12's own kernels: $LOCKVISOR_TEST_KERNEL (one
// file, any flavour), the nested-KVM runner's cache
// (/var/cache/lockvisor/nested-kvm/current names a directory holding
// "kernel"; that is usually the uncompressed ELF vmlinux the runner boots
// through PVH, so it is used only when it is a bzImage), and tools/linux-guest/fetch-kernels.sh's cache
// (/var/cache/lockvisor/linux-kernels/{amd64,cloud-amd64}, or
// $LOCKVISOR_LINUX_KERNELS). Tests that need one skip when none is there.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace lockvisor::linuxboot::testing {

struct RealKernel {
  std::string label;
  std::filesystem::path path;
};

// "HdrS" at 0x202: the file is a bzImage, not the ELF vmlinux.
inline bool is_bzimage(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.seekg(0x202);
  in.read(magic, 4);
  return in && std::string(magic, 4) == "HdrS";
}

// The nested-KVM runner's kernel when it is the ELF vmlinux (empty if not).
inline std::filesystem::path nested_kvm_elf_kernel() {
  const std::filesystem::path nested = "/var/cache/lockvisor/nested-kvm";
  std::ifstream current(nested / "current");
  std::string name;
  if (!current || !std::getline(current, name) || name.empty()) return {};
  const auto path = nested / name / "kernel";
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in && std::string(magic, 4) == "\x7F" "ELF" ? path : std::filesystem::path{};
}

inline std::vector<RealKernel> find_real_kernels() {
  namespace fs = std::filesystem;
  std::vector<RealKernel> found;
  std::error_code ec;
  auto add = [&](std::string label, const fs::path& path) {
    if (fs::is_regular_file(path, ec)) found.push_back({std::move(label), fs::canonical(path, ec)});
  };
  if (const char* env = std::getenv("LOCKVISOR_TEST_KERNEL")) add("LOCKVISOR_TEST_KERNEL", env);
  const fs::path nested = "/var/cache/lockvisor/nested-kvm";
  if (std::ifstream current(nested / "current"); current) {
    std::string name;
    std::getline(current, name);
    if (!name.empty() && is_bzimage(nested / name / "kernel")) add("nested-kvm", nested / name / "kernel");
  }
  const char* cache_env = std::getenv("LOCKVISOR_LINUX_KERNELS");
  const fs::path cache = cache_env ? cache_env : "/var/cache/lockvisor/linux-kernels";
  add("linux-image-amd64", cache / "amd64");
  add("linux-image-cloud-amd64", cache / "cloud-amd64");
  return found;
}

inline std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace lockvisor::linuxboot::testing
