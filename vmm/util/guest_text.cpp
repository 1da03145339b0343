#include "vmm/util/guest_text.h"

#include <cstdint>

#include <fmt/format.h>

namespace lockvisor {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at s[i] (Unicode Table 3-7), or
// 0 with *invalid_length = the bytes of its maximal invalid subpart (>= 1).
std::size_t sequence_length(std::string_view s, std::size_t i, std::size_t* invalid_length) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  *invalid_length = 1;
  if (b0 < 0x80) return 1;
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;   // no overlong forms
    if (b0 == 0xED) hi = 0x9F;   // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;   // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;   // nothing above U+10FFFF
  } else {
    return 0;  // a continuation byte or C0, C1, F5..FF: never a lead byte
  }
  for (std::size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char b = byte(i + k);
    const unsigned char low = k == 1 ? lo : 0x80, high = k == 1 ? hi : 0xBF;
    if (b < low || b > high) return 0;
    *invalid_length = k + 1;  // the prefix so far is a valid start
  }
  return need;
}

}  // namespace

std::string valid_utf8(std::string_view bytes, bool* replaced) {
  std::string out;
  out.reserve(bytes.size());
  bool any = false;
  for (std::size_t i = 0; i < bytes.size();) {
    std::size_t invalid = 1;
    if (const std::size_t n = sequence_length(bytes, i, &invalid); n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      // One U+FFFD for the maximal subpart: the lead byte and the
      // continuation bytes accepted before the one that broke the sequence.
      out.append(kReplacement);
      i += invalid;
      any = true;
    }
  }
  if (replaced != nullptr && any) *replaced = true;
  return out;
}

std::string console_escape(std::string_view bytes) {
  const std::string text = valid_utf8(bytes);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      // U+0080..U+009F (C1 controls; valid_utf8 guarantees the second byte
      // is a continuation byte): some terminals act on them (U+009B is CSI).
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace lockvisor
