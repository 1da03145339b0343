// results.jsonl: one JSON object per finished point, one per line, appended
// with a single write() and fsync()ed before the next point starts. A lab
// killed at any moment leaves every finished point on disk and at most one
// torn last line (no newline yet); reading drops that line (and the log
// truncates it away before appending), so that point simply runs again.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/util/unique_fd.h"

namespace lockvisor::lab {

struct LoadedResults {
  std::vector<nlohmann::json> records;
  std::vector<std::size_t> lines;  // each record's line in the file (from 1), for messages
  std::size_t good_bytes = 0;  // where the last complete line ends
  bool torn = false;           // a last line without its newline was dropped
};

// Reads a results file. Every record must be a JSON object with a string
// "id", ids unique; anything else but a torn last line is a usage
// lockvisor::Error naming the file and line. A missing file reads as empty.
LoadedResults load_results(const std::string& path);

class ResultsLog {
 public:
  // Opens (or creates) `path` for appending after load_results(): a torn
  // last line is cut off first.
  ResultsLog(const std::string& path, const LoadedResults& loaded);
  // One line, written whole and made durable before returning.
  void append(const nlohmann::json& record);

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace lockvisor::lab
