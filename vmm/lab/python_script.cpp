#include "vmm/lab/python_script.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "vmm/util/child_process.h"
#include "vmm/util/error.h"

// Both come from vmm/CMakeLists.txt: the source tree, and the data folder
// relative to the folder the binary is installed in (GNUInstallDirs).
#ifndef LOCKVISOR_SOURCE_DIR
#define LOCKVISOR_SOURCE_DIR "."
#endif
#ifndef LOCKVISOR_DATA_FROM_BIN
#define LOCKVISOR_DATA_FROM_BIN "../share/lockvisor"
#endif

namespace lockvisor::lab {

namespace fs = std::filesystem;

// The environment comes last, against the usual rule that what is said
// explicitly wins. The scripts read the files this binary writes, so the copy
// installed beside it (or in the tree it was built from) is the one that
// matches its version; a variable left set in a shell, from another checkout
// or an older install, must not quietly draw this binary's results with
// another version's script. The variable is for a binary that has neither:
// one copied on its own to another machine.
ToolScript tool_script(const char* name, const char* env_override) {
  ToolScript found;
  found.name = name;
  auto try_path = [&](const fs::path& candidate) {
    found.looked.push_back(candidate.string());
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) found.path = candidate.string();
    return !found.path.empty();
  };
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && try_path((self.parent_path() / LOCKVISOR_DATA_FROM_BIN / name).lexically_normal())) return found;
  if (try_path(fs::path(LOCKVISOR_SOURCE_DIR) / "tools" / name)) return found;
  const char* given = std::getenv(env_override);
  if (given && *given) {
    try_path(given);
    found.looked.back() = fmt::format("{} (${})", given, env_override);
  } else {
    found.looked.push_back(fmt::format("${} (not set)", env_override));
  }
  return found;
}

namespace {

// The last line of a log that is not blank, at most a line's worth of its
// end (a traceback's last line is the error).
std::string last_line_of(const std::string& path) {
  constexpr std::streamoff kTail = 4096;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const auto size = static_cast<std::streamoff>(in.tellg());
  in.seekg(std::max<std::streamoff>(0, size - kTail));
  std::string line, last;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  return last;
}

ScriptRun not_ok(std::string why) {
  ScriptRun run;
  run.why = std::move(why);
  return run;
}

}  // namespace

ScriptRun run_python_script(const ToolScript& script, const std::vector<std::string>& args,
                            const std::string& log_path, double timeout_s) {
  if (script.path.empty()) {
    std::string places;
    for (const auto& place : script.looked) places += (places.empty() ? "" : ", ") + place;
    return not_ok(fmt::format("{} is not in any of: {}", script.name, places));
  }
  std::vector<std::string> argv = {"/usr/bin/python3", script.path};
  argv.insert(argv.end(), args.begin(), args.end());
  try {
    ChildProcess child(argv, log_path);
    const auto start = std::chrono::steady_clock::now();
    std::optional<int> code;
    while (!(code = child.poll())) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
        child.kill_and_reap();
        auto slow = not_ok(fmt::format("{} timed out after {:.0f} s", script.path, timeout_s));
        slow.timed_out = true;
        return slow;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (*code == 0) {
      ScriptRun ok;
      ok.ok = true;
      return ok;
    }
    if (*code == 127) return not_ok("/usr/bin/python3 cannot be started");
    auto failed = not_ok(fmt::format("{} failed (exit {}; {})", script.path, *code, log_path));
    failed.last_line = last_line_of(log_path);
    failed.import_failed =
        failed.last_line.starts_with("ModuleNotFoundError") || failed.last_line.starts_with("ImportError");
    return failed;
  } catch (const Error& e) {
    return not_ok(e.what());
  }
}

}  // namespace lockvisor::lab
