// A 32-bit number written in hexadecimal on the command line (an SBI EID).
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace lockvisor {

// The whole of `text` as a hexadecimal number (with or without 0x) that fits
// in 32 bits; nullopt for anything else.
inline std::optional<std::uint32_t> parse_hex_u32(const std::string& text) {
  std::size_t used = 0;
  unsigned long value = 0;
  try {
    value = std::stoul(text, &used, 16);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || value > 0xFFFFFFFFul) return std::nullopt;
  return static_cast<std::uint32_t>(value);
}

}  // namespace lockvisor
