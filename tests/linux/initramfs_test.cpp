// The initramfs writer: its archives as GNU cpio lists and extracts them,
// and byte by byte as the kernel's buffer-format.rst describes them.
#include "vmm/linuxboot/initramfs.h"

#include <elf.h>
#include <sys/stat.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/linux/run_program.h"
#include "tests/linux/test_files.h"
#include "tests/support/ci_required.h"
#include "vmm/linuxinit/init_image.h"
#include "vmm/util/error.h"

namespace lockvisor::linux_guest {
namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  std::vector<std::byte> out;
  for (const char c : text) out.push_back(static_cast<std::byte>(c));
  return out;
}

// One entry as read back from an archive by the test's own reader.
struct Entry {
  std::uint32_t ino, mode, nlink, filesize, rdev_major, rdev_minor, namesize;
  std::string name;
  std::vector<std::byte> data;
};

// Walks a newc archive; fails the test on any deviation from the format.
std::vector<Entry> read_newc(const std::vector<std::byte>& archive) {
  std::vector<Entry> entries;
  std::size_t at = 0;
  const auto text = [&](std::size_t offset, std::size_t n) {
    return std::string(reinterpret_cast<const char*>(archive.data()) + offset, n);
  };
  while (true) {
    EXPECT_EQ(at % 4, 0u) << "entry not 4-byte aligned";
    if (at + 110 > archive.size()) {
      ADD_FAILURE() << "archive ends inside a header (no trailer?)";
      return entries;
    }
    EXPECT_EQ(text(at, 6), "070701");
    std::uint32_t field[13];
    for (int i = 0; i < 13; ++i) {
      const std::string hex = text(at + 6 + 8 * static_cast<std::size_t>(i), 8);
      for (const char c : hex) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << hex;
      field[i] = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
    }
    Entry e{field[0], field[1], field[4], field[6], field[9], field[10], field[11], {}, {}};
    EXPECT_EQ(field[2], 0u);   // uid
    EXPECT_EQ(field[3], 0u);   // gid
    EXPECT_EQ(field[12], 0u);  // check
    const std::size_t name_at = at + 110;
    EXPECT_LE(name_at + e.namesize, archive.size());
    e.name = text(name_at, e.namesize - 1);
    EXPECT_EQ(archive[name_at + e.namesize - 1], std::byte{0}) << "name without NUL";
    std::size_t data_at = name_at + e.namesize;
    while (data_at % 4 != 0) {
      EXPECT_EQ(archive[data_at], std::byte{0}) << "padding after the name";
      ++data_at;
    }
    EXPECT_LE(data_at + e.filesize, archive.size());
    e.data.assign(archive.begin() + static_cast<std::ptrdiff_t>(data_at),
                  archive.begin() + static_cast<std::ptrdiff_t>(data_at + e.filesize));
    at = data_at + e.filesize;
    while (at % 4 != 0 && at < archive.size()) {
      EXPECT_EQ(archive[at], std::byte{0}) << "padding after the data";
      ++at;
    }
    entries.push_back(e);
    if (e.name == "TRAILER!!!") {
      EXPECT_EQ(at, archive.size()) << "bytes after the trailer";
      return entries;
    }
  }
}

