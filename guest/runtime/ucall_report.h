// The guest half of the report channel (lockvisor/abi/ucall.h). Each call
// fills this vCPU's own Ucall slot and sends it to the VMM: one exit
// (runtime/ucall_transport.h, per architecture).
#pragma once
#include "lockvisor/abi/ucall.h"
#include "runtime/format.h"

namespace guest {
using namespace lockvisor::abi;

void print(const char* text);
void report_result(const char* key, u64 value, ResultKind kind = ResultKind::kUnsigned);
void report_array(const char* key, const u64* values, u64 count, ResultKind kind);
// A lock workload's window mark (kWindowMark: kWindowStart or kWindowEnd).
void report_window_mark(u64 edge);
void case_begin(const char* name);
void case_end(const char* name, bool passed);
[[noreturn]] void assert_fail(const char* file, u32 line, const char* text);
// Ends this vCPU's program; the VMM does not resume it.
[[noreturn]] void done(u64 exit_code);

}  // namespace guest
