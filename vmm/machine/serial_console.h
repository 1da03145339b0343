// COM1 output of the guest: bytes are collected per vCPU and written a whole
// line at a time, so that lines of different vCPUs never interleave. Guest
// bytes are untrusted: each line is written escaped (guest_text.h) and
// prefixed by its vCPU ("serial vCPU 0| " on stdout, "vCPU 0| " in a
// --serial file), and a line longer than kMaxLineBytes is split into
// segments whose continuations are marked with '+' instead of '|'
// ("serial vCPU 0+ "). How many bytes a guest may send at all is
// GuestLimits::serial_bytes, charged by the caller.
#pragma once
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lockvisor::machine {

class SerialConsole {
 public:
  // Empty path: standard output. Nothing is opened, created or truncated
  // here: open() does that once the VM is built.
  SerialConsole(std::string path, unsigned vcpus);
  // Keeps the lines (each "vCPU N: text", continuations "vCPU N+ text", at
  // most kMaxCapturedLines) instead of writing them: for callers that check
  // what the guest printed.
  struct Capture {};
  SerialConsole(Capture, unsigned vcpus);
  ~SerialConsole();
  SerialConsole(const SerialConsole&) = delete;
  SerialConsole& operator=(const SerialConsole&) = delete;

  // One stream for the whole VM instead of one per vCPU (a Linux guest's
  // console: the kernel serialises its writers, and any CPU may write):
  // put() ignores its vCPU, lines are prefixed "serial| " on stdout and
  // written bare in a --serial file. Call before the first put().
  void use_one_stream() { one_stream_ = true; }

  // Opens the --serial file (creating or truncating a regular file), without
  // ever blocking: a FIFO with no reader is refused. Throws lockvisor::Error
  // (a usage error, one line). Does nothing for stdout or a capture.
  void open();
  // false once a write has failed (write_error() says why); the caller ends
  // the run. Later bytes are dropped.
  bool put(unsigned vcpu, char c);
  // Writes every unfinished line (at the end of a run).
  void flush_all();
  // Why writing failed, if it did.
  std::optional<std::string> write_error() const;
  std::vector<std::string> captured() const;

  static constexpr std::size_t kMaxCapturedLines = 10000;
  static constexpr std::size_t kMaxLineBytes = 4096;

 private:
  struct Pending {
    std::string bytes;
    bool continued = false;  // the bytes continue a segment already written
  };
  void write_segment(unsigned vcpu, Pending& line, std::size_t length, bool ends_line);
  struct Closer {
    void operator()(std::FILE* f) const {
      if (f != nullptr) std::fclose(f);
    }
  };
  std::string path_;
  bool capture_ = false;
  bool one_stream_ = false;
  std::unique_ptr<std::FILE, Closer> file_;
  mutable std::mutex mutex_;
  std::vector<Pending> pending_;
  std::vector<std::string> captured_;
  std::optional<std::string> write_error_;
};

}  // namespace lockvisor::machine
