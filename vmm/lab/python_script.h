// The lab's drawing is done by Python scripts in tools/ (matplotlib, from
// Debian's python3-matplotlib): tools/lab-plot.py for the plots and
// tools/trace-swimlane.py for the timelines. They run as child processes
// with Debian's /usr/bin/python3, output to a log, and a bounded wait: a
// broken or hanging script costs the report its picture, never the lab.
#pragma once
#include <string>
#include <vector>

namespace lockvisor::lab {

// tools/NAME in the source tree, or the file in environment variable
// `env_override` when that is set (tests point it elsewhere).
std::string tool_script(const char* name, const char* env_override);

struct ScriptRun {
  bool ok = false;
  std::string why;  // when not ok: "not there", "exit 1", "timed out after 300 s", ...
};

// Runs /usr/bin/python3 SCRIPT ARGS with stdout and stderr to `log_path`.
ScriptRun run_python_script(const std::string& script, const std::vector<std::string>& args,
                            const std::string& log_path, double timeout_s);

}  // namespace lockvisor::lab
