#include "vmm/machine/serial_console.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "vmm/util/guest_text.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {

namespace {

// Where a segment of at most `limit` bytes of `bytes` may end without
// splitting a UTF-8 sequence (when the bytes are UTF-8 at all): back off
// over at most three continuation bytes and the lead byte before them.
std::size_t segment_end(const std::string& bytes, std::size_t limit) {
  if (bytes.size() <= limit) return bytes.size();
  const auto continuation = [&](std::size_t i) { return (static_cast<unsigned char>(bytes[i]) & 0xC0) == 0x80; };
  std::size_t cut = limit;  // the segment is bytes[0, cut); bytes[cut] starts the next
  for (int back = 0; back < 3 && cut > 1 && continuation(cut); ++back) --cut;
  return continuation(cut) ? limit : cut;  // not UTF-8 there anyway: cut anywhere
}

}  // namespace

SerialConsole::SerialConsole(std::string path, unsigned vcpus) : path_(std::move(path)), pending_(vcpus) {}

SerialConsole::SerialConsole(Capture, unsigned vcpus) : capture_(true), pending_(vcpus) {}

SerialConsole::~SerialConsole() { flush_all(); }

void SerialConsole::open() {
  std::lock_guard lock(mutex_);
  if (capture_ || path_.empty() || file_) return;
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail("--serial {}: is a directory", path_);
  // --serial /dev/stdout (or a path to the file stdout or stderr is): opened
  // anew, a regular file gets a description of its own, truncated and
  // written from offset 0 over the report. Sharing the standard stream's
  // description instead keeps one offset, so neither output overwrites the other.
  for (const int standard : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat own {};
    if (::stat(path_.c_str(), &st) != 0 || ::fstat(standard, &own) != 0 || !S_ISREG(own.st_mode) ||
        own.st_dev != st.st_dev || own.st_ino != st.st_ino)
      continue;
    const int fd = ::fcntl(standard, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) fail("--serial {}: {}", path_, std::strerror(errno));
    file_.reset(::fdopen(fd, "w"));  // "w" does not truncate an fd; "a" would set O_APPEND on stdout too
    if (!file_) {
      const int error = errno;
      ::close(fd);
      fail("--serial {}: {}", path_, std::strerror(error));
    }
    return;
  }
  // O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader
  // forever; with it the open fails at once (ENXIO). O_TRUNC only affects a
  // regular file. Writes are made blocking again below.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0) {
    if (errno == ENXIO) fail("--serial {}: a FIFO with no reader (start the reader first)", path_);
    fail("--serial {}: {}", path_, std::strerror(errno));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    const int error = errno;
    ::close(fd);
    fail("--serial {}: {}", path_, std::strerror(error));
  }
  file_.reset(::fdopen(fd, "w"));
  if (!file_) {
    const int error = errno;
    ::close(fd);
    fail("--serial {}: {}", path_, std::strerror(error));
  }
}

bool SerialConsole::put(unsigned vcpu, char c) {
  std::lock_guard lock(mutex_);
  if (write_error_) return false;
  if (one_stream_) {
    vcpu = 0;
    if (c == '\r') return true;  // the kernel ends console lines with CR LF
  }
  if (vcpu >= pending_.size()) return true;
  Pending& line = pending_[vcpu];
  if (c == '\n') {
    write_segment(vcpu, line, line.bytes.size(), true);
  } else {
    line.bytes.push_back(c);
    // One byte past the bound, so that the cut can avoid splitting a UTF-8
    // sequence; a segment never exceeds kMaxLineBytes.
    if (line.bytes.size() > kMaxLineBytes) write_segment(vcpu, line, segment_end(line.bytes, kMaxLineBytes), false);
  }
  return !write_error_;
}

void SerialConsole::flush_all() {
  std::lock_guard lock(mutex_);
  for (unsigned vcpu = 0; vcpu < pending_.size(); ++vcpu) {
    auto& line = pending_[vcpu];
    if (!line.bytes.empty()) write_segment(vcpu, line, line.bytes.size(), true);
  }
  if (!capture_ && !write_error_) {
    std::FILE* out = file_ ? file_.get() : stdout;
    if (std::fflush(out) != 0)
      write_error_ = fmt::format("serial output ({}): write failed: {}", path_.empty() ? "stdout" : path_,
                                 std::strerror(errno));
  }
}

std::optional<std::string> SerialConsole::write_error() const {
  std::lock_guard lock(mutex_);
  return write_error_;
}

std::vector<std::string> SerialConsole::captured() const {
  std::lock_guard lock(mutex_);
  return captured_;
}

// Writes the first `length` bytes of `line` as one output line; the rest
// stays pending as the continuation of this segment.
void SerialConsole::write_segment(unsigned vcpu, Pending& line, std::size_t length, bool ends_line) {
  const std::string_view bytes(line.bytes.data(), length);
  const char mark = line.continued ? '+' : '|';
  if (capture_) {
    if (captured_.size() < kMaxCapturedLines)
      captured_.push_back(one_stream_ ? fmt::format("console{} {}", line.continued ? "+" : ":", valid_utf8(bytes))
                                      : fmt::format("vCPU {}{} {}", vcpu, line.continued ? "+" : ":", valid_utf8(bytes)));
  } else if (!write_error_) {
    std::FILE* out = file_ ? file_.get() : stdout;
    const std::string text =
        one_stream_ ? (file_ ? fmt::format("{}\n", console_escape(bytes))
                             : fmt::format("serial{} {}\n", mark, console_escape(bytes)))
                    : fmt::format("{}vCPU {}{} {}\n", file_ ? "" : "serial ", vcpu, mark, console_escape(bytes));
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size() || std::fflush(out) != 0)
      write_error_ = fmt::format("serial output ({}): write failed: {}", path_.empty() ? "stdout" : path_,
                                 std::strerror(errno != 0 ? errno : EIO));
  }
  line.bytes.erase(0, length);
  line.continued = !ends_line;
}

}  // namespace lockvisor::machine
