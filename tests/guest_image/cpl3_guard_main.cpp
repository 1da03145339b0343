// lockvisor-cpl3-guard: checks a guest image for instructions its CPL3 code
// may not contain on PVM hosts (see cpl3_rules.cpp).
//
//   lockvisor-cpl3-guard [--objdump PATH] [--max-fault-bytes N] <guest.elf>
//
// Prints one line per violation, then a summary. Exit status: 0 clean,
// 1 violations, 2 bad input (usage, missing file, objdump failure, missing
// region symbols).
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "cpl3_guard.h"

namespace {

int usage(const char* argv0) {
  std::cerr << "usage: " << argv0 << " [--objdump PATH] [--max-fault-bytes N] <guest.elf>\n"
            << "  default objdump: " << LOCKVISOR_OBJDUMP << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  namespace g = lockvisor::guest_image;
  std::string objdump = LOCKVISOR_OBJDUMP;
  g::Options options;
  std::string elf;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--objdump" && i + 1 < argc) {
      objdump = argv[++i];
    } else if (arg == "--max-fault-bytes" && i + 1 < argc) {
      char* end = nullptr;
      options.max_fault_region_bytes = std::strtoull(argv[++i], &end, 0);
      if (*end != '\0') return usage(argv[0]);
    } else if (arg.starts_with("-") || !elf.empty()) {
      return usage(argv[0]);
    } else {
      elf = arg;
    }
  }
  if (elf.empty()) return usage(argv[0]);

  try {
    const g::Report report = g::check_elf(elf, objdump, options);
    for (const g::Violation& v : report.violations) std::cout << g::format_violation(v) << "\n";
    std::cout << g::format_summary(report, options) << "\n";
    return report.clean() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 2;
  }
}
