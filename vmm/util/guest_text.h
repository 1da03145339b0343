// Text that came from a guest (PRINT, ASSERT, result keys, case names,
// serial output) or from a careless command line, made safe to keep, to
// put into JSON and to show on a terminal.
#pragma once
#include <string>
#include <string_view>

namespace lockvisor {

// `bytes` as valid UTF-8: every byte sequence that is not well-formed UTF-8
// (stray continuation bytes, overlong forms, surrogates, code points above
// U+10FFFF, truncated sequences) becomes U+FFFD, one per maximal invalid
// subpart as Unicode recommends. Sets *replaced when anything was replaced.
// The result is always accepted by nlohmann::json's dump().
std::string valid_utf8(std::string_view bytes, bool* replaced = nullptr);

// One line of guest text as it may be printed on a console: C0 control
// characters (newline included), DEL and the C1 controls U+0080..U+009F are
// written as \xHH (\n, \r and \t as themselves escaped), and a backslash as
// "\\", so that escaped and literal text cannot be confused. The input is
// made valid UTF-8 first. The result never contains a control character, so
// a guest can neither end the line nor move the cursor.
std::string console_escape(std::string_view bytes);

}  // namespace lockvisor
