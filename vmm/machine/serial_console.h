// COM1 output of the guest: bytes are collected per vCPU and written a whole
// line at a time, so that lines of different vCPUs never interleave.
#pragma once
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lockvisor::machine {

class SerialConsole {
 public:
  // Empty path: standard output. Throws lockvisor::Error if the file cannot be opened.
  SerialConsole(const std::string& path, unsigned vcpus);
  // Keeps the lines (each "vCPU N: text", at most kMaxCapturedLines) instead
  // of writing them: for callers that check what the guest printed.
  struct Capture {};
  SerialConsole(Capture, unsigned vcpus);
  ~SerialConsole();
  void put(unsigned vcpu, char c);
  void flush_all();
  std::vector<std::string> captured() const;

  static constexpr std::size_t kMaxCapturedLines = 10000;

 private:
  void write_line(unsigned vcpu, std::string& line);
  struct Closer {
    void operator()(std::FILE* f) const {
      if (f != nullptr) std::fclose(f);
    }
  };
  std::unique_ptr<std::FILE, Closer> file_;
  std::FILE* out_;  // nullptr: capture
  mutable std::mutex mutex_;
  std::vector<std::string> pending_;
  std::vector<std::string> captured_;
};

}  // namespace lockvisor::machine
