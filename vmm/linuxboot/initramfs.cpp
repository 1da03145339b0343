#include "vmm/linuxboot/initramfs.h"

#include <algorithm>
#include <cstdio>

#include <sys/stat.h>

#include "vmm/util/error.h"

namespace lockvisor::linux_guest {
namespace {

void pad_to_4(std::vector<std::byte>& out) {
  while (out.size() % 4 != 0) out.push_back(std::byte{0});
}

void append(std::vector<std::byte>& out, std::string_view text) {
  for (const char c : text) out.push_back(static_cast<std::byte>(c));
}

std::string shown(std::string_view path) {
  std::string out;
  for (const char c : path.substr(0, 80)) out += (c >= ' ' && c <= '~') ? c : '?';
  if (path.size() > 80) out += "...";
  return out;
}

}  // namespace

std::string CpioWriter::checked_path(std::string_view path) {
  const std::string_view given = path;
  if (path.starts_with('/')) path.remove_prefix(1);
  if (path.empty()) fail("initramfs: the path '{}' names the root", shown(given));
  if (path.size() > kMaxInitramfsPathBytes)
    fail("initramfs: the path '{}' is longer than {} bytes", shown(given), kMaxInitramfsPathBytes);
  if (path.find('\0') != std::string_view::npos) fail("initramfs: the path '{}' contains a NUL byte", shown(given));
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view component = path.substr(start, slash - start);
    if (component.empty() || component == "." || component == "..")
      fail("initramfs: the path '{}' has an empty, '.' or '..' component", shown(given));
    start = slash + 1;
  }
  // The kernel stops unpacking at an entry of this name.
  if (path == "TRAILER!!!") fail("initramfs: the path '{}' is the archive's end marker", shown(given));
  std::string result(path);
  if (directories_.contains(result) || others_.contains(result))
    fail("initramfs: '{}' is added twice", shown(given));
  return result;
}

void CpioWriter::add_parents(const std::string& path) {
  for (std::size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string parent = path.substr(0, slash);
    if (directories_.contains(parent)) continue;
    if (others_.contains(parent)) fail("initramfs: '{}' is not a directory", shown(parent));
    directories_.insert(parent);
    add_entry(parent, S_IFDIR | 0755, {}, 0, 0);
  }
}

void CpioWriter::add_directory(std::string_view path, std::uint32_t permissions) {
  const std::string p = checked_path(path);
  add_parents(p);
  directories_.insert(p);
  add_entry(p, S_IFDIR | (permissions & 07777), {}, 0, 0);
}

void CpioWriter::add_file(std::string_view path, std::span<const std::byte> bytes, std::uint32_t permissions) {
  const std::string p = checked_path(path);
  if (bytes.size() > kMaxInitramfsFileBytes)
    fail("initramfs: '{}' is larger than {} bytes", shown(path), kMaxInitramfsFileBytes);
  add_parents(p);
  others_.insert(p);
  add_entry(p, S_IFREG | (permissions & 07777), bytes, 0, 0);
}

void CpioWriter::add_char_device(std::string_view path, std::uint32_t major, std::uint32_t minor,
                                 std::uint32_t permissions) {
  const std::string p = checked_path(path);
  add_parents(p);
  others_.insert(p);
  add_entry(p, S_IFCHR | (permissions & 07777), {}, major, minor);
}

void CpioWriter::add_entry(const std::string& path, std::uint32_t mode, std::span<const std::byte> bytes,
                           std::uint32_t rdev_major, std::uint32_t rdev_minor) {
  const bool directory = (mode & S_IFMT) == S_IFDIR;
  const bool trailer = path == "TRAILER!!!";
  // ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
  // rdevmajor, rdevminor, namesize (with the NUL), check.
  const std::uint32_t fields[13] = {trailer ? 0 : next_inode_++,
                                    mode,
                                    0,
                                    0,
                                    trailer ? 1u : (directory ? 2u : 1u),
                                    0,
                                    static_cast<std::uint32_t>(bytes.size()),
                                    0,
                                    0,
                                    rdev_major,
                                    rdev_minor,
                                    static_cast<std::uint32_t>(path.size() + 1),
                                    0};
  append(out_, "070701");
  for (const std::uint32_t field : fields) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08X", static_cast<unsigned>(field));
    append(out_, std::string_view(hex, 8));
  }
  append(out_, path);
  out_.push_back(std::byte{0});
  pad_to_4(out_);
  out_.insert(out_.end(), bytes.begin(), bytes.end());
  pad_to_4(out_);
}

std::vector<std::byte> CpioWriter::finish() {
  add_entry("TRAILER!!!", 0, {}, 0, 0);
  std::vector<std::byte> archive = std::move(out_);
  out_.clear();
  directories_.clear();
  others_.clear();
  next_inode_ = 1;
  return archive;
}

std::vector<std::byte> build_initramfs(std::span<const std::byte> init, std::span<const InitramfsFile> extra) {
  CpioWriter cpio;
  cpio.add_directory("dev");
  cpio.add_char_device("dev/console", 5, 1, 0600);
  cpio.add_directory("proc", 0555);
  cpio.add_directory("sys", 0555);
  cpio.add_directory("tmp", 01777);
  cpio.add_file("init", init, 0755);
  for (const InitramfsFile& file : extra) cpio.add_file(file.path, file.bytes, file.permissions);
  return cpio.finish();
}

}  // namespace lockvisor::linux_guest
