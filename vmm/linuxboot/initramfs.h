// The initramfs lockvisor hands a Linux guest when the user gives none: a
// cpio archive in the "newc" format the kernel unpacks into its rootfs
// (the kernel's Documentation/driver-api/early-userspace/buffer-format.rst),
// written in memory, uncompressed (the kernel accepts a plain archive).
//
// Each entry is a 110-byte ASCII header ("070701" and thirteen 8-digit hex
// fields: ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
// rdevmajor, rdevminor, namesize, check), the name with its NUL, padding to
// a multiple of four bytes, the file's bytes, padding again; the archive
// ends with the entry "TRAILER!!!". Every entry has its own inode number
// and nlink 1 (2 for a directory), so the kernel never takes two files for
// hard links of each other; owners are root, times 0.
#pragma once
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockvisor::linux_guest {

// Limits on what a caller may put in: the kernel's PATH_MAX, and the
// 8-hex-digit size field.
inline constexpr std::size_t kMaxInitramfsPathBytes = 4095;
inline constexpr std::uint64_t kMaxInitramfsFileBytes = 0xFFFFFFFFu;

class CpioWriter {
 public:
  // Paths are relative to the root ("dev/console"; one leading '/' is
  // dropped), with no empty, "." or ".." component, no NUL, at most
  // kMaxInitramfsPathBytes bytes. Missing parent directories are added
  // first (mode 0755). A path given twice, or a file where a directory is
  // needed, is refused. Every failure is a lockvisor::Error (a usage error:
  // the paths and files come from the command line).
  void add_directory(std::string_view path, std::uint32_t permissions = 0755);
  void add_file(std::string_view path, std::span<const std::byte> bytes, std::uint32_t permissions = 0644);
  void add_char_device(std::string_view path, std::uint32_t major, std::uint32_t minor,
                       std::uint32_t permissions = 0600);
  // The archive: everything added, then the trailer. The writer is empty
  // afterwards.
  std::vector<std::byte> finish();

 private:
  std::string checked_path(std::string_view path);
  void add_parents(const std::string& path);
  void add_entry(const std::string& path, std::uint32_t mode, std::span<const std::byte> bytes,
                 std::uint32_t rdev_major, std::uint32_t rdev_minor);

  std::vector<std::byte> out_;
  std::set<std::string, std::less<>> directories_;
  std::set<std::string, std::less<>> others_;
  std::uint32_t next_inode_ = 1;
};

// A file the caller adds to lockvisor's initramfs (--initramfs-file and the
// like): a regular file at `path`.
struct InitramfsFile {
  std::string path;
  std::vector<std::byte> bytes;
  std::uint32_t permissions = 0644;
};

// lockvisor's initramfs: the directories /dev, /proc, /sys and /tmp, the
// console node /dev/console (character device 5:1: the kernel opens it as
// init's standard streams, so without it init has no console), /init
// (mode 0755) with the bytes of `init`, then `extra` in order. Throws
// lockvisor::Error for a bad or duplicate extra path (e.g. "init").
std::vector<std::byte> build_initramfs(std::span<const std::byte> init, std::span<const InitramfsFile> extra = {});

}  // namespace lockvisor::linux_guest