TEST(Initramfs, LayoutIsTheKernelsNewcFormat) {
  const auto init = bytes_of("\x7f" "ELF pretend init, 30 bytes...");
  const std::vector<InitramfsFile> extra = {{"etc/lockvisor/a.txt", bytes_of("hello"), 0600},
                                            {"/b", bytes_of(""), 0644}};
  const auto archive = build_initramfs(init, extra);
  const auto entries = read_newc(archive);
  std::vector<std::string> names;
  for (const Entry& e : entries) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dev", "dev/console", "proc", "sys", "tmp", "init", "etc", "etc/lockvisor",
                                             "etc/lockvisor/a.txt", "b", "TRAILER!!!"}));
  ASSERT_EQ(entries.size(), 11u);
  EXPECT_EQ(entries[0].mode, S_IFDIR | 0755u);
  EXPECT_EQ(entries[0].nlink, 2u);
  EXPECT_EQ(entries[1].mode, S_IFCHR | 0600u);
  EXPECT_EQ(entries[1].rdev_major, 5u);
  EXPECT_EQ(entries[1].rdev_minor, 1u);
  EXPECT_EQ(entries[1].filesize, 0u);
  EXPECT_EQ(entries[4].mode, S_IFDIR | 01777u);
  EXPECT_EQ(entries[5].mode, S_IFREG | 0755u);
  EXPECT_EQ(entries[5].nlink, 1u);
  EXPECT_EQ(entries[5].data, init);
  EXPECT_EQ(entries[6].mode, S_IFDIR | 0755u);  // a parent added on the way
  EXPECT_EQ(entries[8].mode, S_IFREG | 0600u);
  EXPECT_EQ(entries[8].data, bytes_of("hello"));
  EXPECT_EQ(entries[9].filesize, 0u);
  // Distinct inode numbers, so the kernel sees no hard links.
  for (std::size_t i = 0; i + 1 < entries.size(); ++i)
    for (std::size_t k = i + 1; k + 1 < entries.size(); ++k) EXPECT_NE(entries[i].ino, entries[k].ino);
  EXPECT_EQ(entries.back().mode, 0u);
}

TEST(Initramfs, NamePaddingForEveryNameLength) {
  // Names of 1..8 bytes cover every remainder of (110 + namesize) % 4.
  for (std::size_t n = 1; n <= 8; ++n) {
    CpioWriter cpio;
    const std::string name(n, 'x');
    cpio.add_file(name, bytes_of(std::string(n, 'd')));  // data lengths 1..8 too
    const auto entries = read_newc(cpio.finish());
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].name, name);
    EXPECT_EQ(entries[0].namesize, n + 1);
    EXPECT_EQ(entries[0].data, bytes_of(std::string(n, 'd')));
  }
}

