#include "vmm/lab/results_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "vmm/util/error.h"

namespace lockvisor::lab {

LoadedResults load_results(const std::string& path) {
  LoadedResults out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::set<std::string> ids;
  std::size_t start = 0, line = 0;
  while (start < text.size()) {
    ++line;
    const auto end = text.find('\n', start);
    if (end == std::string::npos) {  // the write of the last point was cut short
      out.torn = true;
      break;
    }
    const auto body = std::string_view(text).substr(start, end - start);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(body);
    } catch (const nlohmann::json::exception&) {
      fail("{}:{}: not a JSON line (the file is damaged; only a torn last line is repaired)", path, line);
    }
    if (!record.is_object() || !record.contains("id") || !record["id"].is_string())
      fail("{}:{}: a result line without a string \"id\"", path, line);
    if (!ids.insert(record["id"].get<std::string>()).second)
      fail("{}:{}: point '{}' recorded twice", path, line, record["id"].get<std::string>());
    out.records.push_back(std::move(record));
    out.lines.push_back(line);
    start = end + 1;
    out.good_bytes = start;
  }
  return out;
}

ResultsLog::ResultsLog(const std::string& path, const LoadedResults& loaded) : path_(path) {
  fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd_.valid()) fail_host("{}: cannot open: {}", path, std::strerror(errno));
  if (loaded.torn && ::ftruncate(fd_.get(), static_cast<off_t>(loaded.good_bytes)) != 0)
    fail_host("{}: cannot cut the torn last line: {}", path, std::strerror(errno));
}

void ResultsLog::append(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const auto n = ::write(fd_.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_host("{}: write failed: {}", path_, std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd_.get()) != 0) fail_host("{}: fsync failed: {}", path_, std::strerror(errno));
}

}  // namespace lockvisor::lab
