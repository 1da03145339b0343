#include "vmm/lab/python_script.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "vmm/util/child_process.h"
#include "vmm/util/error.h"

#ifndef LOCKVISOR_SOURCE_DIR
#define LOCKVISOR_SOURCE_DIR "."
#endif

namespace lockvisor::lab {

std::string tool_script(const char* name, const char* env_override) {
  if (const char* given = std::getenv(env_override)) return given;
  return std::string(LOCKVISOR_SOURCE_DIR) + "/tools/" + name;
}

ScriptRun run_python_script(const std::string& script, const std::vector<std::string>& args,
                            const std::string& log_path, double timeout_s) {
  if (!std::filesystem::exists(script)) return {false, fmt::format("{} is not there", script)};
  std::vector<std::string> argv = {"/usr/bin/python3", script};
  argv.insert(argv.end(), args.begin(), args.end());
  try {
    ChildProcess child(argv, log_path);
    const auto start = std::chrono::steady_clock::now();
    std::optional<int> code;
    while (!(code = child.poll())) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s) {
        child.kill_and_reap();
        return {false, fmt::format("{} timed out after {:.0f} s", script, timeout_s)};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (*code == 0) return {true, {}};
    return {false, *code == 127 ? std::string("/usr/bin/python3 cannot be started")
                                : fmt::format("{} failed (exit {}; {})", script, *code, log_path)};
  } catch (const Error& e) {
    return {false, e.what()};
  }
}

}  // namespace lockvisor::lab
