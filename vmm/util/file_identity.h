// Whether two paths a command was given name one file, so that a command can
// refuse to write an output over one of its inputs, or two outputs over each
// other (`trace-check T --json T`, `run --json F --trace F`): the later
// writer would silently replace what the earlier wrote or read.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace lockvisor {

// True when `a` and `b` name the same file: the same inode where both exist
// (whatever the spelling: a symlink, `./x`, /proc/self/fd/1), else the same
// absolute, normalised path (a file that one of them would create).
bool same_file(const std::string& a, const std::string& b);

// `paths`: (what, path) pairs, e.g. ("--json", "r.json") or ("the trace",
// "t.json"); empty paths are skipped. Throws a usage lockvisor::Error for the
// first two that name one file: "--trace r.json: the same file as --json
// r.json; give each its own".
void refuse_shared_files(const std::vector<std::pair<std::string, std::string>>& paths);

}  // namespace lockvisor