TEST(Initramfs, RefusesBadPaths) {
  const auto data = bytes_of("x");
  const auto refused = [&](std::string_view path) {
    CpioWriter cpio;
    cpio.add_file("present", data);
    cpio.add_directory("dir");
    try {
      cpio.add_file(path, data);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
      EXPECT_NE(std::string(e.what()).find("initramfs: "), std::string::npos) << e.what();
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused(""));
  EXPECT_TRUE(refused("/"));
  EXPECT_TRUE(refused("a//b"));
  EXPECT_TRUE(refused("a/"));
  EXPECT_TRUE(refused("../etc/passwd"));
  EXPECT_TRUE(refused("a/./b"));
  EXPECT_TRUE(refused(std::string_view("a\0b", 3)));
  EXPECT_TRUE(refused("TRAILER!!!"));
  EXPECT_TRUE(refused(std::string(5000, 'a')));
  EXPECT_TRUE(refused("present"));         // twice
  EXPECT_TRUE(refused("/present"));        // the same path, spelled with '/'
  EXPECT_TRUE(refused("dir"));             // a directory's path
  EXPECT_TRUE(refused("present/inside"));  // a file as a parent
  EXPECT_FALSE(refused("dir/inside"));
  EXPECT_FALSE(refused(std::string(4000, 'a')));

  // The standard archive's own names cannot be replaced by extra files.
  const std::vector<InitramfsFile> init_again = {{"init", data, 0755}};
  EXPECT_THROW(build_initramfs(data, init_again), Error);
  const std::vector<InitramfsFile> console_again = {{"/dev/console", data, 0644}};
  EXPECT_THROW(build_initramfs(data, console_again), Error);
}

// The lines of `cpio -itv`: mode, links, owner, group, size (or "maj, min"),
// date, name; returns name -> the line.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Initramfs, GnuCpioListsAndExtractsIt) {
  if (std::strlen(LOCKVISOR_CPIO_PROGRAM) == 0) LOCKVISOR_SKIP_OUTSIDE_CI("cpio is not installed (Debian package cpio)");
  test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const auto init = embedded_linux_init();
  const std::vector<InitramfsFile> extra = {{"etc/motd", bytes_of("lockvisor\n"), 0644}};
  const auto archive = build_initramfs(init, extra);
  const std::string path = dir.file("initramfs.cpio");
  test::write_bytes(path, archive);

  const auto listing = test::run_program(LOCKVISOR_CPIO_PROGRAM, {"-itv", "--quiet", "-F", path});
  ASSERT_EQ(listing.exit_code, 0) << listing.output;
  const auto lines = lines_of(listing.output);
  ASSERT_EQ(lines.size(), 8u) << listing.output;
  const auto expect_line = [&](std::size_t i, std::string_view mode, std::string_view name, std::string_view size) {
    std::istringstream in(lines[i]);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    ASSERT_GE(words.size(), 6u) << lines[i];
    EXPECT_EQ(words[0], mode) << lines[i];
    EXPECT_EQ(words.back(), name) << lines[i];
    EXPECT_NE(lines[i].find(size), std::string::npos) << lines[i];
    EXPECT_EQ(words[2], "root") << lines[i];
  };
  expect_line(0, "drwxr-xr-x", "dev", " 0 ");
  expect_line(1, "crw-------", "dev/console", "5,   1");
  expect_line(2, "dr-xr-xr-x", "proc", " 0 ");
  expect_line(3, "dr-xr-xr-x", "sys", " 0 ");
  expect_line(4, "drwxrwxrwt", "tmp", " 0 ");
  expect_line(5, "-rwxr-xr-x", "init", " " + std::to_string(init.size()) + " ");
  expect_line(6, "drwxr-xr-x", "etc", " 0 ");
  expect_line(7, "-rw-r--r--", "etc/motd", " 10 ");

  // Extracting the device node needs root: leave it out (-f: all but the
  // pattern), and check the rest arrived intact.
  const std::string root = dir.file("root");
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  const auto extract = test::run_program(LOCKVISOR_CPIO_PROGRAM,
                                         {"-idm", "--quiet", "--no-absolute-filenames", "-F", path, "-D", root, "-f", "dev/console"});
  ASSERT_EQ(extract.exit_code, 0) << extract.output;
  const std::string extracted_init = test::read_text_file(root + "/init");
  ASSERT_EQ(extracted_init.size(), init.size());
  EXPECT_EQ(std::memcmp(extracted_init.data(), init.data(), init.size()), 0);
  struct stat st {};
  ASSERT_EQ(::stat((root + "/init").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(test::read_text_file(root + "/etc/motd"), "lockvisor\n");
  ASSERT_EQ(::stat((root + "/tmp").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(InitImage, EmbedsTheStrippedStaticProgram) {
  const auto init = embedded_linux_init();
  const std::string file = test::read_text_file(LOCKVISOR_LINUX_INIT_STRIPPED_PROGRAM);
  ASSERT_EQ(init.size(), file.size());
  ASSERT_GE(init.size(), 64u);
  EXPECT_EQ(std::memcmp(init.data(), file.data(), file.size()), 0);
  EXPECT_EQ(std::memcmp(init.data(), "\x7f" "ELF", 4), 0);
  // A static executable: ET_EXEC, and no PT_INTERP (no dynamic loader to
  // find in an initramfs that has none).
  Elf64_Ehdr header;
  std::memcpy(&header, init.data(), sizeof header);
  EXPECT_EQ(header.e_type, ET_EXEC);
  ASSERT_EQ(header.e_phentsize, sizeof(Elf64_Phdr));
  ASSERT_LE(header.e_phoff + header.e_phnum * sizeof(Elf64_Phdr), init.size());
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, init.data() + header.e_phoff + i * sizeof ph, sizeof ph);
    EXPECT_NE(ph.p_type, PT_INTERP);
  }
}

}  // namespace
}  // namespace lockvisor::linux_guest
