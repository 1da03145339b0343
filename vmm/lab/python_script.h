// The lab's drawing is done by Python scripts (matplotlib, from Debian's
// python3-matplotlib): lab-plot.py for the plots and trace-swimlane.py for
// the timelines. In the source tree they live in tools/; installed, in
// share/lockvisor/ beside bin/ (docs/install.md). They run as child
// processes with Debian's /usr/bin/python3, output to a log, and a bounded
// wait: a broken, hanging or missing script costs the report its picture,
// never the lab.
#pragma once
#include <string>
#include <vector>

namespace lockvisor::lab {

// Where a script was found, or every place that was tried.
struct ToolScript {
  std::string name;                 // e.g. "lab-plot.py"
  std::string path;                 // empty when not found
  std::vector<std::string> looked;  // the places tried, in order, as a reader can check them
};

// Looks for script NAME, in this order:
//   1. share/lockvisor/NAME relative to this executable (/proc/self/exe):
//      an installed lockvisor, wherever its prefix was moved to;
//   2. tools/NAME in the source tree the binary was built from;
//   3. the file named by environment variable `env_override`.
ToolScript tool_script(const char* name, const char* env_override);

struct ScriptRun {
  bool ok = false;
  std::string why;  // when not ok: "... is not in ...", "exit 1", "timed out after 300 s", ...
  // Not ok because it ran past its time (a slow or busy host), not for want
  // of python3 and matplotlib: the callers' advice differs.
  bool timed_out = false;
  // Not ok after the script ran: the last line it wrote to its log, which for
  // a Python script that failed is its own error ("ValueError: Axis limits
  // cannot be NaN or Inf"); empty when it wrote nothing.
  std::string last_line;
  // That line says a module would not import (python3 without matplotlib):
  // the failure the callers' install advice is for.
  bool import_failed = false;
};

// Runs /usr/bin/python3 SCRIPT ARGS with stdout and stderr to `log_path`.
ScriptRun run_python_script(const ToolScript& script, const std::vector<std::string>& args,
                            const std::string& log_path, double timeout_s);

}  // namespace lockvisor::lab
