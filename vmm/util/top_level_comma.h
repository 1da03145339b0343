// The first comma of a list that is not inside parentheses: the separator of
// lists whose items may themselves hold a comma in parentheses (the host-CPU
// word max(2cpus,1/8) inside max(...), or as a --vm pcpus= value).
#pragma once
#include <cstddef>
#include <string_view>

namespace lockvisor {

// Its position in `text` at or after `from`, or npos. A ')' without its '('
// is ignored.
inline std::size_t find_top_level_comma(std::string_view text, std::size_t from = 0) {
  int depth = 0;
  for (std::size_t i = from; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && depth > 0) --depth;
    if (text[i] == ',' && depth == 0) return i;
  }
  return std::string_view::npos;
}

}  // namespace lockvisor
