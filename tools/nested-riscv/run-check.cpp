// A static riscv64 helper for run-test.sh: one small action per call, each
// exercising one promise of run.sh (exit status, environment, shares, /tmp,
// timeout, freeze detection) from inside the nested RISC-V machine.
//
// Usage: run-check exit N | abort | env NAME... | write FILE | cat FILE... |
//        hang | freeze
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

#include <unistd.h>

namespace {

int usage() {
  std::cerr << "usage: run-check exit N | abort | env NAME... | write FILE | cat FILE... | hang | freeze\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string_view action = argv[1];
  if (action == "exit" && argc == 3) return std::atoi(argv[2]);
  if (action == "abort") std::abort();
  if (action == "env") {
    for (int i = 2; i < argc; ++i) {
      const char* value = std::getenv(argv[i]);
      std::cout << argv[i] << (value ? "=" + std::string(value) : std::string(" unset")) << "\n";
    }
    char cwd[4096];
    std::cout << "cwd=" << (::getcwd(cwd, sizeof cwd) ? cwd : "?") << "\n";
    return 0;
  }
  if (action == "write" && argc == 3) {
    std::ofstream out(argv[2]);
    out << "written inside\n";
    return out.good() ? 0 : 1;
  }
  if (action == "cat") {
    for (int i = 2; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      if (!in) {
        std::cout << argv[i] << ": cannot open\n";
        return 1;
      }
      std::cout << std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return 0;
  }
  // A command that never ends on its own: the machine's heartbeat goes on.
  if (action == "hang")
    for (;;) ::pause();
  // Stops every process but init and this one, the heartbeat among them: to
  // run.sh the machine looks frozen.
  if (action == "freeze") {
    std::cout << "stopping every process" << std::endl;
    ::kill(-1, SIGSTOP);
    for (;;) ::pause();
  }
  return usage();
}
