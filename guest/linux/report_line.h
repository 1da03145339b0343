// Writes the init's report lines (guest/linux/console_protocol.h): each line
// is built whole and written with one write(2), so that at least our own
// lines never interleave, and carries its checksum.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace lockvisor::linux_init {

class ReportLine {
 public:
  explicit ReportLine(std::string_view record);
  ReportLine& number(std::string_view key, std::uint64_t value);
  // Percent-escaped, cut to kMaxTextBytes bytes before escaping.
  ReportLine& text(std::string_view key, std::string_view value);
  // The finished line: prefix, record, fields, checksum and '\n'.
  std::string finish() const;

 private:
  std::string line_;
};

// Writes `line.finish()` to `fd` (the console), retrying short writes and
// EINTR. Returns false when the line could not be written (no console): the
// caller has nobody to tell, so it goes on.
bool write_report_line(int fd, const ReportLine& line);

// The escaping of text values, exposed for the tests.
std::string escape_text(std::string_view value);

}  // namespace lockvisor::linux_init
