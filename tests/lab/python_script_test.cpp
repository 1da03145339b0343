// The lab's drawing scripts run as bounded child processes
// (vmm/lab/python_script.h): a script that succeeds, fails or runs past its
// time costs the report its picture and says which of the three it was, so
// that the report's advice (install matplotlib, draw again, or the script's
// own error) fits.
#include "vmm/lab/python_script.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace lockvisor::lab {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("lockvisor-python-script-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  ToolScript script(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return {name, (dir / name).string(), {(dir / name).string()}};
  }
};

TEST(PythonScript, SuccessFailureAndTimeoutAreToldApart) {
  Scratch s;
  const std::string log = (s.dir / "log").string();
  const ScriptRun ok = run_python_script(s.script("ok.py", "import sys\nsys.exit(0)\n"), {}, log, 30);
  EXPECT_TRUE(ok.ok) << ok.why;

  const ScriptRun failed = run_python_script(s.script("fail.py", "import sys\nsys.exit(3)\n"), {}, log, 30);
  EXPECT_FALSE(failed.ok);
  EXPECT_FALSE(failed.timed_out);
  EXPECT_NE(failed.why.find("exit 3"), std::string::npos) << failed.why;

  // Ends by the bound, not by itself: the script would sleep for minutes.
  const ScriptRun slow = run_python_script(s.script("slow.py", "import time\ntime.sleep(600)\n"), {}, log, 0.5);
  EXPECT_FALSE(slow.ok);
  EXPECT_TRUE(slow.timed_out);
  EXPECT_NE(slow.why.find("timed out after"), std::string::npos) << slow.why;

  const ScriptRun missing = run_python_script(ToolScript{"absent.py", "", {"/nowhere/absent.py"}}, {}, log, 30);
  EXPECT_FALSE(missing.ok);
  EXPECT_FALSE(missing.timed_out);
  EXPECT_NE(missing.why.find("/nowhere/absent.py"), std::string::npos) << missing.why;
}

// A script that ran and failed leaves its own error as the log's last line;
// one whose import failed says so, the case the install advice is for.
TEST(PythonScript, AFailedScriptsOwnErrorIsItsLogsLastLine) {
  Scratch s;
  const std::string log = (s.dir / "log").string();
  const ScriptRun raised =
      run_python_script(s.script("raise.py", "raise ValueError('Axis limits cannot be NaN or Inf')\n"), {}, log, 30);
  EXPECT_FALSE(raised.ok);
  EXPECT_EQ(raised.last_line, "ValueError: Axis limits cannot be NaN or Inf");
  EXPECT_FALSE(raised.import_failed);

  const ScriptRun missing = run_python_script(s.script("import.py", "import lockvisor_no_such_module\n"), {}, log, 30);
  EXPECT_FALSE(missing.ok);
  EXPECT_TRUE(missing.import_failed) << missing.last_line;
}

}  // namespace
}  // namespace lockvisor::lab
