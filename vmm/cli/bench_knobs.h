// lockvisor bench --knobs: the userspace backend's host knobs (halt polling,
// directed yield on kick, kick boost) against each other, on pingpong and a PV
// lock, at 4 vCPUs on 1 and on 2 host CPUs.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace lockvisor::cli {

struct KnobsBenchOptions {
  bool enabled = false;
  unsigned repeats = 3;
  double lock_seconds = 0.5;
  std::uint64_t pingpong_rounds = 500;
  std::string json;  // bench's own --json, filled in by bench_command.cpp
};

// Adds --knobs and its options to `bench`.
std::shared_ptr<KnobsBenchOptions> add_knobs_bench_options(CLI::App& bench);
// Runs it; returns the exit code (0, or the failed run's, 130 on a signal).
int run_knobs_bench(const KnobsBenchOptions& options);

}  // namespace lockvisor::cli
