// OutputFile (vmm/util/output_file.h), the writer behind --json: it replaces
// nothing but a regular file, follows no symlink, never blocks on a FIFO and
// leaves no temporary behind, whatever fails.
#include "vmm/util/output_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/ci_required.h"
#include "vmm/util/error.h"

namespace lockvisor {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "lockvisor-output-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.insert(e.path().filename().string());
    return names;
  }

 private:
  fs::path path_;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The Error an OutputFile for `path` refuses with (constructor or write).
Error refusal(const std::string& path) {
  try {
    OutputFile(path, "--json").write("{}\n");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << path << " was accepted";
  return Error("accepted");
}

void expect_refused(const std::string& path, const std::string& mention) {
  const Error e = refusal(path);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage) << e.what();
  EXPECT_NE(std::string(e.what()).find("--json " + path), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
}

TEST(OutputFile, WritesANewFileAndNothingElse) {
  TempDir dir;
  const auto target = dir / "report.json";
  OutputFile(target.string(), "--json").write("{\"a\": 1}\n");
  EXPECT_EQ(read_text(target), "{\"a\": 1}\n");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"report.json"});
}

TEST(OutputFile, CheckingLeavesNoFileBehind) {
  TempDir dir;
  const OutputFile out((dir / "report.json").string(), "--json");
  EXPECT_TRUE(dir.entries().empty());  // the probe temporary is gone again
  out.write("x");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"report.json"});
}

TEST(OutputFile, ReplacesAnExistingRegularFileAtomically) {
  TempDir dir;
  const auto target = dir / "report.json";
  write_text(target, "old contents");
  // A reader that has the old file open keeps seeing it whole: the new file
  // is renamed over the old one, never truncated and rewritten in place.
  const int reader = ::open(target.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  struct stat before {};
  ASSERT_EQ(::fstat(reader, &before), 0);
  OutputFile(target.string(), "--json").write("new contents");
  EXPECT_EQ(read_text(target), "new contents");
  char buffer[64] = {};
  EXPECT_EQ(::pread(reader, buffer, sizeof buffer, 0), 12);
  EXPECT_EQ(std::string(buffer), "old contents");
  struct stat after {};
  ASSERT_EQ(::stat(target.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino);
  ::close(reader);
  EXPECT_EQ(dir.entries(), std::set<std::string>{"report.json"});
}

TEST(OutputFile, AReplacedFileKeepsItsPermissions) {
  TempDir dir;
  const auto target = dir / "private.json";
  write_text(target, "old");
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  OutputFile(target.string(), "--json").write("new");
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
  OutputFile(target.string(), "--json").write("newer");
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(read_text(target), "newer");
}

TEST(OutputFile, RefusesASymlinkAndLeavesItsTargetAlone) {
  TempDir dir;
  write_text(dir / "victim", "precious");
  fs::create_symlink(dir / "victim", dir / "report.json");
  expect_refused((dir / "report.json").string(), "symbolic link");
  EXPECT_TRUE(fs::is_symlink(dir / "report.json"));
  EXPECT_EQ(read_text(dir / "victim"), "precious");
  // A dangling symlink is refused too: writing would create its target.
  fs::create_symlink(dir / "absent", dir / "dangling.json");
  expect_refused((dir / "dangling.json").string(), "symbolic link");
  EXPECT_FALSE(fs::exists(dir / "absent"));
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"victim", "report.json", "dangling.json"}));
}

TEST(OutputFile, DoesNotFollowAPlantedTemporarySymlink) {
  TempDir dir;
  write_text(dir / "victim", "precious");
  // The name the old writer used for its temporary, planted by someone else.
  fs::create_symlink(dir / "victim", dir / "report.json.tmp");
  OutputFile((dir / "report.json").string(), "--json").write("report");
  EXPECT_EQ(read_text(dir / "victim"), "precious");
  EXPECT_TRUE(fs::is_symlink(dir / "report.json.tmp"));
  EXPECT_EQ(read_text(dir / "report.json"), "report");
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"victim", "report.json", "report.json.tmp"}));
}

TEST(OutputFile, RefusesAFifoWithoutBlocking) {
  TempDir dir;
  const auto fifo = dir / "report.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No reader or writer exists: opening the FIFO would block forever (the
  // test would hang until ctest's timeout), so would writing to it.
  expect_refused(fifo.string(), "FIFO");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(dir.entries(), std::set<std::string>{"report.json"});
}

TEST(OutputFile, RefusesDevNull) {
  // Only the check: were it to regress, write() would replace the host's
  // /dev/null (as root). The whole path is tried on a device of our own.
  try {
    const OutputFile out("/dev/null", "--json");
    ADD_FAILURE() << "/dev/null accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("character device"), std::string::npos) << e.what();
  }
  struct stat st {};
  ASSERT_EQ(::lstat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(OutputFile, RefusesACharacterDevice) {
  TempDir dir;
  const auto device = dir / "null.json";
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) LOCKVISOR_SKIP_OUTSIDE_CI("mknod needs root");
  expect_refused(device.string(), "character device");
  struct stat st {};
  ASSERT_EQ(::lstat(device.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(dir.entries(), std::set<std::string>{"null.json"});
}

TEST(OutputFile, RefusesADirectoryAndLeavesNoTemporaryNextToIt) {
  TempDir dir;
  fs::create_directory(dir / "reports");
  expect_refused((dir / "reports").string(), "directory");
  expect_refused((dir / "reports").string() + "/", "directory");
  expect_refused(".", "directory");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"reports"});
  EXPECT_TRUE(fs::is_empty(dir / "reports"));
}

TEST(OutputFile, RefusesAMissingOrUnwritableDirectory) {
  TempDir dir;
  expect_refused((dir / "missing" / "report.json").string(), "No such file");
  write_text(dir / "file", "x");
  expect_refused((dir / "file" / "report.json").string(), "Not a directory");
  // /proc refuses new files even to root, which a read-only mode would not.
  expect_refused("/proc/lockvisor-report.json", "cannot create");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"file"});
}

TEST(OutputFile, RefusesATargetThatBecameAFifoDuringTheRun) {
  TempDir dir;
  const auto target = dir / "report.json";
  const OutputFile out(target.string(), "--json");  // checked: absent, directory writable
  ASSERT_EQ(::mkfifo(target.c_str(), 0600), 0);
  try {
    out.write("late");
    ADD_FAILURE() << "wrote through a FIFO";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_fifo(target));
  EXPECT_EQ(dir.entries(), std::set<std::string>{"report.json"});
}

// A write that fails halfway (here: RLIMIT_FSIZE, as a full disk would) is a
// host error, leaves no temporary and keeps the old file whole. In a child
// process, so the limit and the ignored SIGXFSZ do not leak into the tests.
TEST(OutputFile, FailedWriteLeavesNoTemporaryAndKeepsTheOldFile) {
  TempDir dir;
  const auto target = dir / "report.json";
  write_text(target, "old contents");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const OutputFile out(target.string(), "--json");  // the check passes: a small file fits
    ::signal(SIGXFSZ, SIG_IGN);                         // write() then fails with EFBIG instead of killing us
    const rlimit limit{100, 100};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      out.write(std::string(1 << 20, 'x'));
    } catch (const Error& e) {
      ::_exit(e.kind() == ErrorKind::kHost && std::string(e.what()).find("write failed") != std::string::npos ? 0 : 1);
    }
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: wrong error, 2: the write succeeded";
  EXPECT_EQ(read_text(target), "old contents");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"report.json"});
}

}  // namespace
}  // namespace lockvisor
