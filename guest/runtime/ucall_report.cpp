#include "runtime/ucall_report.h"

#include "runtime/string.h"
#include "runtime/ucall_transport.h"

namespace guest {
namespace {

// One slot per vCPU: a vCPU is stopped in the VMM while its slot is read,
// so slots need no locking.
Ucall g_slots[kMaxVcpus];
// Each vCPU's window-mark message (report_window_mark).
Ucall g_marks[kMaxVcpus];

Ucall& slot(UcallType type) {
  Ucall& u = g_slots[ucall_cpu()];
  u.magic = kUcallMagic;
  u.type = type;
  u.args[0] = u.args[1] = u.args[2] = u.args[3] = 0;
  u.file[0] = '\0';
  u.text[0] = '\0';
  return u;
}

}  // namespace

void print(const char* text) {
  Ucall& u = slot(UcallType::kPrint);
  str_copy(u.text, text, kUcallTextBytes);
  ucall_send(&u);
}

void report_result(const char* key, u64 value, ResultKind kind) {
  Ucall& u = slot(UcallType::kResult);
  str_copy(u.text, key, kUcallTextBytes);
  u.args[0] = value;
  u.args[1] = static_cast<u64>(kind);
  ucall_send(&u);
}

void report_array(const char* key, const u64* values, u64 count, ResultKind kind) {
  Ucall& u = slot(UcallType::kResultArray);
  str_copy(u.text, key, kUcallTextBytes);
  u.args[0] = reinterpret_cast<u64>(values);  // identity-mapped: virtual == physical
  u.args[1] = count;
  u.args[2] = static_cast<u64>(kind);
  ucall_send(&u);
}

void report_window_mark(u64 edge) {
  // Its own slot: no field but the edge changes between marks, so nothing
  // else is rewritten on the way into and out of the measured window.
  Ucall& u = g_marks[ucall_cpu()];
  u.magic = kUcallMagic;
  u.type = UcallType::kWindowMark;
  u.args[0] = edge;
  ucall_send(&u);
}

void case_begin(const char* name) {
  Ucall& u = slot(UcallType::kCaseBegin);
  str_copy(u.text, name, kUcallTextBytes);
  ucall_send(&u);
}

void case_end(const char* name, bool passed) {
  Ucall& u = slot(UcallType::kCaseEnd);
  str_copy(u.text, name, kUcallTextBytes);
  u.args[0] = passed ? 1 : 0;
  ucall_send(&u);
}

// The repository's name of a source file, which is what the VMM prints to
// users: __FILE__ is whatever path the compiler was handed, absolute or
// relative to the build directory ("../../guest/runtime/lock_tuning.cpp"),
// by generator and by ccache's base_dir rewriting (ccache also leaves
// -fmacro-prefix-map out of its hash, so a compiler flag cannot be relied
// on). Every guest source lives under guest/: the path from the last path
// component "guest/" on.
namespace {
const char* repository_path(const char* file) {
  constexpr char kTop[] = "guest/";
  const char* out = file;
  for (const char* p = file; *p != '\0'; ++p) {
    if (p != file && p[-1] != '/') continue;
    unsigned i = 0;
    while (kTop[i] != '\0' && p[i] == kTop[i]) ++i;
    if (kTop[i] == '\0') out = p;
  }
  return out;
}
}  // namespace

void assert_fail(const char* file, u32 line, const char* text) {
  Ucall& u = slot(UcallType::kAssertFail);
  str_copy(u.file, repository_path(file), kUcallFileBytes);
  str_copy(u.text, text, kUcallTextBytes);
  u.args[0] = line;
  ucall_last(&u);  // the VMM ends the run; never fall through
}

void done(u64 exit_code) {
  Ucall& u = slot(UcallType::kDone);
  u.args[0] = exit_code;
  ucall_last(&u);
}

}  // namespace guest
