#include "vmm/machine/serial_console.h"

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::machine {

namespace {
constexpr std::size_t kMaxLine = 4096;  // a guest that never sends '\n' still gets flushed
}

SerialConsole::SerialConsole(const std::string& path, unsigned vcpus) : out_(stdout), pending_(vcpus) {
  if (!path.empty()) {
    file_.reset(std::fopen(path.c_str(), "w"));
    if (!file_) fail("--serial {}: {}", path, std::strerror(errno));
    out_ = file_.get();
  }
}

SerialConsole::~SerialConsole() { flush_all(); }

void SerialConsole::put(unsigned vcpu, char c) {
  std::lock_guard lock(mutex_);
  std::string& line = pending_[vcpu];
  line.push_back(c);
  if (c == '\n' || line.size() >= kMaxLine) write_line(line);
}

void SerialConsole::flush_all() {
  std::lock_guard lock(mutex_);
  for (auto& line : pending_) {
    if (line.empty()) continue;
    line.push_back('\n');
    write_line(line);
  }
}

void SerialConsole::write_line(std::string& line) {
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
  line.clear();
}

}  // namespace lockvisor::machine
