// Bad input to the lockvisor command: a clear one-line error and the
// documented non-zero exit code, never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>


namespace {

struct Outcome {
  int exit_code;
  std::string output;
};

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lockvisor-cli-test-" + name)).string();
}

Outcome lockvisor(const std::string& args) {
  const std::string command = std::string(LOCKVISOR_BINARY) + " " + args + " 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe)) output += buffer.data();
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

void expect_one_line_error(const Outcome& o, int code, const std::string& mention) {
  EXPECT_EQ(o.exit_code, code) << o.output;
  EXPECT_EQ(o.output.find("lockvisor: error: "), 0u) << o.output;
  EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << "more than one line: " << o.output;
  EXPECT_NE(o.output.find(mention), std::string::npos) << o.output;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Checked before /dev/kvm is touched: no KVM needed.
TEST(CliBadInput, UsageErrors) {
  expect_one_line_error(lockvisor("run --vcpus 0"), 2, "--vcpus 0");
  expect_one_line_error(lockvisor("run --vcpus 1000"), 2, "--vcpus 1000");
  expect_one_line_error(lockvisor("run --no-such-option"), 2, "no-such-option");
  expect_one_line_error(lockvisor("run --pcpus 99999"), 2, "CPU");
  expect_one_line_error(lockvisor("run --pcpus 1-0"), 2, "backwards");
  expect_one_line_error(lockvisor("run --pcpus 1000"), 2, "does not exist");
  expect_one_line_error(lockvisor("run --memory 3"), 2, "--memory 3");
  expect_one_line_error(lockvisor("run --workload nope"), 2, "nope");
  expect_one_line_error(lockvisor("run --kick maybe"), 2, "maybe");
  expect_one_line_error(lockvisor("run --sbi-eid 0x123"), 2, "experimental range");
  expect_one_line_error(lockvisor("run --param novalue"), 2, "key=value");
  expect_one_line_error(lockvisor("frobnicate"), 2, "frobnicate");
}

TEST(CliBadInput, ImageFiles) {
  expect_one_line_error(lockvisor("run --image /nonexistent/guest.elf"), 2, "guest image");
  const std::string empty = scratch("empty.elf");
  write_file(empty, "");
  expect_one_line_error(lockvisor("run --image " + empty), 2, "empty");
  const std::string text = scratch("text.elf");
  write_file(text, "this is not an ELF file at all, just text\n");
  expect_one_line_error(lockvisor("run --image " + text), 2, "not an ELF");
  std::ifstream guest(LOCKVISOR_GUEST_ELF, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(guest)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 4096u);
  const std::string truncated = scratch("truncated.elf");
  write_file(truncated, bytes.substr(0, 4200));  // cuts into the first PT_LOAD (file offset 0x1000)
  expect_one_line_error(lockvisor("run --image " + truncated), 2, "guest image");
  expect_one_line_error(lockvisor("run --memory 4 --vcpus 8"), 2, "too small");
  expect_one_line_error(lockvisor("run --image " + text + " --timeout -1"), 2, "--timeout");
}

}  // namespace
