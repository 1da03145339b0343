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
  ~SerialConsole();
  void put(unsigned vcpu, char c);
  void flush_all();

 private:
  void write_line(std::string& line);
  struct Closer {
    void operator()(std::FILE* f) const {
      if (f != nullptr) std::fclose(f);
    }
  };
  std::unique_ptr<std::FILE, Closer> file_;
  std::FILE* out_;
  std::mutex mutex_;
  std::vector<std::string> pending_;
};

}  // namespace lockvisor::machine
