// A lab directory's own files as input: lab.json (the manifest) and the
// lines of results.jsonl. A directory is copied, merged, edited by hand or
// written by another version before `lab report`, `lab compare`, `lab merge`
// or `--resume` reads it, so every value the lab reads from it is checked
// here first: a bad one is one line naming the file (and line) and the key,
// a usage lockvisor::Error (exit 2), never an exception from deep inside a
// summary.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "vmm/lab/results_log.h"
#include "vmm/lab/scenario.h"

namespace lockvisor::lab {

inline constexpr const char* kManifest = "lab.json";
inline constexpr const char* kResults = "results.jsonl";

// DIR/lab.json, parsed and checked: an object holding every key the lab
// reads, each of its type (strings, whole numbers, the shard "I/N", the
// placement's CPU list...).
nlohmann::json read_manifest(const std::string& dir);

// Each result line of `loaded` (read from `path` by load_results) against
// the lab `s` that made it (the manifest's effective scenario): its point is
// one of the lab's, its repeat and index lie within the plan, its outcome is
// a point's outcome, and every metric of a completed run is a number, not
// negative (metrics.h, read_metric). Errors name path:line and the key.
void check_results(const LoadedResults& loaded, const std::string& path, const Scenario& s);

}  // namespace lockvisor::lab
