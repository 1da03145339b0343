// Little-endian integer stores and loads on byte buffers: every format in
// this folder (the Linux boot protocol, ACPI, the Intel MP table) is
// little-endian and packed, so tables are built as byte vectors rather than
// as C structs whose padding and alignment the compiler would choose.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace lockvisor::linuxboot {

// Stores `value` in `width` bytes at `offset`; the buffer must be large enough.
inline void put_le(std::span<std::uint8_t> bytes, std::size_t offset, std::uint64_t value, unsigned width) {
  for (unsigned i = 0; i < width; ++i) bytes[offset + i] = static_cast<std::uint8_t>(value >> (8 * i));
}
inline void put8(std::span<std::uint8_t> b, std::size_t o, std::uint8_t v) { put_le(b, o, v, 1); }
inline void put16(std::span<std::uint8_t> b, std::size_t o, std::uint16_t v) { put_le(b, o, v, 2); }
inline void put32(std::span<std::uint8_t> b, std::size_t o, std::uint32_t v) { put_le(b, o, v, 4); }
inline void put64(std::span<std::uint8_t> b, std::size_t o, std::uint64_t v) { put_le(b, o, v, 8); }

// Copies the characters of `text` (no terminator) to `offset`.
inline void put_chars(std::span<std::uint8_t> bytes, std::size_t offset, std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) bytes[offset + i] = static_cast<std::uint8_t>(text[i]);
}

inline std::uint64_t get_le(std::span<const std::uint8_t> bytes, std::size_t offset, unsigned width) {
  std::uint64_t value = 0;
  for (unsigned i = 0; i < width; ++i) value |= std::uint64_t{bytes[offset + i]} << (8 * i);
  return value;
}
inline std::uint8_t get8(std::span<const std::uint8_t> b, std::size_t o) { return static_cast<std::uint8_t>(get_le(b, o, 1)); }
inline std::uint16_t get16(std::span<const std::uint8_t> b, std::size_t o) { return static_cast<std::uint16_t>(get_le(b, o, 2)); }
inline std::uint32_t get32(std::span<const std::uint8_t> b, std::size_t o) { return static_cast<std::uint32_t>(get_le(b, o, 4)); }
inline std::uint64_t get64(std::span<const std::uint8_t> b, std::size_t o) { return get_le(b, o, 8); }

// The byte that makes the 8-bit sum of `bytes` (with that byte in place of a
// zero) equal to 0: the checksum rule of ACPI tables and of MP structures.
inline std::uint8_t checksum_byte(std::span<const std::uint8_t> bytes) {
  std::uint8_t sum = 0;
  for (std::uint8_t b : bytes) sum = static_cast<std::uint8_t>(sum + b);
  return static_cast<std::uint8_t>(-sum);
}

inline std::uint8_t byte_sum(std::span<const std::uint8_t> bytes) {
  std::uint8_t sum = 0;
  for (std::uint8_t b : bytes) sum = static_cast<std::uint8_t>(sum + b);
  return sum;
}

}  // namespace lockvisor::linuxboot
