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

SerialConsole::SerialConsole(Capture, unsigned vcpus) : out_(nullptr), pending_(vcpus) {}

SerialConsole::~SerialConsole() { flush_all(); }

void SerialConsole::put(unsigned vcpu, char c) {
  std::lock_guard lock(mutex_);
  std::string& line = pending_[vcpu];
  line.push_back(c);
  if (c == '\n' || line.size() >= kMaxLine) write_line(vcpu, line);
}

void SerialConsole::flush_all() {
  std::lock_guard lock(mutex_);
  for (unsigned vcpu = 0; vcpu < pending_.size(); ++vcpu) {
    auto& line = pending_[vcpu];
    if (line.empty()) continue;
    line.push_back('\n');
    write_line(vcpu, line);
  }
}

std::vector<std::string> SerialConsole::captured() const {
  std::lock_guard lock(mutex_);
  return captured_;
}

void SerialConsole::write_line(unsigned vcpu, std::string& line) {
  if (out_ == nullptr) {
    if (captured_.size() < kMaxCapturedLines) {
      if (!line.empty() && line.back() == '\n') line.pop_back();
      captured_.push_back("vCPU " + std::to_string(vcpu) + ": " + line);
    }
  } else {
    std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
  }
  line.clear();
}

}  // namespace lockvisor::machine
