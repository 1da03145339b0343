// What `lockvisor trace-check` says about each of the lab's timelines, in
// report.md beside the picture: pvbounded's bound oracle and the NUMA locks'
// stated bound (verdicts), and where the lock's time went by acquisition
// path (how many acquisitions each path made, its handoff latency, how long
// the lock sat free before it and what the acquirer did meanwhile). A
// preset run on a big host then answers "where does a handoff's time go at
// this size" in its report, without a second command.
//
// The check runs once per trace, in this process, and is kept beside it as
// NAME.check.json (trace-check's --json) and NAME.check.txt (its text); the
// report is rendered from the JSON, so `lab report` costs no second read of
// a large trace. A trace that cannot be read costs the report its table,
// never the lab.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace lockvisor::lab {

// What the check leaves beside the trace (the trace's extension replaced).
inline constexpr const char* kCheckJsonExtension = ".check.json";
inline constexpr const char* kCheckTextExtension = ".check.txt";

// Makes NAME.check.json and NAME.check.txt for the trace at `dir`/`trace`
// (a path relative to the lab directory, as timelines.jsonl records it)
// unless the JSON exists. Returns the JSON, or a string saying in one line
// why there is none.
nlohmann::json timeline_check(const std::filesystem::path& dir, const std::string& trace);

// report.md's lines for one check (a JSON object as trace_check_json
// writes it; a string: the reason there is none). `trace` is the trace's
// relative path, for the links to the text and JSON.
std::string timeline_check_markdown(const nlohmann::json& check, const std::string& trace);

}  // namespace lockvisor::lab
