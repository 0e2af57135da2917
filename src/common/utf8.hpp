// UTF-8 validation shared by the audit log's canonical JSON, the assessor's "is this Python
// source" check, the names of job files and the result's output streams: the rules of
// nlohmann's decoder, which are CPython's too (no overlong forms, surrogates or code points
// above U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sandboxrun {

inline bool utf8_continuation(unsigned char c) noexcept { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting with the non-ASCII byte at p[0], of which `avail`
// bytes are readable, or 0 when it is invalid.
inline size_t utf8_len(const unsigned char* p, size_t avail) noexcept {
  const unsigned char c = p[0];
  if (c >= 0xC2 && c <= 0xDF) return avail >= 2 && utf8_continuation(p[1]) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF)
    return avail >= 3 && utf8_continuation(p[1]) && utf8_continuation(p[2]) && !(c == 0xE0 && p[1] < 0xA0) &&
                   !(c == 0xED && p[1] > 0x9F)
               ? 3
               : 0;
  if (c >= 0xF0 && c <= 0xF4)
    return avail >= 4 && utf8_continuation(p[1]) && utf8_continuation(p[2]) && utf8_continuation(p[3]) &&
                   !(c == 0xF0 && p[1] < 0x90) && !(c == 0xF4 && p[1] > 0x8F)
               ? 4
               : 0;
  return 0;
}

// Offset of the first byte that does not start or continue a valid UTF-8 sequence; npos if none.
inline size_t first_invalid_utf8(std::string_view s) noexcept {
  for (size_t i = 0; i < s.size();) {
    // Text is nearly all ASCII: skip it eight bytes at a time (callers read whole files).
    for (uint64_t w; i + 8 <= s.size(); i += 8) {
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
    }
    if (i >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t len = utf8_len(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

// True when `s` is valid UTF-8 (what JSON can carry without replacing bytes).
inline bool valid_utf8(std::string_view s) noexcept { return first_invalid_utf8(s) == std::string_view::npos; }

// The length of `s` without a multi-byte sequence cut off at its end (at most 3 bytes), for
// text that a byte limit may have cut in the middle of a character.
inline size_t utf8_complete_prefix(std::string_view s) noexcept {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if (c < 0x80) return s.size();  // ASCII: nothing was cut
    if ((c & 0xC0) == 0xC0) {        // a lead byte: is its sequence whole?
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      return need > back ? s.size() - back : s.size();
    }
  }
  return s.size();
}

}  // namespace sandboxrun
