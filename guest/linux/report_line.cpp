#include "guest/linux/report_line.h"

#include <cerrno>
#include <cstdio>

#include <unistd.h>

#include "guest/linux/console_protocol.h"

namespace lockvisor::linux_init {

std::string escape_text(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : value.substr(0, kMaxTextBytes)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > ' ' && c <= '~' && c != '%') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

ReportLine::ReportLine(std::string_view record) : line_(kLinePrefix) { line_ += record; }

ReportLine& ReportLine::number(std::string_view key, std::uint64_t value) {
  line_ += ' ';
  line_ += key;
  line_ += '=';
  line_ += std::to_string(value);
  return *this;
}

ReportLine& ReportLine::text(std::string_view key, std::string_view value) {
  line_ += ' ';
  line_ += key;
  line_ += '=';
  line_ += escape_text(value);
  return *this;
}

std::string ReportLine::finish() const {
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", static_cast<unsigned>(crc32(line_)));
  std::string out = line_;
  out += ' ';
  out += kCrcKey;
  out += '=';
  out += crc;
  out += '\n';
  return out;
}

bool write_report_line(int fd, const ReportLine& line) {
  const std::string bytes = line.finish();
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace lockvisor::linux_init
