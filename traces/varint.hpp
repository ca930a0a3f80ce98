#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

// LEB128 varints: 7 bits per byte, low bits first, high bit set on every byte but the last.
namespace kvtier::traces::varint {

inline constexpr int kMaxBytes = 10;  // a uint64 needs at most 10 bytes

inline void put(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(static_cast<std::uint8_t>(v) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Decodes one varint from [p, end). Returns false when the bytes run out before the last
// byte or the value needs more than 64 bits (corrupt input); p is advanced on success only.
inline bool get(const std::uint8_t*& p, const std::uint8_t* end, std::uint64_t& v) {
  if (p < end && *p < 0x80) {  // fast path: most gaps fit in one byte
    v = *p++;
    return true;
  }
  std::uint64_t r = 0;
  const std::uint8_t* q = p;
  for (int shift = 0; shift < 64; shift += 7) {
    if (q == end) return false;
    const std::uint8_t b = *q++;
    if (shift == 63 && b > 1) return false;
    r |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) {
      v = r;
      p = q;
      return true;
    }
  }
  return false;
}

// As get(), for a caller that knows at least kMaxBytes bytes are readable at p (it checks
// the bytes left once for a whole run of varints instead of once per byte).
inline bool get_unchecked(const std::uint8_t*& p, std::uint64_t& v) {
  std::uint64_t b = p[0];
  if (b < 0x80) {
    v = b;
    ++p;
    return true;
  }
  std::uint64_t r = b & 0x7f;
  for (int i = 1; i < kMaxBytes; ++i) {
    b = p[i];
    if (i == kMaxBytes - 1 && b > 1) return false;
    r |= (b & 0x7f) << (7 * i);
    if (b < 0x80) {
      v = r;
      p += i + 1;
      return true;
    }
  }
  return false;
}

}  // namespace kvtier::traces::varint
