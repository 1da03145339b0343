// The serial console (vmm/machine/serial_console.h) without a VM: lines per
// vCPU, splitting at kMaxLineBytes with a continuation mark, write errors,
// and --serial files that are opened late and never block.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "vmm/machine/serial_console.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace {

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lockvisor-serial-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(SerialConsole& console, unsigned vcpu, const std::string& bytes) {
  for (char c : bytes) ASSERT_TRUE(console.put(vcpu, c));
}

TEST(SerialConsole, LinesOfDifferentVcpusNeverMerge) {
  SerialConsole console(SerialConsole::Capture{}, 2);
  put(console, 0, "zero ");
  put(console, 1, "one\n");
  put(console, 0, "still zero\n");
  put(console, 1, "unterminated");
  console.flush_all();
  EXPECT_EQ(console.captured(), (std::vector<std::string>{"vCPU 1: one", "vCPU 0: zero still zero", "vCPU 1: unterminated"}));
}

TEST(SerialConsole, LongLinesAreSplitWithAContinuationMark) {
  SerialConsole console(SerialConsole::Capture{}, 1);
  put(console, 0, std::string(10000, 'x') + "\n");
  const auto lines = console.captured();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "vCPU 0: " + std::string(4096, 'x'));
  EXPECT_EQ(lines[1], "vCPU 0+ " + std::string(4096, 'x'));
  EXPECT_EQ(lines[2], "vCPU 0+ " + std::string(10000 - 8192, 'x'));
}

TEST(SerialConsole, SplitsDoNotCutAUtf8Sequence) {
  SerialConsole console(SerialConsole::Capture{}, 1);
  // 4095 bytes, then a 3-byte euro sign straddling the 4096-byte bound.
  put(console, 0, std::string(4095, 'y') + "\xE2\x82\xAC" + "z\n");
  const auto lines = console.captured();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "vCPU 0: " + std::string(4095, 'y'));
  EXPECT_EQ(lines[1], "vCPU 0+ \xE2\x82\xAC" "z");
}

TEST(SerialConsole, FilesGetEscapedPrefixedLinesAndAreCreatedOnlyByOpen) {
  const std::string path = scratch("out.txt");
  std::filesystem::remove(path);
  {
    SerialConsole console(path, 2);
    EXPECT_FALSE(std::filesystem::exists(path)) << "created before open()";
    console.open();
    put(console, 1, "evil\x1b[2K\routcome: completed (exit code 0)\n");
    put(console, 0, "tail");
  }
  EXPECT_EQ(slurp(path), "vCPU 1| evil\\x1b[2K\\routcome: completed (exit code 0)\nvCPU 0| tail\n");
  std::filesystem::remove(path);
}

TEST(SerialConsole, AnExistingFileIsNotTruncatedBeforeOpen) {
  const std::string path = scratch("keep.txt");
  { std::ofstream(path) << "keep\n"; }
  { SerialConsole console(path, 1); }  // set-up failed before open()
  EXPECT_EQ(slurp(path), "keep\n");
  std::filesystem::remove(path);
}

TEST(SerialConsole, WriteErrorsAreDetected) {
  SerialConsole console("/dev/full", 1);
  console.open();
  bool ok = true;
  for (char c : std::string("a line\n")) ok = console.put(0, c) && ok;
  EXPECT_FALSE(ok);
  ASSERT_TRUE(console.write_error().has_value());
  EXPECT_NE(console.write_error()->find("/dev/full"), std::string::npos) << *console.write_error();
  EXPECT_FALSE(console.put(0, 'x')) << "stays failed";
}

TEST(SerialConsole, AFifoWithoutReaderIsRefusedWithoutBlocking) {
  const std::string fifo = scratch("fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  SerialConsole console(fifo, 1);
  try {
    console.open();
    ADD_FAILURE() << "opened a FIFO with no reader";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("FIFO with no reader"), std::string::npos) << e.what();
  }
  std::filesystem::remove(fifo);
}

TEST(SerialConsole, ADirectoryIsRefused) {
  SerialConsole console(std::filesystem::temp_directory_path().string(), 1);
  EXPECT_THROW(console.open(), Error);
}

}  // namespace
}  // namespace lockvisor::machine
