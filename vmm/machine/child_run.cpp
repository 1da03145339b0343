#include "vmm/machine/child_run.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include "vmm/machine/stop_signals.h"
#include "vmm/util/child_process.h"

namespace lockvisor::machine {

ChildRun run_child(const std::string& lockvisor_path, const std::vector<std::string>& args,
                   const std::string& json_path, const std::string& log_path, double timeout_s) {
  std::vector<std::string> argv = {lockvisor_path, "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--json", json_path});
  ::unlink(json_path.c_str());
  wait_for_children_on_stop();
  const auto start = std::chrono::steady_clock::now();
  ChildProcess child(argv, log_path);
  ChildRun run;
  bool forwarded = false;
  auto forwarded_at = start;
  std::optional<int> code;
  while (!(code = child.poll())) {
    const auto now = std::chrono::steady_clock::now();
    if (!forwarded && stop_signal() != 0) {
      // The child of a terminal's Ctrl-C has it already; a SIGTERM sent to
      // this process alone is passed on, so the child's run ends as "interrupted".
      child.signal(SIGTERM);
      forwarded = true;
      forwarded_at = now;
      run.interrupted = true;
    }
    if ((forwarded && now - forwarded_at > StopSignals::kChildStopGrace) ||
        (!forwarded && std::chrono::duration<double>(now - start).count() > timeout_s)) {
      run.timed_out = !forwarded;
      code = child.kill_and_reap();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.exit_code = *code;
  if (run.exit_code == 130) run.interrupted = true;
  std::ifstream in(json_path);
  if (in) {
    try {
      run.report = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
      run.report = nullptr;  // a run without a report
    }
  }
  ::unlink(json_path.c_str());
  return run;
}

}  // namespace lockvisor::machine
